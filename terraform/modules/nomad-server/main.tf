# A Nomad server and the Consul server beside it: the host every client
# joins. Renders both agents' configurations (built-in Terraform only).

terraform {
  required_version = ">= 1.6.0"
}

variable "name" {
  description = "The host's name (Nomad and Consul node name)."
  type        = string
}

variable "address" {
  description = "The host's address: both agents bind and advertise it."
  type        = string
}

variable "data_dir" {
  description = "The host's state directory; the agents use <data_dir>/nomad and <data_dir>/consul."
  type        = string
}

variable "bootstrap_expect" {
  description = "Servers to wait for before electing a leader."
  type        = number
  default     = 1
  validation {
    condition     = contains([1, 3, 5], var.bootstrap_expect)
    error_message = "bootstrap_expect must be 1, 3 or 5 (an odd number of servers keeps a quorum)."
  }
}

variable "datacenter" {
  type    = string
  default = "dc1"
}

variable "log_level" {
  type    = string
  default = "INFO"
}

module "consul" {
  source     = "../consul-agent"
  name       = var.name
  address    = var.address
  server     = true
  datacenter = var.datacenter
  data_dir   = "${var.data_dir}/consul"
  log_level  = var.log_level
}

locals {
  nomad_config = templatefile("${path.module}/templates/nomad-server.hcl.tftpl", {
    name             = var.name
    address          = var.address
    datacenter       = var.datacenter
    data_dir         = "${var.data_dir}/nomad"
    bootstrap_expect = var.bootstrap_expect
    log_level        = var.log_level
  })
}

output "nomad_config" {
  description = "The Nomad server's configuration (HCL)."
  value       = local.nomad_config
}

output "consul_config" {
  description = "The Consul server's configuration (HCL)."
  value       = module.consul.config
}

output "rpc_address" {
  description = "Where clients reach the Nomad server (host:port)."
  value       = "${var.address}:4647"
}
