# A Consul agent's configuration: a server (the lab's first host) or a
# client that joins the servers, optionally registering the worker-pool
# service whose nodes form a planner pool (planner config: pool "<name>" {
# service = var.pool_service, tags = [<name>] }).
#
# Built-in Terraform only: the module renders the agent's HCL; whatever
# starts the agent (the local lab in internal/lab, cloud-init in the cloud
# lab) writes it to a file and runs `consul agent -config-file <it>`.

terraform {
  required_version = ">= 1.6.0"
}

variable "name" {
  description = "The node name in Consul (the host's name)."
  type        = string
  validation {
    condition     = can(regex("^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$", var.name))
    error_message = "The name must be a DNS label: lowercase letters, digits and '-', 1 to 63 characters."
  }
}

variable "address" {
  description = "The address the agent binds and advertises (the host's own address), or a go-sockaddr template such as \"{{ GetPrivateIP }}\" where it is known only on the machine."
  type        = string
  validation {
    condition     = can(cidrhost("${var.address}/32", 0)) || can(regex("^\\{\\{.*\\}\\}$", var.address))
    error_message = "The address must be an IPv4 address or a go-sockaddr template ({{ ... }})."
  }
}

variable "server" {
  description = "Run a server (bootstrapping a one-server cluster) rather than a client."
  type        = bool
  default     = false
}

variable "join" {
  description = "Addresses of the servers a client joins (retry_join): addresses, or cloud auto-join strings (\"provider=aws tag_key=... tag_value=...\")."
  type        = list(string)
  default     = []
}

variable "datacenter" {
  type    = string
  default = "dc1"
}

variable "data_dir" {
  description = "The agent's data directory."
  type        = string
}

variable "pool" {
  description = "The worker pool this node belongs to; \"\" registers no pool service."
  type        = string
  default     = ""
}

variable "pool_service" {
  description = "The Consul service a pool member registers, tagged with its pool."
  type        = string
  default     = "schedulearn-pool"
}

variable "log_level" {
  type    = string
  default = "INFO"
}

locals {
  config = templatefile("${path.module}/templates/consul.hcl.tftpl", {
    name         = var.name
    address      = var.address
    server       = var.server
    join         = var.join
    datacenter   = var.datacenter
    data_dir     = var.data_dir
    pool         = var.pool
    pool_service = var.pool_service
    log_level    = var.log_level
  })
}

output "config" {
  description = "The agent's configuration (HCL)."
  value       = local.config
}
