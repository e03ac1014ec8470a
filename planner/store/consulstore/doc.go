// Package consulstore is the store.Store that several planners share:
// job records and the active policy in Consul's KV (Consul, from
// NewConsul), and the election of the one planner that leads
// (ConsulLeadership, a store.Leadership on a Consul lock). It is apart
// from package store, the contract, so that only the agent that wires it
// in links Consul's client, never the planner's core (issue 31). It passes
// the conformance suite of every store (planner/store/storetest), in the
// e2e tier, on a Consul agent that internal/testlab starts.
//
// KV layout (prefix "schedulearn/" by default):
//
//	<prefix>jobs/<job ID>            JSON structs.Job
//	<prefix>idempotency/<SHA-256>    the ID of the job created with the Idempotency key (hex)
//	<prefix>meta/policy              JSON structs.PolicyState
//	<prefix>leader                   the leader lock (value: the leader's identity)
//	<prefix>leader-beat              the leader's beat (value: its session; flags: a count)
//
// and, on each planner's Consul agent, a service "schedulearn-leader" per
// candidate with its TTL check (see Leadership below).
//
// # Guarantees
//
// Versions: the Version is part of the JSON record, as in every store. In
// Consul each write is, in addition, a check-and-set on the KV ModifyIndex
// read with the record (a read and a transaction: two round trips), so the
// version check and the write are atomic across planners; a CAS that fails
// means someone wrote in between, and is reported as store.ErrConflict
// too. The transaction also holds the fence check of a leader's write (see
// Fencing).
//
// Durability: a write is acknowledged once Raft has committed it; reads
// are consistent (RequireConsistent), so a new leader sees its
// predecessor's writes.
//
// Reads: every planner that shares the store writes it, so none keeps
// records or summaries in memory: a listing reads every record and
// decodes whole only the ones it returns, and a page of jobs decodes each
// record only as far as its summary, then the page's whole.
//
// Size: writes are transactions (for the fence), whose request Consul
// limits to 512 KiB by default (txn_max_req_len) with the values in
// base64: a job whose record (Source, History, Events) outgrows about 380
// KiB cannot be written here (measured: 380 KiB written, 400 KiB refused);
// raise txn_max_req_len for larger ones.
//
// # Leadership
//
// ConsulLeadership elects one planner through a Consul lock. Each Acquire
// begins a term:
//
//  1. It registers, with the planner's Consul agent, a service
//     "schedulearn-leader" holding a TTL check (CheckTTL 4s), and marks the
//     check passing every second. (A service check, so a dead planner's
//     critical check marks that service only, never the node; the agent
//     deregisters it after a minute critical. A Consul token that may not
//     register it gets a session without it, on the TTL alone, and a
//     warning.)
//  2. It creates a session tied to that check and the node's serfHealth
//     (lock-delay 3s, behaviour "release", TTL 10s renewed every 5s as a
//     backstop).
//  3. It waits for the lock <prefix>leader: blocking reads while another
//     session holds it, a try whenever it is free, a new try every 250ms
//     while Consul refuses a free lock (a lock-delay in effect). Meanwhile
//     it watches the leader's beat (4).
//  4. Once it leads, it beats every second: it writes its session and a
//     count to <prefix>leader-beat, in a transaction that checks that the
//     session holds the lock. A standby that finds the beat unchanged
//     CheckTTL after it last changed (by a read begun then, so a standby
//     paused meanwhile judges nothing) destroys the session the beat names
//     if that session still holds the lock. The check alone is not enough:
//     its critical state reaches the servers only when the leader's agent
//     syncs it, and Consul's anti-entropy holds every sync back for up to
//     3s after a server joins (agent/ae, serverUpIntv) and for 15-30s
//     after a failed sync. A beat is a write the servers commit. A leader
//     that never beat (a planner from before the beat, or a token that may
//     not write the key: a warning) is left to its check.
//
// The channel Acquire returns is closed when the key is no longer held by
// the session (watched with consistent blocking reads), when the lock
// cannot be read for longer than CheckTTL, when the planner has not managed
// to mark its check, or to beat, for 3s (before Consul could expire it or
// a standby judge the beat stale: a planner cut off from its agent or the
// servers, or starved, steps down before another can lead), when the
// session cannot be renewed, or on Release.
//
// How long a standby takes to lead once the leader is gone (measured on the
// pinned Consul v1.22.3, dev agent; before the check: 20-25s):
//
//   - The leader calls Release (a clean shutdown): no lock-delay applies to
//     a released lock, so at once (3ms measured).
//   - The leader dies (SIGKILL, a hung process, a lost machine): its check
//     goes critical 4s after its last mark (at most 1s before the death),
//     Consul invalidates the session at once and releases the lock, the
//     lock-delay of 3s runs, and the standby's next try takes it: 6-7.3s
//     after the death (6.1-6.9s measured; TestConsulLeadership_SIGKILLedLeader).
//     A lost node fails serfHealth, as quickly as Serf detects it. Where
//     the agent holds the check's state back, the beat ends the session
//     instead, CheckTTL after the standby saw the last beat (up to about
//     0.3s more: Consul's jitter on a blocking read, and the read after
//     it), so the bound holds (6.2s measured with the check kept passing;
//     TestConsulLeadership_SilentAgent).
//   - The leader's session is destroyed (by an operator): the lock-delay,
//     then the next try: about 3.3s (3.1s measured).
//
// The lock-delay is the time a leader that is alive but has lost the lock
// has to notice before another leads. Consul's default, 15s, would alone
// break a 10s takeover; with writes fenced (below) the delay only has to
// cover the Nomad calls of a round in flight, and the leader watches the
// key and steps down on its own before its check can expire, so 3s is a
// margin, not a bet. Shorter CheckTTLs fail over faster but depose a
// leader that is starved of CPU for that long.
//
// # Fencing
//
// A term's fence (ConsulLeadership.Fence: the lock's key and the term's
// session) goes with every write the leader makes as leader
// (store.WithFence; package store's doc says which). Consul makes each
// such write one transaction that starts with a check-session of the lock
// key for that session, so the write applies only while the term's
// session holds the lock, atomically, in Raft's order. Once Consul has
// invalidated the session (before any other planner could take the lock),
// every write of the old term fails with store.ErrFenced.
package consulstore
