variable "nodes" {
  description = <<-EOT
    The lab's hosts, in order; the first also carries the Nomad and Consul
    servers. Each is a GPU client in a node pool (also its planner pool)
    with gpu = { backend, model, count, memory_mib, seed }.
  EOT
  type = list(object({
    name = string
    pool = optional(string, "default")
    gpu = optional(object({
      backend    = optional(string, "simulated")
      model      = optional(string, "NVIDIA A100-SXM4-40GB")
      count      = optional(number, 4)
      memory_mib = optional(number, 40960)
      seed       = optional(string, "")
    }), {})
    meta     = optional(map(string), {})
    datasets = optional(list(string), [])
  }))
  default = [
    { name = "node1", pool = "a100", gpu = { count = 4 } },
    { name = "node2", pool = "a100", gpu = { count = 4 } },
    { name = "node3", pool = "v100", gpu = { count = 2, model = "Tesla V100-SXM2-16GB", memory_mib = 16384 } },
  ]

  validation {
    condition     = length(var.nodes) >= 1
    error_message = "A lab needs at least one node."
  }
  validation {
    condition     = length(var.nodes) <= 16
    error_message = "A local lab has at most 16 nodes (each runs its own Nomad client and Consul agent on this machine)."
  }
  validation {
    condition     = alltrue([for n in var.nodes : can(regex("^[a-z][a-z0-9-]{0,14}$", n.name))])
    error_message = "Node names must start with a letter and hold 1 to 15 lowercase letters, digits or '-' (they name network namespaces and hosts)."
  }
  validation {
    condition     = length(distinct([for n in var.nodes : n.name])) == length(var.nodes)
    error_message = "Node names must be unique."
  }
  validation {
    condition     = alltrue([for n in var.nodes : n.gpu.count >= 1 && n.gpu.count <= 64 && floor(n.gpu.count) == n.gpu.count])
    error_message = "Each node's gpu.count must be a whole number from 1 to 64."
  }
  validation {
    condition     = alltrue([for n in var.nodes : contains(["nvml", "simulated"], n.gpu.backend)])
    error_message = "Each node's gpu.backend must be \"nvml\" (real GPUs through NVML) or \"simulated\"."
  }
  validation {
    condition     = alltrue([for n in var.nodes : can(regex("^[a-zA-Z0-9-_]{1,128}$", n.pool)) && n.pool != "all"])
    error_message = "Each node's pool must be 1 to 128 letters, digits, '-' or '_' and not \"all\"."
  }
}

variable "subnet" {
  description = "The lab network (IPv4 CIDR in a private range): .1 is the bridge in the root namespace, the nodes follow from .2."
  type        = string
  default     = "10.213.0.0/24"
  validation {
    condition = can(cidrhost(var.subnet, 0)) && can(regex(
      "^(10\\.[0-9]+\\.[0-9]+\\.[0-9]+/([89]|[1-3][0-9])|172\\.(1[6-9]|2[0-9]|3[01])\\.[0-9]+\\.[0-9]+/(1[2-9]|[23][0-9])|192\\.168\\.[0-9]+\\.[0-9]+/(1[6-9]|[23][0-9]))$",
      var.subnet,
    ))
    error_message = "subnet must be an IPv4 CIDR inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16."
  }
  validation {
    condition     = can(cidrhost(var.subnet, 0)) && tonumber(split("/", var.subnet)[1]) <= 28
    error_message = "subnet must be /28 or larger."
  }
}

variable "data_root" {
  description = "Where the hosts keep their state: <data_root>/<node>/{nomad,consul}."
  type        = string
  default     = "/tmp/schedulearn-lab"
  validation {
    condition     = startswith(var.data_root, "/")
    error_message = "data_root must be an absolute path."
  }
}

variable "plugin_dir" {
  description = "Nomad's plugin_dir (schedulearn-gpu and nomad-driver-horovod), the same on every host."
  type        = string
  default     = "/opt/schedulearn/plugins"
}

variable "bin_dirs" {
  description = "Where the horovod driver finds horovodrun, torchrun and python3."
  type        = list(string)
  default     = ["/opt/schedulearn/venv/bin"]
}

variable "standby" {
  description = "Each client's warm interpreter (docs/driver.md): the modules it imports when the driver starts (preload; [] for none) and its environment besides PATH (env). Its socket lies in <data_root>/<node>/standby."
  type = object({
    preload = optional(list(string), ["torch", "horovod.torch"])
    env     = optional(map(string), {})
  })
  default = {}
}


variable "planner" {
  description = <<-EOT
    The planners: their policy, their round interval, the port their API
    listens on (on each planner host) and their Consul store's key prefix.
    instances and binary are for the planner as a Nomad job (output
    planner_jobspec): that many planners on the Consul store, running binary
    (the same path on every host).
  EOT
  type = object({
    policy         = optional(string, "elastic-fifo")
    round_interval = optional(string, "5s")
    port           = optional(number, 4680)
    store_prefix   = optional(string, "schedulearn-lab/")
    instances      = optional(number, 2)
    binary         = optional(string, "/opt/schedulearn/bin/schedulearn")
  })
  default = {}
  validation {
    condition     = var.planner.port >= 1024 && var.planner.port <= 65535
    error_message = "planner.port must be from 1024 to 65535."
  }
  validation {
    condition     = can(regex("^[a-zA-Z0-9_-][a-zA-Z0-9/_-]*/$", var.planner.store_prefix))
    error_message = "planner.store_prefix must be a Consul key prefix ending in '/' (letters, digits, '-', '_', '/')."
  }
}

variable "planners" {
  description = <<-EOT
    The hosts that run a planner, one each, as the planner-job module runs
    them: on the Consul store, one leading through a Consul lock, the others
    standing by to take over. null: the first two nodes (the only one in a
    one-node lab).
  EOT
  type        = list(string)
  default     = null
  validation {
    condition     = var.planners == null ? true : length(var.planners) >= 1 && length(var.planners) <= 7
    error_message = "planners must name 1 to 7 hosts."
  }
  validation {
    condition     = var.planners == null ? true : length(distinct(var.planners)) == length(var.planners)
    error_message = "planners must not name a host twice (one planner per host)."
  }
  validation {
    condition     = var.planners == null ? true : alltrue([for p in var.planners : contains([for n in var.nodes : n.name], p)])
    error_message = "Each of planners must be the name of one of nodes."
  }
}

variable "log_level" {
  type    = string
  default = "INFO"
}
