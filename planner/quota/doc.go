// Package quota holds teams' queues around every scheduling policy: a
// nominal GPU quota per queue (per GPU model where quotas are), a
// borrowing limit, a lending limit, a weight and an optional parent. It is
// pure (no I/O, no clock) and imports only the policy contract's types.
//
// Each round the planner builds a Ledger of its Tree over the round's
// snapshot, and:
//
//  1. Gate gives the policy the snapshot without the queued jobs their
//     queues may not start (priority first within a queue);
//  2. the policy plans on it;
//  3. Enforce trims the plan to the queues' limits, keeps the running jobs
//     the plan stops or shrinks where their queues stay within their
//     nominal quota and the GPUs would go to queues that borrow (a
//     borrower never preempts a job within nominal), and reclaims GPUs
//     from borrowers for queues below their nominal quota: the plan's
//     gains of borrowers first, then elastic jobs shrunk in place toward
//     their min, then jobs stopped (requeued), lowest priority first;
//     then, the same way, it divides what queues borrow by their weights
//     (fair sharing, fair.go: a queue takes from one that would still
//     borrow at least as much per weight);
//  4. Waits says where each job left queued stands in its queue, and why
//     the queue holds it back.
//
// Tree.CheckJob refuses at submission a job that could never run in its
// queue. The rules are spelled out in docs/policies.md.
//
// Accounting: a queue uses what its jobs hold; a parent counts, for each
// child, what it uses or guards (the part of its nominal quota it never
// lends), whichever is more. Every queue is bounded by its nominal quota
// plus borrowing limit, and the top-level queues together by the cluster
// (or their nominal sum where that is more, so a promise beyond the
// cluster never blocks a queue within its own nominal quota).
package quota
