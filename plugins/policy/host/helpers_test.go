package host_test

import (
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
)

// The shared test helpers, by the short names the tests use.
var (
	at             = policytest.At
	node           = policytest.Node
	queued         = policytest.Queued
	targets        = policytest.Targets
	randomSnapshot = policytest.RandomSnapshot
	benchSnapshot  = policytest.BenchSnapshot
)

type A = policy.Allocation
