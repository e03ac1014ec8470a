// Package builtin holds the scheduling policies compiled into the project.
// Each is a policy.Policy written on the placement kit (package
// policy/place), and none builds on another's internals: what two of them
// share is a stage of the kit. The planner opens them by name through
// policy/host, whose Builtins is their list; the simulator runs the same
// code.
//
// See each type for the full semantics:
//
//   - "fifo" (FIFO): submission order with head-of-line blocking (a job
//     starts only when every earlier job holds GPUs); a job starts with the
//     largest count in [Min, Max] that fits (start_size = "largest", the
//     default; a fixed-count job gets its count) or with Min (start_size =
//     "min"); packed best fit; running jobs are never resized or preempted.
//   - "elastic-fifo" (ElasticFIFO): admission in submission order at each
//     job's Min, shrinking the most recently resized running jobs (never
//     below Min) when the next job does not fit, with head-of-line blocking
//     when even that does not help; then idle GPUs grow running jobs toward
//     Max in submission order, own nodes first. Config: resize_cooldown.
//   - "round-robin" (RoundRobin): FIFO's admission, but a job's workers are
//     spread one per node round the ring of nodes, and each job starts on
//     the node after where the previous one started. Config: start_size.
//   - "tiresias" (Tiresias): discretized 2D least-attained-service; queues by
//     attained GPU-seconds, submission order within a queue, preemptive, no
//     head-of-line blocking; jobs start with Min, worst fit as the Pollux
//     simulator's port places them (or packed), and are never resized.
//     Config: queue_thresholds, placement.
//   - "goodput" (Goodput): Pollux's idea as a greedy: GPUs go, in steps of
//     whole workers to the count of best gain per GPU, where they add the
//     most speedup per GPU (Job.Speedup; linear where unknown); preemptive
//     and elastic. Config: stickiness.
//   - "goodput-jct" (GoodputJCT): goodput for the average JCT: scores
//     weighted by least attained service down to a floor, restarts priced
//     in (a running job's held count is worth restart_cost / the
//     allocation's age more), and the jobs it starts or resizes packed
//     anew; an elastic job's weight grows while it waits at 0 GPUs (aging).
//     Config: stickiness, attained_scale, attained_floor, restart_cost,
//     aging.
//   - "edf" (EDF): Elastic FIFO's round in deadline order
//     (Progress.Deadline, earliest first; jobs without one last), shrinking
//     the latest deadlines first to admit. Config: resize_cooldown.
//   - "qoe" (QoE): DQoES's idea: from each job's estimated work left
//     (Progress.RemainingWork) and speedup, the least count that reaches its
//     target by its deadline; on-track jobs are brought up to it, earliest
//     deadline first, with GPUs from jobs without a target, then jobs that
//     miss anyway (stopped if need be), then on-track jobs due later
//     (never below what they need unless they can spare the time); everyone
//     else is admitted at Min without head-of-line blocking; idle GPUs go a
//     worker at a time where they add the most speedup per GPU. Config:
//     headroom, resize_cooldown.
//
// Every builtin orders nodes by ID and jobs by (Submitted, ID), never by the
// snapshot's order, and returns an error for an inconsistent snapshot
// (place.NewBoard).
package builtin
