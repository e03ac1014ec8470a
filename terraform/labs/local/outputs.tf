output "hosts" {
  description = "Each host: its name, address, whether it carries the servers, whether it runs a planner, and its agents' configurations."
  # The agents' configurations are kept out of plans and logs.
  sensitive = true
  value = [for n in var.nodes : {
    name          = n.name
    address       = local.addresses[n.name]
    servers       = n.name == local.server
    planner       = contains(local.planner_hosts, n.name)
    pool          = n.pool
    gpus          = module.client[n.name].gpus
    consul_config = module.client[n.name].consul_config
    nomad_configs = concat(
      n.name == local.server ? [module.server.nomad_config] : [],
      [module.client[n.name].nomad_config],
    )
  }]
}

output "network" {
  description = "The bridge's address (in the root namespace) and the prefix length."
  value = {
    subnet         = var.subnet
    bridge_address = local.bridge_address
    prefix_length  = local.prefix_length
  }
}

output "nomad_address" {
  value = "http://${local.server_address}:4646"
}

output "consul_address" {
  value = "${local.server_address}:8500"
}

output "planners" {
  description = "The lab's planners, in order: the host each runs on, its API address, and its configuration (HCL; the lab adds its data dir, tokens, delivery dir and checkpoint_dirs). They share the Consul store: one leads, the others stand by and take over."
  value = [for h in local.planner_hosts : {
    host    = h
    address = "http://${local.addresses[h]}:${var.planner.port}"
    config  = local.planner_configs[h]
  }]
}

output "planner_proxy_address" {
  description = "Where the lab runs its planner proxy (on the bridge, in the root namespace): it forwards to whichever planner leads; the planners advertise it to training tasks."
  value       = local.planner_proxy
}

output "planner_address" {
  description = "The first planner's API address."
  value       = "http://${local.addresses[local.planner_hosts[0]]}:${var.planner.port}"
}

output "planner_jobspec" {
  description = "The planner as a Nomad job (HCL): register it after putting its token in the variable planner_token_variable."
  value       = module.planner_job.jobspec
}

output "planner_token_variable" {
  value = module.planner_job.token_variable
}
