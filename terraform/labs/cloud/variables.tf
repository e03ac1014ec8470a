variable "cluster_tag" {
  description = "The tag value instances carry (tag key \"schedulearn-cluster\"): Consul and Nomad find their servers by it (cloud auto-join)."
  type        = string
  default     = "schedulearn"
  validation {
    condition     = can(regex("^[a-z0-9-]{1,32}$", var.cluster_tag))
    error_message = "cluster_tag must be 1 to 32 lowercase letters, digits or '-'."
  }
}

variable "cloud" {
  description = "The cloud auto-join provider (go-discover): aws, gce or azure."
  type        = string
  default     = "aws"
  validation {
    condition     = contains(["aws", "gce", "azure"], var.cloud)
    error_message = "cloud must be aws, gce or azure."
  }
}

variable "servers" {
  description = "Nomad and Consul servers (1, 3 or 5); the planner runs on the GPU clients as a Nomad job."
  type        = number
  default     = 3
  validation {
    condition     = contains([1, 3, 5], var.servers)
    error_message = "servers must be 1, 3 or 5."
  }
}

variable "pools" {
  description = "GPU pools: each a group of identical GPU instances (nodes of them, with the GPUs NVML finds)."
  type = list(object({
    name          = string
    nodes         = number
    instance_type = string
    datasets      = optional(list(string), [])
  }))
  default = [
    { name = "a100", nodes = 2, instance_type = "p4d.24xlarge" },
  ]
  validation {
    condition     = length(var.pools) >= 1 && alltrue([for p in var.pools : p.nodes >= 1])
    error_message = "A cluster needs at least one pool, and every pool at least one node."
  }
  validation {
    condition     = alltrue([for p in var.pools : can(regex("^[a-zA-Z0-9-_]{1,128}$", p.name)) && p.name != "all"])
    error_message = "Pool names must be 1 to 128 letters, digits, '-' or '_' and not \"all\"."
  }
}

variable "install_dir" {
  description = "Where the image has schedulearn (bin/schedulearn, plugins/, venv/ with horovodrun)."
  type        = string
  default     = "/opt/schedulearn"
}

variable "planner_instances" {
  type    = number
  default = 2
}

variable "policy" {
  type    = string
  default = "elastic-fifo"
}
