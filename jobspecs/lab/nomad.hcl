# Nomad for the local lab: one agent that is both server and client, on
# loopback. data_dir, plugin_dir, ports and the Consul address are rendered
# per run by the lab (internal/lab).
name      = "lab"
bind_addr = "127.0.0.1"
log_level = "INFO"

# A lab reaches no network beyond loopback.
disable_update_check = true

# On loopback Nomad will not guess what to advertise.
advertise {
  http = "127.0.0.1"
  rpc  = "127.0.0.1"
  serf = "127.0.0.1"
}

server {
  enabled          = true
  bootstrap_expect = 1
}

client {
  enabled           = true
  network_interface = "lo"

  # The lab's node stands in for an 8-GPU server, and a laptop's CPU is not
  # one's: each worker asks 500 MHz and each launcher 200
  # (planner/nomadjob), so 8 workers beside 4 launchers need 4,800 MHz,
  # more than a 2-core 2 GHz machine fingerprints (3,992). Nomad would then
  # leave a worker the planner placed unplaced ("Dimension cpu exhausted")
  # and the job would wait for it. The lab's processes share the real cores
  # as they can. On a real GPU server, leave this out.
  cpu_total_compute = 16000

  options {
    # Drivers a GPU training lab does not use; they only slow and clutter startup.
    "driver.denylist" = "docker,podman,qemu,java"

    # Where the environment sets AWS_CA_BUNDLE, the cloud fingerprinters fail
    # the client; a laptop lab has no cloud to find anyway.
    "fingerprint.denylist" = "env_aws,env_gce,env_azure,env_digitalocean"
  }
}

# Nomad registers its own services (nomad, nomad-client) in the lab's Consul.
consul {
  server_auto_join = false
  client_auto_join = false
}

plugin "raw_exec" {
  config {
    enabled = true
  }
}

# The project's GPU device plugin. The lab serves a SIMULATED node: 8 x A100
# built on go-nvml's mock, so Nomad schedules real `device "nvidia/gpu"`
# requests on a machine without GPUs. On a GPU machine set backend = "nvml"
# (or "auto"); the plugin refuses "simulated" where NVML sees real GPUs.
plugin "schedulearn-gpu" {
  config {
    backend            = "simulated"
    fingerprint_period = "5s"
  }
}

# The horovod task driver (docs/driver.md). The block is named after the
# binary in plugin_dir. `make python-deps` installs horovodrun and torchrun
# into .cache/venv; a relative bin_dirs entry is resolved against the agent's
# working directory, the repository root under `make lab`. Discovery reaches
# Consul and Nomad at their default addresses (as `make lab` runs them).
# No secret here: each job brings its own, from its Nomad variable.
plugin "nomad-driver-horovod" {
  config {
    bin_dirs = [".cache/venv/bin"]
    # A warm interpreter that imports these once, when the client starts:
    # a worker's standby is forked from it (docs/driver.md, Rescaling).
    standby_preload = ["torch", "horovod.torch"]
  }
}
