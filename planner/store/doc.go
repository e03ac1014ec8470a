// Package store is the contract of the planner's persistent state: job
// records (queue, running and finished jobs with their history) and the
// active policy, kept across restarts (Store), plus the leader election
// that lets several planners share one store (Leadership) and the fence
// of a leader's writes (Fence). It holds one implementation, Memory; the
// others are packages of their own, so that the planner's core, which
// sees only this contract, links neither bbolt nor Consul's client
// (issue 31; internal/importrules' TestCoreLinks keeps it so).
//
// # Implementations
//
// Bolt (boltstore.Open) is the embedded default for one planner: a single
// bbolt file. Consul (consulstore.NewConsul) is for several planners:
// records in Consul's KV, with their leader election
// (consulstore.ConsulLeadership). Memory (NewMemory) keeps records in the
// process, for the simulator and the planner's tests. Each package's doc
// gives its layout and what it costs. The agent picks one and wires it in.
//
// All three pass the same conformance suite (planner/store/storetest, a
// test kit each implementation's tests run; the Consul run is in the e2e
// tier), and share one copy of the rules they all apply
// (planner/store/internal/recs: the checks of IDs and keys, the queue's
// order, the update and delete rules, the partial decodes, the in-memory
// indexes). Records are JSON-encoded structs.Job and structs.PolicyState
// in Bolt and Consul, so they can be copied from one to the other.
//
// Job IDs must be non-empty and hold no '/', in every store, since they
// are key segments in Consul.
//
// # Guarantees
//
// Versions: CreateJob sets Version to 1 and fails with ErrExists if the ID
// is taken. UpdateJob writes only if the stored Version equals the caller's
// (else ErrConflict) and then increments the caller's Version; of several
// writers holding the same version exactly one wins. The Version is part of
// the JSON record in Bolt and Consul. Consul makes the version check and
// the write atomic across planners (see consulstore).
//
// Durability: an acknowledged Bolt write is on disk (fsync) and an
// acknowledged Consul write is committed by Raft; see their packages.
// Memory keeps nothing across processes.
//
// ListJobs decodes every record and sorts by (Submitted, ID); it is
// O(n log n) in the number of jobs (see boltstore's
// BenchmarkBolt_ListJobs). A round reads ListActiveJobs (queued and
// running) and admission ListJobsNamed: Bolt keeps an index of the active
// jobs' IDs (built on Open for a store that predates it), and their
// records decoded in memory once the first round has read them (each
// write caches the record it stores, after its commit), so a round decodes
// nothing and, as Memory's, shares them (SharedLister; at 10,000 jobs a
// fifo round went from 403 ms to 10 ms and the heap from 8 to 20 MB,
// BenchmarkRoundEndToEnd); Consul reads every record but decodes whole
// only the ones it returns, as Bolt does for ListJobsNamed; Memory keeps
// an index of each, so it costs the jobs it returns
// (BenchmarkMemory_Lists). A page of jobs (ListJobsPage: the API's GET
// /v1/jobs, /v1/queue, and the reads of the jobs running or that held
// GPUs in a window) is chosen from a summary of every job
// (structs.JobSummary: key, name, user, queue, state, last GPU change)
// that Bolt reads on Open and Memory keeps, both in the queue's order and
// updated by each write, and only the page's records are decoded (Bolt
// copies the active ones from its cache): at 100,000 queued jobs a page of
// 50 costs milliseconds, not the seconds of a decode of every record
// (planner/agent's BenchmarkReads). Every planner that shares the Consul
// store writes it, so none keeps its summaries: a page reads every record
// and decodes each only as far as its summary, then the page's whole.
//
// # Leadership
//
// AlwaysLeader is the Leadership for a planner that runs alone (the
// embedded store): Acquire succeeds at once. consulstore.ConsulLeadership
// elects one planner through a Consul lock; its package doc gives each
// step of a term and how long a standby takes to lead once the leader is
// gone.
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
// is one planner's alone and ignores fences, as Memory does.
package store
