# The planner of the local lab (`make lab`). The lab fills in per run: the
# Nomad and Consul addresses, the API address, data_dir (the embedded store),
# the tokens (write, and read-only), which it prints, and checkpoint_dirs
# (the run's Nomad allocations, where the example writes its checkpoints)
# unless this file sets it; and nomad_alloc_dirs (the same allocations), so
# that a job delivers only from its own allocations, never from secrets/.
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

# Teams' queues (docs/policies.md). Without any, one queue "default" holds
# the whole cluster and every job (a jobspec naming another queue is
# refused). For example:
#
# queue "vision" {
#   nominal         = 4   # GPUs guaranteed to its jobs
#   borrowing_limit = 4   # above nominal, from idle queues
# }
# queue "default" {
#   nominal = 4           # jobspecs without queue = "..." come here
# }
