# An elastic Horovod training job for the `horovod` task driver.
#
#   nomad var put nomad/jobs/elastic-train HOROVOD_DRIVER_SECRET=$(openssl rand -hex 32)
#   nomad job run -var script=$PWD/jobspecs/examples/train_elastic.py \
#     jobspecs/examples/elastic-train.nomad.hcl
#
# The job's secret (and any other secret its training needs in its
# environment) lives in the Nomad variable nomad/jobs/<job ID>, which only
# the job's own tasks (and those allowed to read variables) can read; each
# task renders it into its environment with the template block below. The
# driver refuses to start a task without it. The planner writes this
# variable for the jobs it runs.
#
# One launcher (horovodrun in elastic mode) and a worker group whose count
# is the number of workers, each holding one GPU. The planner grows and
# shrinks the job in place by scaling the worker group through the
# driver/rescale package (see docs/driver.md); `nomad job scale` grows it
# by hand, but shrinking by hand skips the drain and counts as a failure.
#
# The training script must exist at the same path on every worker's node
# (it is run there through the worker's agent); ship it with an artifact
# block on a real cluster.

variable "script" {
  type        = string
  description = "Absolute path of the training script on the workers' nodes."
  default     = "/opt/schedulearn/train_elastic.py"
}

variable "python" {
  type    = string
  default = "python3"
}

variable "workers" {
  type    = number
  default = 2
}

variable "progress_file" {
  type    = string
  default = "/tmp/elastic-train-progress.jsonl"
}

variable "total_steps" {
  type    = string
  default = "200"
}

variable "step_sleep" {
  type        = string
  description = "Seconds each step sleeps, to pace a demo."
  default     = "0.1"
}

variable "network_interface" {
  type        = string
  description = "The interface Horovod's Gloo uses between nodes (lo in a one-node lab)."
  default     = "lo"
}

locals {
  # Every item of the job's variable as an environment variable.
  secrets_template = <<-EOT
    {{ with nomadVar (printf "nomad/jobs/%s" (env "NOMAD_JOB_ID")) }}{{ range .Tuples }}{{ .K }}={{ .V | toJSON }}
    {{ end }}{{ end }}
  EOT
}

job "elastic-train" {
  type = "batch"

  group "launcher" {
    count = 1

    # A failed launcher fails the job; the planner decides what next.
    restart {
      attempts = 0
      mode     = "fail"
    }
    reschedule {
      attempts  = 0
      unlimited = false
    }

    task "launcher" {
      driver = "horovod"

      config {
        role     = "launcher"
        launcher = "horovod"
        command  = var.python
        args     = [var.script]

        np     = var.workers
        min_np = 1
        max_np = 8
        slots  = 1

        discovery {
          service  = "${NOMAD_JOB_ID}-workers"
          provider = "consul"
        }

        network_interface  = var.network_interface
        elastic_timeout    = 120
        blacklist_cooldown = [5, 30]

        env = {
          PROGRESS_FILE = var.progress_file
          TOTAL_STEPS   = var.total_steps
          STEP_SLEEP    = var.step_sleep
          COMMIT_EVERY  = "5"
          # One thread per process: several workers may share a node's cores.
          OMP_NUM_THREADS = "1"
        }
      }

      # The workload identity lets discovery read the job's drain variable
      # and Nomad's service API through the Task API socket.
      identity {
        env = true
      }

      # The job's secrets, from its Nomad variable (see the top of the file).
      template {
        data        = local.secrets_template
        destination = "secrets/job.env"
        env         = true
        change_mode = "noop"
      }

      # StopTask sends SIGTERM so training can commit before it is killed.
      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 200
        memory = 512
      }
    }
  }

  group "worker" {
    count = var.workers

    restart {
      attempts = 0
      mode     = "fail"
    }

    network {
      port "horovod" {}
    }

    # Discovery lists the passing instances of this service.
    service {
      name     = "${NOMAD_JOB_ID}-workers"
      port     = "horovod"
      provider = "consul"

      meta {
        alloc_id = "${NOMAD_ALLOC_ID}"
      }

      check {
        type     = "tcp"
        interval = "2s"
        timeout  = "1s"
      }
    }

    task "worker" {
      driver = "horovod"

      config {
        role  = "worker"
        slots = 1
        port  = "horovod"
        # Imported ahead by a standby interpreter, which runs the first
        # training process Horovod starts here: a worker that joins a
        # running job does not make the others wait for these imports.
        preload = ["torch", "horovod.torch"]
      }

      # The job's secrets, from its Nomad variable (see the top of the file).
      template {
        data        = local.secrets_template
        destination = "secrets/job.env"
        env         = true
        change_mode = "noop"
      }

      kill_signal  = "SIGTERM"
      kill_timeout = "30s"

      resources {
        cpu    = 300
        memory = 1024

        device "nvidia/gpu" {
          count = 1
        }
      }
    }
  }
}
