# A GPU client: a Nomad client with the project's device plugin
# (schedulearn-gpu, backend nvml or simulated) and the horovod task driver,
# in a Nomad node pool with its meta, beside a Consul client agent that
# registers the node's worker-pool service. Renders both agents'
# configurations (built-in Terraform only).

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

variable "network_interface" {
  description = "The interface carrying the host's address (Nomad's client.network_interface: where worker ports are)."
  type        = string
  default     = "eth0"
}

variable "servers" {
  description = "The Nomad servers' RPC addresses (host:port), or cloud auto-join strings (\"provider=aws tag_key=... tag_value=...\"), which the client retries with server_join."
  type        = list(string)
  validation {
    condition     = length(var.servers) > 0
    error_message = "A client needs at least one Nomad server to join."
  }
}

variable "consul_join" {
  description = "Addresses of the Consul servers to join; empty when this host runs the Consul server itself."
  type        = list(string)
  default     = []
}

variable "data_dir" {
  description = "The host's state directory; the agents use <data_dir>/nomad and <data_dir>/consul."
  type        = string
}

variable "plugin_dir" {
  description = "Nomad's plugin_dir: schedulearn-gpu and nomad-driver-horovod."
  type        = string
}

variable "datacenter" {
  type    = string
  default = "dc1"
}

variable "node_pool" {
  description = "The Nomad node pool, also the planner pool the node's Consul service joins."
  type        = string
  default     = "default"
  validation {
    condition     = can(regex("^[a-zA-Z0-9-_]{1,128}$", var.node_pool)) && var.node_pool != "all"
    error_message = "node_pool must be 1 to 128 letters, digits, '-' or '_' and not \"all\" (Nomad's built-in pool of every node)."
  }
}

variable "register_pool_service" {
  description = "Register the planner pool service (schedulearn-pool tagged with node_pool) in Consul."
  type        = bool
  default     = true
}

variable "meta" {
  description = "Nomad client meta (policies constrain on meta.<key>)."
  type        = map(string)
  default     = {}
}

variable "datasets" {
  description = "Data sets this host holds, advertised as meta.datasets (comma-separated) for locality hints."
  type        = list(string)
  default     = []
}

variable "gpu" {
  description = "The device plugin: backend nvml (real GPUs) or simulated (count GPUs of model, UUIDs from seed)."
  type = object({
    backend    = optional(string, "simulated")
    model      = optional(string, "NVIDIA A100-SXM4-40GB")
    count      = optional(number, 4)
    memory_mib = optional(number, 40960)
    seed       = optional(string, "")
  })
  default = {}
  validation {
    condition     = contains(["nvml", "simulated"], var.gpu.backend)
    error_message = "gpu.backend must be \"nvml\" (real GPUs through NVML) or \"simulated\"."
  }
  validation {
    condition     = var.gpu.count >= 1 && var.gpu.count <= 64 && floor(var.gpu.count) == var.gpu.count
    error_message = "gpu.count must be a whole number from 1 to 64."
  }
  validation {
    condition     = var.gpu.memory_mib >= 1
    error_message = "gpu.memory_mib must be at least 1."
  }
}

variable "horovod" {
  description = "The horovod task driver: bin_dirs holds horovodrun, torchrun and python3. Workers authenticate with each job's own secret (a Nomad variable the planner writes), so the client holds none."
  type = object({
    bin_dirs = list(string)
    # Imported once by the client's warm interpreter, which forks the
    # workers' standbys (docs/driver.md), e.g. ["torch", "horovod.torch"];
    # [] (the default): no warm interpreter.
    standby_preload = optional(list(string), [])
    # The warm interpreter's environment besides PATH.
    standby_env = optional(map(string), {})
    # Where its socket directory is made; null: the driver's default,
    # /run/schedulearn-standby.
    standby_dir = optional(string)
    # How long a launcher or worker agent the Nomad servers do not answer
    # trains on (docs/driver.md, Fencing): below the servers'
    # heartbeat_grace (5s in the nomad-server module), so a task on a
    # partitioned host has stopped before the servers take the host for
    # lost; "0s": never.
    fence_after = optional(string, "4s")
  })
  validation {
    condition     = can(regex("^[0-9]+(ms|s|m)$", var.horovod.fence_after))
    error_message = "horovod.fence_after must be a duration such as \"4s\"."
  }
  validation {
    condition     = var.horovod.standby_dir == null || (startswith(coalesce(var.horovod.standby_dir, "/"), "/") && length(coalesce(var.horovod.standby_dir, "/")) <= 64)
    error_message = "horovod.standby_dir must be an absolute path of at most 64 bytes (the socket's path in it must fit a Unix socket address)."
  }
  validation {
    condition     = alltrue([for m in var.horovod.standby_preload : can(regex("^[A-Za-z_][A-Za-z0-9_]*([.][A-Za-z_][A-Za-z0-9_]*)*$", m))])
    error_message = "horovod.standby_preload must be Python module names (dotted identifiers)."
  }
  validation {
    condition     = alltrue([for k in keys(var.horovod.standby_env) : can(regex("^[A-Za-z_][A-Za-z0-9_]*$", k)) && k != "PATH" && !startswith(k, "PYTHON") && !startswith(k, "LD_")])
    error_message = "horovod.standby_env names must be variable names, not PATH, PYTHON* or LD_*."
  }
}

variable "log_level" {
  type    = string
  default = "INFO"
}

module "consul" {
  source     = "../consul-agent"
  name       = var.name
  address    = var.address
  server     = length(var.consul_join) == 0
  join       = var.consul_join
  datacenter = var.datacenter
  data_dir   = "${var.data_dir}/consul"
  pool       = var.register_pool_service ? var.node_pool : ""
  log_level  = var.log_level
}

locals {
  meta = merge(var.meta, length(var.datasets) > 0 ? { datasets = join(",", var.datasets) } : {})
  nomad_config = templatefile("${path.module}/templates/nomad-client.hcl.tftpl", {
    name              = var.name
    address           = var.address
    network_interface = var.network_interface
    servers           = var.servers
    datacenter        = var.datacenter
    data_dir          = "${var.data_dir}/nomad"
    plugin_dir        = var.plugin_dir
    node_pool         = var.node_pool
    meta              = local.meta
    gpu               = var.gpu
    horovod           = var.horovod
    log_level         = var.log_level
  })
}

output "nomad_config" {
  description = "The Nomad client's configuration (HCL)."
  value       = local.nomad_config
}

output "consul_config" {
  description = "The Consul agent's configuration (HCL)."
  value       = module.consul.config
}

output "gpus" {
  description = "What the node offers: model and count."
  value       = { model = var.gpu.model, count = var.gpu.count, backend = var.gpu.backend }
}
