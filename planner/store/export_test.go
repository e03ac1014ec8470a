package store

// ReopenMemory is a new handle on m's data, as a restarted planner would
// find the records in a persistent store: the conformance suite's reopen
// (storetest.Harness), for the tests outside the package that run it.
func ReopenMemory(m *Memory) *Memory { return &Memory{db: m.db} }
