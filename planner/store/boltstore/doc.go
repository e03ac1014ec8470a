// Package boltstore is the embedded store.Store of a planner that runs
// alone: its job records and active policy in one bbolt file (Bolt, from
// Open). It is apart from package store, the contract, so that only the
// agent that opens it links bbolt, never the planner's core (issue 31).
// It passes the conformance suite of every store (planner/store/storetest).
//
// File layout:
//
//	bucket "jobs"         key <job ID>    value JSON structs.Job
//	bucket "idempotency"  key SHA-256 of an Idempotency key, in hex
//	                      value the ID of the job created with it
//	bucket "active"       key <job ID>    (no value) the queued and running jobs
//	bucket "meta"         key "policy"    value JSON structs.PolicyState
//	                      key "format"    value "1" (Open refuses other layouts)
//
// Durability: every write is a transaction that bbolt commits with an
// fsync before the call returns, so an acknowledged write survives a
// SIGKILL of the planner (tested) and a machine crash. The records of jobs
// created while a commit runs share the next one (groupCommit): a lone
// submission waits for nothing, eight at once for two fsyncs, not eight
// (at 100,000 queued jobs with a dashboard open, eight concurrent
// submissions went from a p50 of 28-94 ms and a p99 of 252-851 ms to 5-14
// ms and 42-153 ms, with the paged reads; BenchmarkReads in
// planner/agent).
//
// One opener: Bolt holds an exclusive lock on the file. A second Open, from
// another process or the same one, fails after 1s with "the file is in use",
// rather than hang. Being the file's only writer, Bolt keeps in memory
// what its reads would otherwise decode again: the active jobs' records
// and a summary of every job (package store's doc gives what each read
// costs).
//
// A store one planner holds is that planner's for good: Bolt ignores the
// fence of a leader's writes (store.WithFence), and the planner leads
// with store.AlwaysLeader.
package boltstore
