// Package assess estimates, from what a training job reported, the two
// things the planner cannot read from a jobspec:
//
//   - how many GPUs are worth giving a job whose jobspec says
//     gpus = "auto" ([ChooseGPUs], fed by [Throughputs]), with the speedup
//     table policies read (policy.Job.Speedup);
//   - how much training is left before the job's target metric reaches its
//     goal ([ToGoal]), and that work in the unit policies read
//     (policy.Progress.RemainingWork, see [RemainingWork]).
//
// Everything here is pure: no I/O, no clock, no state; the functions only
// read their arguments (never modify them), so they are safe to call
// concurrently. Degenerate input (no reports, NaN, zero or negative
// counts) gives an "unknown" or "measuring" answer with a Reason, never a
// panic.
package assess
