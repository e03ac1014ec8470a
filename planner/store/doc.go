// Package store is the planner's persistent state: job records (queue,
// running and finished jobs with their history) and the active policy, kept
// across restarts, plus the leader election that lets several planners share
// one store.
//
// # Implementations
//
// Bolt (Open) is the embedded default for one planner: a single bbolt file.
// Consul (NewConsul) is for several planners: records in Consul's KV.
// Memory (NewMemory) keeps records in the process, for the simulator and
// the planner's tests. All three pass the same conformance suite
// (conformance_test.go; the Consul run is in the e2e tier). Records are JSON-encoded structs.Job and
// structs.PolicyState in both, so they can be copied from one to the other.
//
// Bolt file layout:
//
//	bucket "jobs"  key <job ID>  value JSON structs.Job
//	bucket "meta"  key "policy"  value JSON structs.PolicyState
//	               key "format"  value "1" (Open refuses other layouts)
//
// Consul KV layout (prefix "schedulearn/" by default):
//
//	<prefix>jobs/<job ID>   JSON structs.Job
//	<prefix>meta/policy     JSON structs.PolicyState
//	<prefix>leader          the leader lock (value: the leader's identity)
//
// Job IDs must be non-empty and hold no '/', in both, since they are key
// segments in Consul.
//
// # Guarantees
//
// Versions: CreateJob sets Version to 1 and fails with ErrExists if the ID
// is taken. UpdateJob writes only if the stored Version equals the caller's
// (else ErrConflict) and then increments the caller's Version; of several
// writers holding the same version exactly one wins. The Version is part of
// the JSON record in both implementations. In Consul each write is, in
// addition, a check-and-set on the KV ModifyIndex read with the record (a
// read and a CAS: two round trips), so the version check and the write are
// atomic across planners; a CAS that fails means someone wrote in between,
// and is reported as ErrConflict too.
//
// Durability: every Bolt write is one transaction that bbolt commits with an
// fsync before the call returns, so an acknowledged write survives a
// SIGKILL of the planner (tested) and a machine crash. A Consul write is
// acknowledged once Raft has committed it; Consul reads are consistent
// (RequireConsistent), so a new leader sees its predecessor's writes.
//
// One opener: Bolt holds an exclusive lock on the file. A second Open, from
// another process or the same one, fails after 1s with "the file is in use",
// rather than hang.
//
// ListJobs decodes every record and sorts by (Submitted, ID); it is
// O(n log n) in the number of jobs (see BenchmarkBolt_ListJobs). A round
// reads ListActiveJobs (queued and running) and admission ListJobsNamed:
// Bolt and Consul still read every record for those but decode whole only
// the ones they return; Memory keeps an index of each, so it costs the
// jobs it returns (BenchmarkMemory_Lists). Consul
// limits a KV value to 512 KiB by default (kv_max_value_size): a job whose
// record (Source, History, Events) outgrows that cannot be written there.
//
// # Leadership
//
// AlwaysLeader is the Leadership for the embedded store: Acquire succeeds at
// once. ConsulLeadership elects one planner through a Consul lock: it
// creates a session (TTL 10s, Consul's minimum; lock-delay 1s; behaviour
// "release"), renews it every TTL/2, and takes the lock <prefix>leader with
// consul/api's Lock on that session. A standby blocks in Acquire, reading the
// lock with blocking queries of up to 2s (so it notices its context ending
// within about 2s). The channel Acquire returns is closed when the key is no
// longer held by the session (watched with consistent blocking reads, riding
// out up to 3 failed reads 1s apart), when the session cannot be renewed for
// a whole TTL or is gone, or on Release.
//
// How long a standby takes to lead once the leader is gone (measured on the
// pinned Consul v1.22.3, dev agent):
//
//   - The leader calls Release (a clean shutdown): no lock-delay applies to
//     a released lock, so at once (2ms measured).
//   - The leader's session is invalidated (destroyed by an operator or by
//     Consul): the lock-delay of 1s makes the standby's first try fail, and
//     consul/api retries after its fixed DefaultLockRetryTime of 5s: about
//     5s (5.0s measured).
//   - The leader dies (SIGKILL, a hung process, a lost machine) and stops
//     renewing: Consul invalidates a session 2×TTL after its last renewal,
//     which came at most TTL/2 before the death, so 15-20s after it; then
//     as above. Takeover within 20-25s of the death (22.0s measured).
//
// A leader whose renewals fail steps down (its channel closes) about one TTL
// after its last successful renewal, about a TTL before Consul could give
// the lock to another planner. The lock is not a fence for every write: a
// planner must stop writing when its channel closes; the version checks
// still refuse a deposed leader's write to a job the new leader has
// written.
package store
