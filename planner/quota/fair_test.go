package quota_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// held sums what each queue's jobs hold after plan p.
func held(s *policy.Snapshot, p *policy.Plan) map[string]int {
	out := map[string]int{}
	for i := range s.Jobs {
		out[quota.QueueOf(&s.Jobs[i])] += p.Target(&s.Jobs[i]).Total()
	}
	return out
}

// enforceIdle runs a round in which the policy changes nothing: the quota
// layer alone acts.
func enforceIdle(t *testing.T, tr *quota.Tree, s *policy.Snapshot) (*policy.Plan, *quota.Ledger) {
	t.Helper()
	v := quota.NewLedger(tr, s)
	v.Gate()
	plan, err := v.Enforce(&policy.Plan{Policy: "none"})
	must.NoError(t, err)
	must.NoError(t, policy.Validate(s, plan))
	return plan, v
}

// Two queues without nominal quota share 8 GPUs by weight, 1 to 3: the
// borrowed GPUs go 2 to a and 6 to b, however a came to hold them all
// (jobs started, an elastic job grown, or the policy's own plan this
// round), and a second round moves nothing back.
func TestEnforce_FairShare(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(0), Weight: 1}, quota.Def{Name: "b", Nominal: gpus(0), Weight: 3})
	queued := func(q string, n, min, max int) []policy.Job {
		var out []policy.Job
		for k := range n {
			out = append(out, job(fmt.Sprintf("%s%02d", q, k), q, 50, min, max, nil))
		}
		return out
	}
	running := func(q string, n int) []policy.Job {
		out := queued(q, n, 1, 1)
		for k := range out {
			out[k].Allocation, out[k].State = policy.Allocation{"n1": 1}, policy.Running
		}
		return out
	}
	cases := []struct {
		name   string
		jobs   []policy.Job
		policy string // "": the quota layer alone
		want   map[string]int
	}{
		{name: "1-GPU jobs stopped", jobs: append(running("a", 8), queued("b", 10, 1, 1)...), want: map[string]int{"a": 2, "b": 6}},
		{name: "an elastic job shrunk in place", want: map[string]int{"a": 2, "b": 6},
			jobs: append([]policy.Job{job("big", "a", 50, 1, 8, policy.Allocation{"n1": 8})}, queued("b", 10, 1, 4)...)},
		{name: "the policy's own starts held", policy: "fifo", want: map[string]int{"a": 2, "b": 6},
			jobs: append(queued("a", 10, 1, 1), queued("b", 10, 1, 1)...)},
		{name: "elastic on both sides", policy: "elastic-fifo", want: map[string]int{"a": 2, "b": 6},
			jobs: append(queued("a", 10, 1, 8), queued("b", 10, 1, 8)...)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: tc.jobs}
			var plan *policy.Plan
			var v *quota.Ledger
			if tc.policy == "" {
				plan, v = enforceIdle(t, tr, s)
			} else {
				v = quota.NewLedger(tr, s)
				p, err := allPolicies()[tc.policy]().Plan(context.Background(), v.Gate())
				must.NoError(t, err)
				plan, err = v.Enforce(p)
				must.NoError(t, err)
				must.NoError(t, policy.Validate(s, plan))
			}
			must.Eq(t, tc.want, held(s, plan), must.Sprint(plan.Reasons))
			for id, tk := range v.Reclaimed() {
				must.Eq(t, "b", tk.Queue, must.Sprint(id))
				must.Eq(t, "a", tk.From, must.Sprint(id))
				must.StrContains(t, tk.Why, "fair share: queue a borrows ")
			}
			// A second round, the same jobs pending: nothing moves back.
			next := s.Apply(plan, at(160))
			again, v2 := enforceIdle(t, tr, next)
			must.Eq(t, tc.want, held(next, again))
			must.MapEmpty(t, v2.Reclaimed())
		})
	}
}

