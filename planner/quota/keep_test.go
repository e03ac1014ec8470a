package quota_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// The churn of docs/sim/README.md ("Queues"), in two rounds of Tiresias
// on one 8-GPU node shared by queues a and b of 4 GPUs each. Least
// attained service is submission order here (no job attains anything),
// so Tiresias ranks a's queued 1-GPU jobs a2 and a3 before b's b2 and b3.
// Round 0: a holds its 4, b holds 3 (b1, b3), 1 GPU is free; Tiresias
// stops b3, within b's nominal quota, to start a2 and a3, which borrow.
// Round 1, once a4 has finished: Tiresias stops b2 to start a's jobs
// again, and b3 where b2's second GPU is left. Before the fix the quota
// step answered round 0 by holding a's starts back for b2, b's first
// queued job: b3 stopped, b2 started; and round 1 let b2's stop stand:
// b2 stopped, b3 started, a borrowing the GPU b2 leaves. b's jobs were
// stopped in turn, as in the simulator's change log. Now b3 keeps its GPU
// in round 0 (a borrows only the free one), b2 does not start, and
// round 1 changes nothing of b's.
func TestEnforce_KeepsNominalAgainstBorrowers(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(4)}, quota.Def{Name: "b", Nominal: gpus(4)})
	jobs := []policy.Job{
		job("a1", "a", 50, 3, 3, policy.Allocation{"n1": 3}),
		job("a4", "a", 50, 1, 1, policy.Allocation{"n1": 1}),
		job("b1", "b", 50, 2, 2, policy.Allocation{"n1": 2}),
		job("a2", "a", 50, 1, 1, nil),
		job("a3", "a", 50, 1, 1, nil),
		job("b2", "b", 50, 2, 2, nil),
		job("b3", "b", 50, 1, 1, policy.Allocation{"n1": 1}),
	}
	for k := range jobs {
		jobs[k].Submitted = at(k)
	}
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: jobs}
	tiresias := allPolicies()["tiresias"]()
	var log []string
	for round := range 2 {
		v := quota.NewLedger(tr, s)
		p, err := tiresias.Plan(context.Background(), v.Gate())
		must.NoError(t, err)
		plan, err := v.Enforce(p)
		must.NoError(t, err)
		must.NoError(t, policy.Validate(s, plan))
		for i := range s.Jobs {
			j := &s.Jobs[i]
			if got := plan.Target(j); !got.Equal(j.Allocation) {
				log = append(log, fmt.Sprintf("round %d: %s %d -> %d", round, j.ID, j.Allocation.Total(), got.Total()))
			}
		}
		if round == 0 {
			must.Eq(t, []string{"kept at 1 GPU within queue b's nominal quota, whose GPUs the plan gave to queues that borrow; GPUs taken back: held a2"},
				plan.Reasons["b3"], must.Sprint(log))
		}
		s = s.Apply(plan, at(160+60*round))
		s.Jobs = slices.DeleteFunc(s.Jobs, func(j policy.Job) bool { return j.ID == "a4" }) // finished
	}
	must.Eq(t, []string{"round 0: a3 0 -> 1", "round 1: a2 0 -> 1"}, log,
		must.Sprint("a borrows the free GPUs; no job of b is stopped"))
}

