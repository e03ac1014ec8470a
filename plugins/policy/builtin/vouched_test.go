package builtin_test

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/shoenig/test/must"
)

// TestProperty_VouchedSameAsPlain: every policy makes the same plan on a
// snapshot its maker vouched for (the planner's: place.NewBoard reads
// the jobs' slots, policy.Job.Held, and checks no IDs) as on the same
// snapshot plain (an external plugin's, decoded from the wire), and
// Validate judges its plan, and a plan broken on purpose, the same way on
// both.
func TestProperty_VouchedSameAsPlain(t *testing.T) {
	iterations := 300
	if testing.Short() {
		iterations = 40
	}
	ctx := context.Background()
	for name, f := range allPolicies() {
		t.Run(name, func(t *testing.T) {
			p := f()
			vouched := 0
			for seed := range uint64(iterations) {
				r := rand.New(rand.NewPCG(seed, 11))
				s := randomSnapshot(r)
				if seed%10 == 0 {
					s = benchSnapshot(20+r.IntN(40), 200+r.IntN(400))
				}
				v := policytest.Vouched(s)
				if v == nil {
					continue
				}
				vouched++
				must.True(t, v.Vouched())
				why := must.Sprintf("seed %d", seed)
				plain, err := p.Plan(ctx, s)
				must.NoError(t, err, why)
				got, err := p.Plan(ctx, v)
				must.NoError(t, err, why)
				must.Eq(t, plain.Allocations, got.Allocations, why)
				must.Eq(t, plain.Reasons, got.Reasons, why)
				must.Eq(t, plain.Waiting, got.Waiting, why)
				must.NoError(t, policy.Validate(v, got), why)

				// A plan that breaks a rule fails on both.
				for id, a := range got.Allocations {
					bad := a.Clone()
					if bad == nil {
						bad = policy.Allocation{}
					}
					bad[s.Nodes[0].ID] += 1 + r.IntN(9)
					broken := &policy.Plan{Allocations: map[string]policy.Allocation{id: bad}}
					must.Eq(t, policy.Validate(s, broken) == nil, policy.Validate(v, broken) == nil, why)
					break
				}
			}
			must.Greater(t, iterations/2, vouched, must.Sprint("too few snapshots could be vouched for"))
		})
	}
}

// TestVouched_OnlyAsMade: a snapshot is vouched for only with the jobs and
// nodes it was vouched for with: not a copy with other jobs, nor one a
// plan was applied to, nor one decoded from the wire.
func TestVouched_OnlyAsMade(t *testing.T) {
	s := policytest.Vouched(&policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0)},
		Jobs: []policy.Job{running("a", 1, 2, 2, 2, policy.Allocation{"n1": 2}, 1), queued("b", 2, 2, 2, 2)}})
	must.True(t, s.Vouched())
	must.Eq(t, []policy.Slot{{Node: 0, GPUs: 2}}, s.Jobs[0].Held)

	cp := *s
	cp.Jobs = append([]policy.Job(nil), s.Jobs...)
	must.False(t, cp.Vouched(), must.Sprint("other jobs"))
	cp = *s
	cp.Jobs = s.Jobs[:1]
	must.False(t, cp.Vouched(), must.Sprint("fewer jobs"))
	cp = *s
	cp.Nodes = append([]policy.Node(nil), s.Nodes...)
	must.False(t, cp.Vouched(), must.Sprint("other nodes"))
	next := s.Apply(&policy.Plan{Allocations: map[string]policy.Allocation{"a": nil}}, at(10))
	must.False(t, next.Vouched())
	must.Nil(t, next.Jobs[0].Held)

	b, err := json.Marshal(s)
	must.NoError(t, err)
	var wire policy.Snapshot
	must.NoError(t, json.Unmarshal(b, &wire))
	must.False(t, wire.Vouched())
	must.Nil(t, wire.Jobs[0].Held)
}
