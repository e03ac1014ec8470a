# The planner of the local lab (`make lab`). The lab fills in per run: the
# Nomad and Consul addresses, the API address, data_dir (the embedded store)
# and the write token, which it prints.
round_interval = "5s"
log_level      = "INFO"

# Everything in the lab is on loopback.
network_interface = "lo"

store {
  backend = "embedded"
}

policy {
  name = "elastic-fifo"
}
