package builtin_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/shoenig/test/must"
)

// The shared test helpers, by the short names the tests use.
var (
	t0             = policytest.T0
	at             = policytest.At
	node           = policytest.Node
	queued         = policytest.Queued
	running        = policytest.Running
	targets        = policytest.Targets
	randomSnapshot = policytest.RandomSnapshot
	benchSnapshot  = policytest.BenchSnapshot
)

// plan runs p on s and checks the plan with Validate.
func plan(t *testing.T, p policy.Policy, s *policy.Snapshot) *policy.Plan {
	t.Helper()
	out, err := p.Plan(context.Background(), s)
	must.NoError(t, err)
	must.NoError(t, policy.Validate(s, out))
	return out
}

// configured returns a new builtin name configured with config.
func configured(t *testing.T, name string, config map[string]string) policy.Policy {
	t.Helper()
	p := host.Builtins()[name]()
	must.NoError(t, p.SetConfig(config))
	return p
}

// shuffled returns s with its nodes and jobs in another order.
func shuffled(r *rand.Rand, s *policy.Snapshot) *policy.Snapshot {
	out := &policy.Snapshot{Now: s.Now, Nodes: slices.Clone(s.Nodes), Jobs: slices.Clone(s.Jobs)}
	r.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	r.Shuffle(len(out.Jobs), func(i, j int) { out.Jobs[i], out.Jobs[j] = out.Jobs[j], out.Jobs[i] })
	return out
}

// explained checks that plan p gives a reason (Plan.Why) to every job of
// s whose GPUs it changes or that it leaves waiting; a running job it
// leaves as it is needs none.
func explained(t *testing.T, s *policy.Snapshot, p *policy.Plan) {
	t.Helper()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if to := p.Target(j); to.Total() > 0 && to.Equal(j.Allocation) {
			continue
		}
		must.SliceNotEmpty(t, p.Why(j), must.Sprintf("job %s has no reason", j.ID))
	}
}
