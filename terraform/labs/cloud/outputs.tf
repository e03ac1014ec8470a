output "server_user_data" {
  description = "cloud-init for each of the var.servers server instances."
  value       = local.server_user_data
}

output "client_user_data" {
  description = "cloud-init for the GPU instances, by pool."
  value       = local.client_user_data
}

output "planner_jobspec" {
  description = "The planner as a Nomad job: `nomad var put nomad/jobs/schedulearn-planner token=...`, then `nomad job run` it."
  value       = module.planner_job.jobspec
}

output "instances" {
  description = "What to create: servers, and per pool the instance type and count."
  value = {
    servers = var.servers
    pools   = { for p in var.pools : p.name => { nodes = p.nodes, instance_type = p.instance_type } }
    tag     = { key = "schedulearn-cluster", value = var.cluster_tag }
  }
}
