# terraform test: the GPU client's rendering and validation.

variables {
  name       = "gpu1"
  address    = "10.213.0.3"
  servers    = ["10.213.0.2:4647"]
  data_dir   = "/tmp/lab/gpu1"
  plugin_dir = "/opt/plugins"
  horovod    = { bin_dirs = ["/opt/venv/bin"] }
}

run "simulated" {
  command = plan
  variables {
    node_pool   = "a100"
    consul_join = ["10.213.0.2"]
    datasets    = ["imagenet", "coco"]
    gpu         = { count = 4, seed = "seed-1" }
  }
  assert {
    condition     = strcontains(output.nomad_config, "backend            = \"simulated\"") && strcontains(output.nomad_config, "uuid_seed  = \"seed-1\"")
    error_message = "The simulated backend is configured with its seed."
  }
  assert {
    condition     = strcontains(output.nomad_config, "node_pool         = \"a100\"") && strcontains(output.nomad_config, "\"datasets\" = \"imagenet,coco\"")
    error_message = "The node pool and the data sets are in the client's config."
  }
  assert {
    condition     = strcontains(output.consul_config, "tags = [\"a100\"]") && !strcontains(output.consul_config, "server           = true")
    error_message = "A client agent registers its pool service."
  }
}

run "nvml" {
  command = plan
  variables {
    gpu = { backend = "nvml" }
  }
  assert {
    condition     = strcontains(output.nomad_config, "backend            = \"nvml\"") && !strcontains(output.nomad_config, "simulated {")
    error_message = "The nvml backend has no simulated block."
  }
}

run "unknown_backend" {
  command = plan
  variables {
    gpu = { backend = "rocm" }
  }
  expect_failures = [var.gpu]
}

run "gpu_count_below_one" {
  command = plan
  variables {
    gpu = { count = 0 }
  }
  expect_failures = [var.gpu]
}

run "no_servers" {
  command = plan
  variables {
    servers = []
  }
  expect_failures = [var.servers]
}

run "pool_all" {
  command = plan
  variables {
    node_pool = "all"
  }
  expect_failures = [var.node_pool]
}

run "warm_interpreter" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch", "horovod.torch"] }
  }
  assert {
    condition     = strcontains(output.nomad_config, "standby_preload    = [\"torch\",\"horovod.torch\"]")
    error_message = "The driver's warm interpreter gets the modules to import."
  }
}

run "no_warm_interpreter_by_default" {
  command = plan
  assert {
    condition     = !strcontains(output.nomad_config, "standby_preload")
    error_message = "Without standby_preload the driver starts no warm interpreter."
  }
}

run "warm_interpreter_bad_module" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch; import os"] }
  }
  expect_failures = [var.horovod]
}

run "warm_interpreter_env" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch"], standby_env = { TEST_MARK = "m-1" } }
  }
  assert {
    condition     = strcontains(output.nomad_config, "standby_env {\n      TEST_MARK = \"m-1\"\n    }")
    error_message = "The warm interpreter's environment is a block of the driver's config."
  }
}

run "warm_interpreter_env_startup_variable" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch"], standby_env = { PYTHONPATH = "/x" } }
  }
  expect_failures = [var.horovod]
}

run "warm_interpreter_dir" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch"], standby_dir = "/srv/node1/standby" }
  }
  assert {
    condition     = strcontains(output.nomad_config, "standby_dir        = \"/srv/node1/standby\"")
    error_message = "standby_dir is the driver's."
  }
}

run "warm_interpreter_dir_too_long" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch"], standby_dir = "/a-path-that-is-longer-than-a-unix-socket-address-leaves-room-for" }
  }
  expect_failures = [var.horovod]
}

run "warm_interpreter_dir_relative" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], standby_preload = ["torch"], standby_dir = "standby" }
  }
  expect_failures = [var.horovod]
}

run "fence_after_below_the_servers_grace" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"] }
  }
  assert {
    condition     = strcontains(output.nomad_config, "fence_after        = \"4s\"")
    error_message = "The driver's fence fires before the lab servers' heartbeat grace (5s)."
  }
}

run "fence_after_not_a_duration" {
  command = plan
  variables {
    horovod = { bin_dirs = ["/opt/venv/bin"], fence_after = "soon" }
  }
  expect_failures = [var.horovod]
}
