# The local lab: several hosts on one machine, each its own network
# namespace on a bridge (internal/lab creates them from the `hosts` output
# and starts each host's agents with the configurations rendered here).
# Built-in Terraform only: no provider is needed, so `terraform init` works
# offline.

terraform {
  # 1.9: a variable's validation may name another variable (planners).
  required_version = ">= 1.9.0"
}

locals {
  bridge_address = cidrhost(var.subnet, 1)
  prefix_length  = tonumber(split("/", var.subnet)[1])
  addresses      = { for i, n in var.nodes : n.name => cidrhost(var.subnet, i + 2) }
  server         = var.nodes[0].name
  server_address = local.addresses[local.server]
  pools          = distinct([for n in var.nodes : n.pool])
  names          = [for n in var.nodes : n.name]
  # The planners' hosts: as given, or the first two nodes.
  planner_hosts = var.planners != null ? var.planners : slice(local.names, 0, min(2, length(local.names)))
  # The lab's planner proxy (internal/lab.PlannerProxy) on the bridge: it
  # forwards to whichever planner leads.
  planner_proxy = "http://${local.bridge_address}:${var.planner.port}"
}

module "server" {
  source    = "../../modules/nomad-server"
  name      = local.server
  address   = local.server_address
  data_dir  = "${var.data_root}/${local.server}"
  log_level = var.log_level
}

module "client" {
  source   = "../../modules/gpu-client"
  for_each = { for n in var.nodes : n.name => n }

  name        = each.key
  address     = local.addresses[each.key]
  servers     = [module.server.rpc_address]
  consul_join = each.key == local.server ? [] : [local.server_address]
  data_dir    = "${var.data_root}/${each.key}"
  plugin_dir  = var.plugin_dir
  node_pool   = each.value.pool
  meta        = each.value.meta
  datasets    = each.value.datasets
  gpu         = each.value.gpu
  horovod     = { bin_dirs = var.bin_dirs, standby_preload = var.standby.preload, standby_env = var.standby.env, standby_dir = "${var.data_root}/${each.key}/standby" }
  log_level   = var.log_level
}

# One planner per planner host, as the planner-job module runs them: on the
# Consul store (one leads through a Consul lock, the others stand by), each
# talking to its own host's Consul and Nomad agents.
locals {
  planner_configs = { for h in local.planner_hosts : h => templatefile("${path.module}/templates/planner.hcl.tftpl", {
    address           = local.addresses[h]
    port              = var.planner.port
    advertise_addr    = local.planner_proxy
    policy            = var.planner.policy
    round_interval    = var.planner.round_interval
    store_prefix      = var.planner.store_prefix
    pools             = local.pools
    pool_service      = "schedulearn-pool"
    network_interface = "eth0"
    log_level         = var.log_level
  }) }
}

# Records the rendered lab in the state, so `terraform apply` shows what
# changed between two runs.
resource "terraform_data" "lab" {
  input = {
    subnet = var.subnet
    hosts  = [for n in var.nodes : { name = n.name, address = local.addresses[n.name], pool = n.pool }]
  }
}

# The planner as a Nomad job (the lab runs its planners as processes on
# their hosts; this is the deployment Nomad restarts and moves).
module "planner_job" {
  source            = "../../modules/planner-job"
  instances         = var.planner.instances
  binary            = var.planner.binary
  policy            = var.planner.policy
  pools             = local.pools
  network_interface = "eth0"
}
