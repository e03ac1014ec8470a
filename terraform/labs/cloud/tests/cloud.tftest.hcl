# terraform test: the cloud lab's rendering (nothing is created).

run "renders_cloud_init" {
  command = plan
  assert {
    condition     = startswith(output.server_user_data, "#cloud-config") && strcontains(output.server_user_data, "bootstrap_expect = 3")
    error_message = "Three servers by default, bootstrapping together."
  }
  assert {
    condition     = strcontains(output.client_user_data["a100"], "provider=aws tag_key=schedulearn-cluster tag_value=schedulearn") && strcontains(output.client_user_data["a100"], "backend            = \"nvml\"")
    error_message = "GPU clients join by cloud auto-join and read real GPUs through NVML."
  }
  assert {
    condition     = strcontains(output.client_user_data["a100"], "server_join {") && strcontains(output.client_user_data["a100"], "{{ GetPrivateIP }}")
    error_message = "Clients find the servers with server_join and advertise their private IP."
  }
  assert {
    condition     = !strcontains(output.client_user_data["a100"], "name       = \"a100\"")
    error_message = "Nodes are named by their hostnames, not by the pool."
  }
}

run "no_pools" {
  command = plan
  variables {
    pools = []
  }
  expect_failures = [var.pools]
}

run "even_servers" {
  command = plan
  variables {
    servers = 2
  }
  expect_failures = [var.servers]
}
