# The planner of the local lab (`make lab`). The lab fills in per run: the
# Nomad and Consul addresses, the API address, data_dir (the embedded store),
# the tokens (write, and read-only), which it prints, and checkpoint_dirs
# (the run's Nomad allocations, where the example writes its checkpoints)
# unless this file sets it.
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
