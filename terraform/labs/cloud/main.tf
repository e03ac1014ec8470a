# A cloud lab: Nomad/Consul servers and pools of GPU instances, configured
# by cloud-init rendered from the same modules as the local lab. This root
# renders the user data only (built-in Terraform: no provider); create the
# instances with your cloud's provider, e.g. aws.tf.example, which was not
# run here (see README.md).

terraform {
  required_version = ">= 1.6.0"
}

locals {
  join      = ["provider=${var.cloud} tag_key=schedulearn-cluster tag_value=${var.cluster_tag}"]
  data_root = "/var/lib/schedulearn"
  # Known on each machine only: the agents resolve it at start.
  address = "{{ GetPrivateIP }}"
}

module "server" {
  source           = "../../modules/nomad-server"
  name             = "server"
  address          = local.address
  data_dir         = local.data_root
  bootstrap_expect = var.servers
}

module "consul_server" {
  source   = "../../modules/consul-agent"
  name     = "server"
  address  = local.address
  server   = true
  data_dir = "${local.data_root}/consul"
}

module "client" {
  source   = "../../modules/gpu-client"
  for_each = { for p in var.pools : p.name => p }

  name        = each.key
  address     = local.address
  servers     = local.join
  consul_join = local.join
  data_dir    = local.data_root
  plugin_dir  = "${var.install_dir}/plugins"
  node_pool   = each.key
  datasets    = each.value.datasets
  gpu         = { backend = "nvml" }
  horovod     = { bin_dirs = ["${var.install_dir}/venv/bin"] }
}

module "planner_job" {
  source            = "../../modules/planner-job"
  instances         = var.planner_instances
  binary            = "${var.install_dir}/bin/schedulearn"
  policy            = var.policy
  pools             = [for p in var.pools : p.name]
  network_interface = ""
}

locals {
  # Node names are the instances' hostnames, not the module's name.
  unnamed = { for k, v in module.client : k => {
    nomad  = replace(v.nomad_config, "/(?m)^name += .*$/", "")
    consul = replace(v.consul_config, "/(?m)^node_name += .*$/", "")
  } }
  server_user_data = templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    consul_config = replace(replace(module.consul_server.config, "/(?m)^node_name += .*$/", ""), "bootstrap_expect = 1", "bootstrap_expect = ${var.servers}\nretry_join       = ${jsonencode(local.join)}")
    nomad_config  = replace(module.server.nomad_config, "/(?m)^name += .*$/", "")
    install_dir   = var.install_dir
  })
  client_user_data = { for k, v in local.unnamed : k => templatefile("${path.module}/templates/cloud-init.yaml.tftpl", {
    consul_config = v.consul
    nomad_config  = v.nomad
    install_dir   = var.install_dir
  }) }
}
