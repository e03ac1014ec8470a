// Package place is the placement kit that the builtin policies are written
// on, and that any policy written in Go may import: it plans on a Board and
// answers with a policy.Plan that keeps the gang rule and the placement
// rules of policy.Validate. An external plugin does not need it; it needs
// only the contract, package policy.
//
// It is called Board, not Cluster, because the planner's view of the real
// cluster is planner/cluster.View: a Board is a plan being drawn up, a
// working copy of one snapshot's allocations that no one else sees.
//
// # Placement
//
// A Board indexes free capacity as one bitset of nodes per free-GPU count,
// so placing a job costs (free-count buckets x nodes/64) word operations. A
// placement is checked whole before anything moves, so a gang is never half
// placed. Growing a job fills its own nodes first, then the nodes of jobs it
// has affinity with and the nodes that match its data-locality hints (soft
// preferences), then packs onto as few nodes as possible: the node whose
// free GPUs fit the rest most tightly, or else the node with the most room
// and repeat; equal nodes go by ID. NewBoard first repairs running jobs
// whose allocation breaks the gang rule (partial workers dropped, above Max
// shrunk, below Min grown back or else stopped).
//
// # Stages the builtins share
//
// AdmitInOrder (submission order with head-of-line blocking: FIFO, Round
// Robin), RunElastic (admission at Min shrinking donors, then growth into
// idle GPUs: Elastic FIFO, EDF), TakeFor (shrink donors to make room for one
// job: the elastic round, QoE), DeadlineOrder (EDF, QoE), Steps (a heap of
// per-job steps by marginal gain: goodput, QoE), Preempt and Restore
// (Tiresias). Each is written once, here, so that no builtin builds on
// another's internals.
package place
