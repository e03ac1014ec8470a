# An elastic training job for the planner:
#
#   schedulearn job run jobspecs/examples/train.hcl
#
# A small real PyTorch model on synthetic data (train_elastic.py, beside this
# file), trained with Horovod's elastic mode: the planner starts it with 1 GPU
# and Elastic FIFO grows it into idle GPUs, up to 4, without restarting it.
#
# Its validation accuracy climbs past 0.3 and then 0.4: at each, the planner
# delivers the model (the checkpoint the script saved at or after that step)
# to the planner's delivery_dir, <data_dir>/deliveries/<job-id>/tier1/ and
# .../goal/, and `schedulearn job status <id>` shows where.
training "elastic-demo" {
  command = "python3"
  args    = ["${jobspec_dir}/train_elastic.py"]

  gpus {
    min        = 1
    max        = 4
    per_worker = 1
  }

  # What each worker asks of its node besides its GPUs (Nomad's resources):
  # CPU in MHz and memory. Without the block: 500 MHz and 1GiB.
  worker {
    cpu    = 500
    memory = "1GiB"
  }

  target {
    metric = "accuracy"
    tier1  = 0.3
    goal   = 0.4
  }

  env = {
    TOTAL_STEPS = "300"
    STEP_SLEEP  = "0.1"
  }
}
