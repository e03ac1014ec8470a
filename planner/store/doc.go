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
// and, on each planner's Consul agent, a service "schedulearn-leader" per
// candidate with its TTL check (see Leadership).
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
// read and a transaction: two round trips), so the version check and the
// write are atomic across planners; a CAS that fails means someone wrote in
// between, and is reported as ErrConflict too. The transaction also holds
// the fence check of a leader's write (see Fencing).
//
// Durability: every Bolt write is a transaction that bbolt commits with an
// fsync before the call returns, so an acknowledged write survives a
// SIGKILL of the planner (tested) and a machine crash. The records of jobs
// created while a commit runs share the next one (groupCommit): a lone
// submission waits for nothing, eight at once for two fsyncs, not eight
// (at 100,000 queued jobs with a dashboard open, eight concurrent
// submissions went from a p50 of 28-94 ms and a p99 of 252-851 ms to 5-14
// ms and 42-153 ms, with the paged reads; BenchmarkReads in
// planner/agent). A Consul write is
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
// Bolt keeps an index of the active jobs' IDs (built on Open for a store
// that predates it), and their records decoded in memory once the first
// round has read them (each write caches the record it stores, after its
// commit), so a round decodes nothing and, as Memory's, shares them
// (SharedLister; at 10,000 jobs a fifo round went from 403 ms to 10 ms and
// the heap from 8 to 20 MB, BenchmarkRoundEndToEnd); Consul reads
// every record but decodes whole only the ones it returns, as Bolt does for
// ListJobsNamed; Memory keeps an index of each, so it costs the jobs it
// returns (BenchmarkMemory_Lists). A page of jobs (ListJobsPage: the API's
// GET /v1/jobs, /v1/queue, and the reads of the jobs running or that held
// GPUs in a window) is chosen from a summary of every job
// (structs.JobSummary: key, name, user, queue, state, last GPU change)
// that Bolt reads on Open and Memory keeps, both in the queue's order and
// updated by each write, and only the page's records are decoded (Bolt
// copies the active ones from its cache): at 100,000 queued jobs a page of
// 50 costs milliseconds, not the seconds of a decode of every record
// (planner/agent's BenchmarkReads). Every planner that shares the Consul
// store writes it, so none keeps its summaries: a page reads every record
// and decodes each only as far as its summary, then the page's whole.
// Consul writes are transactions
// (for the fence), whose request Consul limits to 512 KiB by default
// (txn_max_req_len) with the values in base64: a job whose record (Source,
// History, Events) outgrows about 380 KiB cannot be written there
// (measured: 380 KiB written, 400 KiB refused); raise txn_max_req_len for
// larger ones.
//
// # Leadership
//
// AlwaysLeader is the Leadership for the embedded store: Acquire succeeds at
// once. ConsulLeadership elects one planner through a Consul lock. Each
// Acquire begins a term:
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
//     while Consul refuses a free lock (a lock-delay in effect).
//
// The channel Acquire returns is closed when the key is no longer held by
// the session (watched with consistent blocking reads), when the lock
// cannot be read for longer than CheckTTL, when the planner has not managed
// to mark its check for 3s (before Consul could expire it: a planner cut off
// from its agent, or starved, steps down before another can lead), when
// the session cannot be renewed, or on Release.
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
//     after the death (6.2-6.9s measured; TestConsulLeadership_SIGKILLedLeader).
//     A lost node fails serfHealth, as quickly as Serf detects it.
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
// A term's Fence (Leadership.Fence: the lock's key and the term's session)
// goes with every write the leader makes as leader: the planner agent puts
// it in the context of its rounds and deliveries and of the API's stops and
// policy switches (WithFence). The Consul store makes each such write one
// transaction that starts with a check-session of the lock key for that
// session, so the write applies only while the term's session holds the
// lock, atomically, in Raft's order. Once Consul has invalidated the
// session (before any other planner could take the lock), every write of
// the old term fails with ErrFenced, whatever the planner believes: a
// leader paused, partitioned or slow to notice cannot overwrite its
// successor's records. Submissions and progress reports are no leader's
// work and are not fenced (the version check orders them). The bolt store
// is one planner's alone and ignores fences.
package store