// The reasons name the queues, what each borrows and its weight.
func TestEnforce_FairShareReasons(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(0), Weight: 1}, quota.Def{Name: "b", Nominal: gpus(0), Weight: 3})
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: []policy.Job{
		job("big", "a", 50, 1, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 2, 2, nil)}}
	plan, v := enforceIdle(t, tr, s)
	must.Eq(t, 6, plan.Target(&s.Jobs[0]).Total())
	must.Eq(t, 2, plan.Target(&s.Jobs[1]).Total())
	why := "fair share: queue a borrows 6 GPUs per weight 1 (6.00 per unit) after giving these back, no less than queue b with job b1 started: 2 per weight 3 (0.67)"
	must.Eq(t, []string{"shrunk in place: " + why}, plan.Reasons["big"])
	must.Eq(t, quota.Taken{Job: "b1", Queue: "b", From: "a", Why: why}, v.Reclaimed()["big"])
	must.Eq(t, []string{"started at 2 GPUs by fair share: queue b borrows 2 GPUs per weight 3 with it; GPUs taken back from borrowers: shrunk big"},
		plan.Reasons["b1"])
}

// Fair sharing takes only what queues borrow: never into a nominal
// quota, nor from a queue that would then borrow less per weight than the
// taker; and a queue below its nominal quota claims first.
func TestEnforce_FairShareBounds(t *testing.T) {
	cases := []struct {
		name string
		tree []quota.Def
		jobs []policy.Job
		want map[string]int // queue -> GPUs after
	}{
		{
			name: "equal weights, equal shares: nothing moves",
			tree: []quota.Def{{Name: "a", Nominal: gpus(0)}, {Name: "b", Nominal: gpus(0)}},
			jobs: []policy.Job{job("a1", "a", 50, 4, 4, policy.Allocation{"n1": 4}), job("b1", "b", 50, 4, 4, policy.Allocation{"n1": 4}),
				job("b2", "b", 50, 1, 1, nil)},
			want: map[string]int{"a": 4, "b": 4},
		},
		{
			name: "a whole job would take the giver into its nominal quota",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4)}, {Name: "b", Nominal: gpus(0)}},
			jobs: []policy.Job{job("a1", "a", 50, 8, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 1, 1, nil)},
			want: map[string]int{"a": 8, "b": 0},
		},
		{
			// Only what a borrows is shared: b, borrowing 1, would
			// borrow more than a's 0 after a second take.
			name: "elastic giver keeps its nominal quota",
			tree: []quota.Def{{Name: "a", Nominal: gpus(6)}, {Name: "b", Nominal: gpus(0), Weight: 100}},
			jobs: []policy.Job{job("a1", "a", 50, 1, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 1, 1, nil),
				job("b2", "b", 50, 1, 1, nil), job("b3", "b", 50, 1, 1, nil)},
			want: map[string]int{"a": 7, "b": 1},
		},
		{
			name: "nominal claim before fair claims",
			tree: []quota.Def{{Name: "a", Nominal: gpus(0)}, {Name: "b", Nominal: gpus(0), Weight: 3}, {Name: "c", Nominal: gpus(4)}},
			jobs: []policy.Job{job("a1", "a", 50, 1, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 1, 1, nil),
				job("b2", "b", 50, 1, 1, nil), job("c1", "c", 50, 4, 4, nil)},
			// c takes 4 within its nominal quota; then b, 1 per weight
			// 3 borrows less than a's 2 per weight 1 even after a gives
			// 2 more: 8 = 4 + 2 + 2.
			want: map[string]int{"a": 2, "b": 2, "c": 4},
		},
		{
			name: "compared where the lines meet: the parents' shares",
			tree: []quota.Def{{Name: "p", Nominal: gpus(0), Weight: 1}, {Name: "p1", Parent: "p", Nominal: gpus(0), Weight: 100},
				{Name: "r", Nominal: gpus(0), Weight: 1}, {Name: "r1", Parent: "r", Nominal: gpus(0)}},
			jobs: []policy.Job{job("p1", "p1", 50, 1, 8, policy.Allocation{"n1": 8}), job("r1", "r1", 50, 1, 1, nil),
				job("r2", "r1", 50, 1, 1, nil), job("r3", "r1", 50, 1, 1, nil), job("r4", "r1", 50, 1, 1, nil), job("r5", "r1", 50, 1, 1, nil)},
			// p1's weight counts inside p only: p and r share by their
			// own weights, 4 and 4.
			want: map[string]int{"p1": 4, "r1": 4},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: tc.jobs}
			plan, _ := enforceIdle(t, tree(t, tc.tree...), s)
			must.Eq(t, tc.want, held(s, plan), must.Sprint(plan.Reasons))
		})
	}
}
