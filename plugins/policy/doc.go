// Package policy is the scheduling-policy contract of Schedulearn for Nomad:
// the types a policy sees and answers with, and the gang rule that every
// answer must keep. It imports nothing else of the project, no go-plugin and
// no gRPC, and needs no Nomad: the planner's core and the simulator read it
// without linking a plugin's wire. policy/plugin's Serve runs a policy as an
// external go-plugin gRPC plugin; with it, this is all an external plugin
// needs.
//
// The rest stands apart, each package importing this one:
//
//   - policy/place, the placement kit: a working state (Board) that
//     policies written in Go may plan with, and the stages the builtins
//     share;
//   - policy/builtin, the builtin policies (FIFO, Elastic FIFO, Round
//     Robin, Tiresias, goodput, EDF, QoE), written on the kit;
//   - policy/host, the planner's side: the registry of builtins and
//     external plugins, launching plugins and calling them over gRPC, and
//     the check of every plan with Validate.
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
//     nodes, no node overcommitted, well-formed requests); place.NewBoard,
//     and so every builtin, returns an error otherwise. The planner
//     vouches for its own (Snapshot.Vouch: unique IDs, each job's Held its
//     Allocation by node index), and then NewBoard and Validate read the
//     jobs' GPUs from Held and look for no repeated IDs; an external
//     plugin gets neither (Held is not sent), and a plan is always
//     checked in full.
//   - A running job's allocation may break the gang rule (a node lost a GPU
//     under a worker); a policy repairs or stops such a job, or its plan
//     fails Validate. place.NewBoard repairs them.
//   - Policy configuration is not part of the snapshot: it is set with
//     SetConfig, and the host sets it again when it relaunches a plugin.
//
// # Plan conventions
//
//   - A job absent from Plan.Allocations keeps its current allocation; a job
//     present with an empty allocation holds 0 GPUs (a running one is
//     stopped).
//   - Plan.Reasons says, per job, what the policy decided and why;
//     Plan.Waiting is the reason of every job the plan leaves without GPUs
//     and without reasons of its own (Plan.Why), so that a line of jobs
//     behind a head that does not fit costs one entry, not one a job.
//   - A plan lists what changes: the builtins give an entry only to the
//     jobs whose allocation changes (place.Board.Plan).
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
// selector matches the other, they do not share a node); a job that gains
// GPUs holds GPUs of one model only (Node.GPUModel: never A100s and V100s
// in one job). GPUs a job already holds are not judged again against
// constraints, anti-affinity and the one-model rule. The
// host rejects a plan that fails Validate; a plugin's own tests can run it
// too.
//
// # External plugins
//
// An external policy is a binary whose main calls policy/plugin's Serve
// with its Policy.
// The wire carries JSON in google.protobuf.BytesValue messages (the service
// is described in package internal/wire), so no generated code is needed,
// in Go or in another language. The planner finds the binary by its file
// name in its plugin directory, launches it with go-plugin (policy/plugin's
// Handshake) and calls it with a deadline; see package policy/host.
//
// The example in examples/largestfirst is a complete external policy that
// imports this package and policy/plugin alone; a Go policy may also plan
// on policy/place.
package policy
