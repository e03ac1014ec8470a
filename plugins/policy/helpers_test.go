package policy_test

import (
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
)

// The shared test helpers, by the short names the tests use.
var (
	at      = policytest.At
	node    = policytest.Node
	queued  = policytest.Queued
	running = policytest.Running
)

type A = policy.Allocation
