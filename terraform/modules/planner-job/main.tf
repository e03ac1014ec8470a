# The planner as a Nomad job: `instances` copies of `schedulearn agent` on
# the Consul store (one leader through a Consul lock, the others standing
# by), each on its own host, its API token read from a Nomad Variable.
# Renders the job's HCL (built-in Terraform only); register it with
# `nomad job run` (or the lab), after putting the token in the variable:
#
#   nomad var put nomad/jobs/<job_name> token=<secret>

terraform {
  required_version = ">= 1.6.0"
}

variable "job_name" {
  type    = string
  default = "schedulearn-planner"
  validation {
    condition     = can(regex("^[a-z0-9][a-z0-9-]{0,62}$", var.job_name))
    error_message = "job_name must be 1 to 63 lowercase letters, digits or '-'."
  }
}

variable "instances" {
  description = "How many planners run; one leads, the others take over when it goes."
  type        = number
  default     = 2
  validation {
    condition     = var.instances >= 1 && var.instances <= 7 && floor(var.instances) == var.instances
    error_message = "instances must be a whole number from 1 to 7."
  }
}

variable "binary" {
  description = "The schedulearn binary on every client that may run the planner."
  type        = string
}

variable "datacenters" {
  type    = list(string)
  default = ["*"]
}

variable "node_pool" {
  description = "The node pool the planners run in."
  type        = string
  default     = "all"
}

variable "policy" {
  type    = string
  default = "elastic-fifo"
}

variable "pools" {
  description = "Planner pools: each the nodes carrying the Consul service tagged with its name."
  type        = list(string)
  default     = []
}

variable "pool_service" {
  type    = string
  default = "schedulearn-pool"
}

variable "network_interface" {
  description = "Horovod's interface between nodes."
  type        = string
  default     = ""
}

variable "store_prefix" {
  type    = string
  default = "schedulearn/"
}

locals {
  jobspec = templatefile("${path.module}/templates/planner.nomad.hcl.tftpl", {
    job_name          = var.job_name
    instances         = var.instances
    binary            = var.binary
    datacenters       = var.datacenters
    node_pool         = var.node_pool
    policy            = var.policy
    pools             = var.pools
    pool_service      = var.pool_service
    network_interface = var.network_interface
    store_prefix      = var.store_prefix
  })
}

output "jobspec" {
  description = "The planner's Nomad job (HCL)."
  value       = local.jobspec
}

output "token_variable" {
  description = "The Nomad Variable whose item \"token\" is the planner's API token."
  value       = "nomad/jobs/${var.job_name}"
}
