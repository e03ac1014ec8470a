# terraform test: the local lab's rendering and its variables' validation.

run "default_lab" {
  command = plan

  assert {
    condition     = length(output.hosts) == 3
    error_message = "The default lab has three hosts."
  }
  assert {
    condition     = [for h in output.hosts : h.address] == ["10.213.0.2", "10.213.0.3", "10.213.0.4"]
    error_message = "Hosts take the subnet's addresses from .2 on."
  }
  assert {
    condition     = [for h in output.hosts : h.servers] == [true, false, false]
    error_message = "The first host, and only it, carries the servers."
  }
  assert {
    condition     = length(output.hosts[0].nomad_configs) == 2 && length(output.hosts[1].nomad_configs) == 1
    error_message = "The first host runs a Nomad server and client, the others a client."
  }
  assert {
    condition     = strcontains(output.hosts[2].nomad_configs[0], "\"Tesla V100-SXM2-16GB\"") && strcontains(output.hosts[2].nomad_configs[0], "count      = 2")
    error_message = "node3 simulates two V100s."
  }
  assert {
    condition     = length(distinct([for h in output.hosts : regex("uuid_seed  = \"([^\"]+)\"", h.nomad_configs[length(h.nomad_configs) - 1])[0]])) == 3
    error_message = "Each host simulates GPUs with its own UUID seed."
  }
  assert {
    condition     = alltrue([for h in output.hosts : strcontains(h.nomad_configs[length(h.nomad_configs) - 1], "standby_preload    = [\"torch\",\"horovod.torch\"]")])
    error_message = "Every client has a warm interpreter with torch and Horovod."
  }
  assert {
    condition     = alltrue([for h in output.hosts : strcontains(h.nomad_configs[length(h.nomad_configs) - 1], "standby_dir        = \"${var.data_root}/${h.name}/standby\"")])
    error_message = "Each client's warm interpreter has its socket in the host's data directory (removed with the lab), not in /run."
  }
  assert {
    condition     = strcontains(output.hosts[1].consul_config, "retry_join     = [\"10.213.0.2\"]") && strcontains(output.hosts[0].consul_config, "server           = true")
    error_message = "Clients join the Consul server on the first host."
  }
  assert {
    condition     = strcontains(output.hosts[2].consul_config, "tags = [\"v100\"]")
    error_message = "node3 registers the v100 pool service."
  }
  assert {
    condition     = alltrue([for p in output.planners : strcontains(p.config, "pool \"a100\"") && strcontains(p.config, "pool \"v100\"")])
    error_message = "Each planner has one pool per node pool."
  }
  assert {
    condition     = [for p in output.planners : p.host] == ["node1", "node2"] && [for h in output.hosts : h.planner] == [true, true, false]
    error_message = "By default the first two hosts run a planner each."
  }
  assert {
    condition     = [for p in output.planners : p.address] == ["http://10.213.0.2:4680", "http://10.213.0.3:4680"] && output.planner_address == "http://10.213.0.2:4680"
    error_message = "Each planner listens on its host's address."
  }
  assert {
    condition     = alltrue([for p in output.planners : strcontains(p.config, "backend = \"consul\"") && strcontains(p.config, "prefix  = \"schedulearn-lab/\"")])
    error_message = "The planners share the Consul store, as the planner-job module's do."
  }
  assert {
    condition     = strcontains(output.planners[1].config, "address = \"10.213.0.3:8500\"") && strcontains(output.planners[1].config, "address = \"http://10.213.0.3:4646\"") && strcontains(output.planners[1].config, "bind_addr         = \"10.213.0.3:4680\"")
    error_message = "Each planner talks to its own host's Consul and Nomad agents and binds its host's address."
  }
  assert {
    condition     = output.planner_proxy_address == "http://10.213.0.1:4680" && alltrue([for p in output.planners : strcontains(p.config, "advertise_addr    = \"http://10.213.0.1:4680\"")])
    error_message = "The planner proxy listens on the bridge, and the planners advertise it to training tasks (whichever leads gets their reports)."
  }
  assert {
    condition     = output.network.bridge_address == "10.213.0.1" && output.network.prefix_length == 24
    error_message = "The bridge takes the subnet's first address."
  }
}

run "one_host_in_another_subnet" {
  command = plan
  variables {
    subnet = "10.213.7.0/24"
    nodes  = [{ name = "solo", gpu = { count = 8 } }]
  }
  assert {
    condition     = length(output.hosts) == 1 && output.hosts[0].address == "10.213.7.2" && output.hosts[0].servers
    error_message = "A one-host lab carries everything on its only host."
  }
  assert {
    condition     = length(output.planners) == 1 && output.planners[0].host == "solo" && output.planner_address == "http://10.213.7.2:4680"
    error_message = "A one-host lab runs one planner, on its only host."
  }
}

run "planners_named" {
  command = plan
  variables {
    planners = ["node3", "node1"]
    planner  = { port = 4700, store_prefix = "team-a/lab/" }
  }
  assert {
    condition     = [for p in output.planners : p.address] == ["http://10.213.0.4:4700", "http://10.213.0.2:4700"] && [for h in output.hosts : h.planner] == [true, false, true]
    error_message = "The planners run on the hosts named, in that order, on the port given."
  }
  assert {
    condition     = strcontains(output.planners[0].config, "prefix  = \"team-a/lab/\"")
    error_message = "The planners use the store prefix given."
  }
}

run "planner_on_unknown_host" {
  command = plan
  variables {
    planners = ["node1", "node9"]
  }
  expect_failures = [var.planners]
}

run "planner_host_twice" {
  command = plan
  variables {
    planners = ["node1", "node1"]
  }
  expect_failures = [var.planners]
}

run "no_planners" {
  command = plan
  variables {
    planners = []
  }
  expect_failures = [var.planners]
}

run "store_prefix_without_slash" {
  command = plan
  variables {
    planner = { store_prefix = "schedulearn" }
  }
  expect_failures = [var.planner]
}

run "no_nodes" {
  command = plan
  variables {
    nodes = []
  }
  expect_failures = [var.nodes]
}

run "gpu_count_below_one" {
  command = plan
  variables {
    nodes = [{ name = "node1", gpu = { count = 0 } }]
  }
  expect_failures = [var.nodes]
}

run "unknown_backend" {
  command = plan
  variables {
    nodes = [{ name = "node1", gpu = { backend = "cuda" } }]
  }
  expect_failures = [var.nodes]
}

run "duplicate_names" {
  command = plan
  variables {
    nodes = [{ name = "node1" }, { name = "node1" }]
  }
  expect_failures = [var.nodes]
}

run "public_subnet" {
  command = plan
  variables {
    subnet = "8.8.8.0/24"
  }
  expect_failures = [var.subnet]
}

run "no_warm_interpreter" {
  command = plan
  variables {
    standby = { preload = [] }
  }
  assert {
    condition     = alltrue([for h in output.hosts : !strcontains(h.nomad_configs[length(h.nomad_configs) - 1], "standby_preload")])
    error_message = "standby.preload = [] starts no warm interpreter."
  }
}
