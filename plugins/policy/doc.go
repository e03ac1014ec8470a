// Package policy is the scheduling-policy contract of Schedulearn for Nomad:
// the types a policy sees and answers with, the gang rule that every answer
// must keep, the builtin policies, and the go-plugin gRPC glue that runs
// external policies. The planner, the simulator and external plugins all
// use it; it needs no Nomad.
//
// # One round
//
// Each scheduling round the planner builds a Snapshot (the time, the nodes
// with their GPUs, every queued and running job) and asks the active Policy
// for a Plan: a target Allocation (GPUs per node) per job. Plan.Diff turns
// the plan into Changes (stops, shrinks, moves, grows, starts, in the order
// an executor applies them, so that GPUs are released before they are
// taken); Snapshot.Apply carries a plan out on paper, which is how the
// simulator steps.
//
// # Snapshot conventions
//
//   - A job's Allocation is the truth about what it holds; State is
//     informational, and a "running" job with an empty allocation is queued.
//   - A node's free GPUs are GPUs - Reserved - the jobs' allocations on it.
//     Reserved is what other Nomad workloads hold.
//   - A job asks for GPURequest{Min, Max, PerWorker}: a fixed count is
//     Min == Max; the planner resolves "auto" into a range first.
//   - The snapshot must be consistent (unique IDs, allocations on known
//     nodes, no node overcommitted, well-formed requests); NewCluster, and so
//     every builtin, returns an error otherwise.
//   - Policy configuration is not part of the snapshot: it is set with
//     SetConfig, and Instance sets it again when it relaunches a plugin.
//
// # Plan conventions
//
//   - A job absent from Plan.Allocations keeps its current allocation; a job
//     present with an empty allocation holds 0 GPUs (a running one is
//     stopped).
//   - Plan.Reasons says, per job, what the policy decided and why.
//   - Plans are deterministic: the builtins order nodes by ID and jobs by
//     (Submitted, ID), never by map or slice order of the snapshot.
//
// # The gang rule and the placement rules
//
// Validate is the one place these are written down. Each job holds 0 GPUs
// or a total in [Min, Max] that is a multiple of PerWorker; its count on
// each node is a multiple of PerWorker (a worker's GPUs are on one node); no
// node holds more than it has; GPUs a job gains on a node honour its
// constraints (GPU model, GPU memory, pool, node attributes,
// MaxGPUsPerNode) and its anti-affinity, which is symmetric (if either job's
// selector matches the other, they do not share a node). GPUs a job already
// holds are not judged again against constraints and anti-affinity. Instance
// rejects a plan that fails Validate.
//
// # Placement
//
// Cluster is the working state the builtins, and any Go policy, plan with.
// It indexes free capacity as one bitset of nodes per free-GPU count, so
// placing a job costs (free-count buckets x nodes/64) word operations. A
// placement is checked whole before anything moves, so a gang is never half
// placed. Growing a job fills its own nodes first, then the nodes of jobs it
// has affinity with (a soft preference), then packs onto as few nodes as
// possible: the node whose free GPUs fit the rest most tightly, or else the
// node with the most room and repeat; equal nodes go by ID. NewCluster first
// repairs running jobs whose allocation breaks the gang rule (partial
// workers dropped, above Max shrunk, below Min grown back or else stopped).
//
// # Builtins
//
// Builtins returns them by name; see each type for the full semantics.
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
//     head-of-line blocking; jobs start with Min and are never resized.
//     Config: queue_thresholds.
//   - "goodput" (Goodput): Pollux's idea as a greedy: GPUs go, a worker at a
//     time, where they add the most speedup per GPU (Job.Speedup; linear
//     where unknown); preemptive and elastic. Config: stickiness.
//   - "edf" (EDF): Elastic FIFO's round in deadline order
//     (Progress.Deadline, earliest first; jobs without one last), shrinking
//     the latest deadlines first to admit. Config: resize_cooldown.
//   - "qoe" (QoE): DQoES's idea: from each job's estimated work left
//     (Progress.RemainingWork) and speedup, the least count that reaches its
//     target by its deadline; on-track jobs are brought up to it, earliest
//     deadline first, with GPUs from jobs without a target, then jobs that
//     miss anyway (stopped if need be), then on-track jobs due later
//     (never below what they need unless they can spare the time); everyone else is admitted at Min
//     without head-of-line blocking; idle GPUs go a worker at a time where
//     they add the most speedup per GPU. Config: headroom, resize_cooldown.
//
// # External plugins
//
// An external policy is a binary whose main calls Serve. Registry resolves
// a name to a builtin (in process) or to an executable of that name in the
// plugin directory, and Open returns an Instance, which is a Policy either
// way. Launch starts a binary with go-plugin (Handshake) and returns a
// Policy that calls it over gRPC. The wire carries JSON in
// google.protobuf.BytesValue messages (see grpc.go), so no generated code is
// needed, in Go or in another language. Every call has a deadline (the
// context's, or the launch's call timeout) and ends when the plugin process
// exits, so a crashed or hung plugin yields an error naming it
// (ErrPluginExited, context.DeadlineExceeded), never a hang; Instance
// launches an exited plugin again at the next round. To swap policies at run
// time, Open the new one, swap the reference, Close the old one.
//
// The example in examples/largestfirst is a complete external policy.
package policy
