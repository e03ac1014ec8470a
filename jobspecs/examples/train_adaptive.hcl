# The elastic example (train.hcl) with a batch block: the planner advises
# its batch size for the GPUs it holds (Pollux's co-adaptive batch; see
# docs/api.md, "Batch size advice"), and plans it as a job whose batch grows
# with its GPUs.
#
#   schedulearn job run jobspecs/examples/train_adaptive.hcl
#   schedulearn job status <id>     # Batch = 64..1024, ...; advised ...
#
# The script (train_elastic.py, under Horovod) reports its global batch and
# gradient noise scale; once it runs on 2 GPUs or more the planner first
# explores (twice the per-GPU batch), then, with the step time fitted,
# advises the batch of most goodput, which the script takes at its next
# commit ("batch N (M a GPU on G), as the planner advises" in its log).
training "adaptive-demo" {
  command = "python3"
  args    = ["${jobspec_dir}/train_elastic.py"]

  gpus {
    min = 2
    max = 4
  }

  # Tuned at 64 samples a step (its learning rate scales with the global
  # batch); up to 1,024 a step, at most 256 on a GPU at once.
  batch {
    size        = 64
    max         = 1024
    max_per_gpu = 256
  }

  target {
    metric = "accuracy"
    goal   = 0.4
  }

  env = {
    TOTAL_STEPS  = "300"
    STEP_SLEEP   = "0.1"
    # A stand-in for a GPU's compute on the lab's simulated GPUs: a larger
    # batch takes longer a step.
    SAMPLE_SLEEP = "0.0005"
  }
}