// TestProperty_KeepsNominal: where any GPU serves any job, no round stops
// or shrinks in place (a job the plan moves is the policy's to place) a
// running job of a queue that would still be within its
// nominal quota holding all it holds now, while the GPUs it loses go to
// the plan's starts and grows of queues that borrow after the round
// (every queue of their line beside the job's, to where the lines meet):
// a borrower never preempts a job within its queue's nominal quota. Only
// cases where taking those starts and grows back would let the job keep
// its GPUs within every queue's limit count (else the GPUs went to its
// own queue's jobs, the policy's order within the queue).
func TestProperty_KeepsNominal(t *testing.T) {
	forEachCase(t, 47, func(uint64) genOptions { return genOptions{simple: true} },
		func(t *testing.T, c propertyCase) {
			s, plan := c.s, c.plan
			o := newOracle(c.defs)
			used, eff := o.used(s, plan), o.eff(s, plan)
			free := s.Apply(plan, at(200)).Free()
			leaf := func(j *policy.Job) string {
				if q := quota.QueueOf(j); len(o.children[q]) == 0 {
					if _, ok := o.defs[q]; ok {
						return q
					}
				}
				return ""
			}
			// borrowsBeside reports whether every queue of y's line, up to
			// where it meets x's, borrows after the plan.
			borrowsBeside := func(y, x string) bool {
				_, by := o.branches(x, y)
				for _, z := range o.line(y) {
					if eff[z] <= o.nominal(z, "") {
						return false
					}
					if z == by {
						return true
					}
				}
				return false
			}
			for i := range s.Jobs {
				k := &s.Jobs[i]
				q, tk := leaf(k), plan.Target(k)
				lost, loss := lostInPlace(k.Allocation, tk)
				if q == "" || loss == 0 || used[q][""]+loss > o.nominal(q, "") {
					continue
				}
				// The borrowers' starts and grows on the nodes k loses.
				back := map[string]int{}
				var gainers []string
				for x := range s.Jobs {
					g := &s.Jobs[x]
					y, tg := leaf(g), plan.Target(g)
					if y == "" || y == q || !pureGain(g.Allocation, tg) || !borrowsBeside(y, q) {
						continue
					}
					on := false
					for n := range lost {
						if d := tg[n] - g.Allocation[n]; d > 0 {
							back[n] += d
							on = true
						}
					}
					if on {
						gainers = append(gainers, g.ID)
					}
				}
				if len(gainers) == 0 {
					continue
				}
				enough := true
				for n, d := range lost {
					enough = enough && d <= free[n]+back[n]
				}
				if !enough {
					continue
				}
				// Keeping k, the gainers held back: within every limit?
				alt := &policy.Plan{Allocations: maps.Clone(plan.Allocations)}
				alt.Allocations[k.ID] = k.Allocation
				for x := range s.Jobs {
					if slices.Contains(gainers, s.Jobs[x].ID) {
						alt.Allocations[s.Jobs[x].ID] = s.Jobs[x].Allocation
					}
				}
				before, kept := o.used(s, nil), o.used(s, alt)
				within := true
				for z, byRes := range kept {
					within = within && (byRes[""] <= o.limit(z, "") || byRes[""] <= before[z][""])
				}
				if within {
					t.Fatalf("seed %d: job %s of queue %s (%d of nominal %d after the plan) loses %d GPUs %v to borrowers' jobs %v; reasons %v",
						c.seed, k.ID, q, used[q][""], o.nominal(q, ""), loss, lost, gainers, plan.Reasons)
				}
			}
		})
}

// lostInPlace is what a job holding a loses under target b, by node, and
// in all, where b stops or shrinks it in place; nothing where b gives it
// more than a on some node: a job the plan moves (and may shrink on its
// old nodes) is the policy's to place, as Enforce says.
func lostInPlace(a, b policy.Allocation) (map[string]int, int) {
	for n, g := range b {
		if g > a[n] {
			return nil, 0
		}
	}
	lost, loss := map[string]int{}, 0
	for n, g := range a {
		if d := g - b[n]; d > 0 {
			lost[n], loss = d, loss+d
		}
	}
	return lost, loss
}

// pureGain reports whether target b holds at least what a does on every
// node, and more on some: a start or a grow in place.
func pureGain(a, b policy.Allocation) bool {
	more := false
	for n, g := range a {
		if b[n] < g {
			return false
		}
	}
	for n, g := range b {
		more = more || g > a[n]
	}
	return more
}

// TestEnforce_KeepTakesBackAnAntiAffineStart: the plan stops b1, within
// queue b's nominal quota, and starts a2 of queue a, which borrows, on
// b1's node, where there is room for both, but b1 must not share a node
// with a2 (anti-affinity). Keeping b1 takes a2's start back; before, b1
// was kept beside a2 and the round's plan failed validation (found by
// TestProperty_Limits once jobs had goodput by GPU model, with
// goodput-hetero).
func TestEnforce_KeepTakesBackAnAntiAffineStart(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(4)}, quota.Def{Name: "b", Nominal: gpus(4)})
	b1 := job("b1", "b", 50, 2, 2, policy.Allocation{"n2": 2})
	b1.AntiAffinity.Jobs = []string{"a2"}
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1", "n2"), Jobs: []policy.Job{
		job("a1", "a", 50, 8, 8, policy.Allocation{"n1": 8}),
		b1,
		job("a2", "a", 50, 2, 2, nil),
	}}
	p := &policy.Plan{Policy: "fixed", Allocations: map[string]policy.Allocation{"b1": {}, "a2": {"n2": 2}}}
	must.NoError(t, policy.Validate(s, p), must.Sprint("the policy's plan is valid"))
	plan, err := quota.NewLedger(tr, s).Enforce(p)
	must.NoError(t, err)
	must.NoError(t, policy.Validate(s, plan))
	must.Eq(t, policy.Allocation{"n2": 2}, plan.Target(&s.Jobs[1]), must.Sprint("b1 kept"))
	must.Eq(t, 0, plan.Target(&s.Jobs[2]).Total(), must.Sprint("a2's start taken back"))
	must.Eq(t, []string{"kept at 2 GPUs within queue b's nominal quota, whose GPUs the plan gave to queues that borrow; GPUs taken back: held a2"},
		plan.Reasons["b1"])
}
