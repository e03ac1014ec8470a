// Package e2e holds the tests that run against real agents: Nomad and Consul
// built from the pinned versions, the project's plugins loaded by a real Nomad
// client. They carry the e2e build tag; `make test-e2e` runs them.
package e2e
