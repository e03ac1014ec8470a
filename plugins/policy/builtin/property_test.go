package builtin_test

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/examples/largestfirst"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/shoenig/test/must"
)

// allPolicies are the builtins and the example external policy, in process.
func allPolicies() map[string]host.Factory {
	all := host.Builtins()
	all[largestfirst.Name] = func() policy.Policy { return largestfirst.New() }
	return all
}

// TestProperty_PlansAreValid: on random snapshots every policy's plan
// passes Validate, does not depend on the order of the snapshot's nodes and
// jobs, and keeps the policy's own promises.
func TestProperty_PlansAreValid(t *testing.T) {
	iterations := 400
	if testing.Short() {
		iterations = 50
	}
	ctx := context.Background()
	for name, f := range allPolicies() {
		t.Run(name, func(t *testing.T) {
			p := f()
			for seed := range uint64(iterations) {
				r := rand.New(rand.NewPCG(seed, 7))
				s := randomSnapshot(r)
				why := must.Sprintf("seed %d", seed)
				plan, err := p.Plan(ctx, s)
				must.NoError(t, err, why)
				must.NoError(t, policy.Validate(s, plan), why)

				again, err := p.Plan(ctx, shuffled(r, s))
				must.NoError(t, err, why)
				must.Eq(t, plan.Allocations, again.Allocations, why)
				must.Eq(t, plan.Reasons, again.Reasons, why)

				checkPromises(t, name, s, plan, why)
				checkStartReasons(t, s, plan, why)
				checkPreemptive(t, name, s, plan, why)

				// A plan carried out is a consistent snapshot, and the
				// non-elastic policies have nothing more to do in it.
				next := s.Apply(plan, at(110))
				must.True(t, plan.Diff(next).Empty(), why)
				replan, err := p.Plan(ctx, next)
				must.NoError(t, err, why)
				must.NoError(t, policy.Validate(next, replan), why)
				if name == builtin.FIFOName || name == builtin.RoundRobinName {
					must.True(t, replan.Diff(next).Empty(), why, must.Sprintf("%+v", replan.Diff(next)))
				}
			}
		})
	}
}

// checkStartReasons: a job that plan p starts has one reason for its
// start, and it names the GPUs the job starts with, as the plan's change
// does (start: 0 -> n); a job started and grown in one round is not
// "started with 1 GPU" beside "grown from 1 to 4" (issue 28).
func checkStartReasons(t *testing.T, s *policy.Snapshot, p *policy.Plan, why must.Setting) {
	t.Helper()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		to := p.Target(j).Total()
		if j.Allocation.Total() > 0 || to == 0 {
			continue
		}
		var starts []string
		for _, r := range p.Why(j) {
			must.False(t, strings.HasPrefix(r, "grown from"), why, must.Sprintf("job %s started with a growth: %q", j.ID, p.Why(j)))
			if strings.HasPrefix(r, "started with") {
				starts = append(starts, r)
			}
		}
		must.Len(t, 1, starts, why, must.Sprintf("job %s: %q", j.ID, p.Why(j)))
		must.StrHasPrefix(t, "started with "+policy.GPUs(to)+" ", starts[0], why)
	}
}

// wellFormed reports whether j's current allocation keeps the gang rule (so
// no repair touches it).
func wellFormed(j *policy.Job) bool {
	t := j.Allocation.Total()
	for _, g := range j.Allocation {
		if g%j.GPUs.PerWorker != 0 {
			return false
		}
	}
	return t == 0 || (t >= j.GPUs.Min && t <= j.GPUs.Max)
}

func checkPromises(t *testing.T, name string, s *policy.Snapshot, p *policy.Plan, why must.Setting) {
	t.Helper()
	if name == builtin.TiresiasName || name == builtin.GoodputName || name == builtin.GoodputJCTName ||
		name == builtin.GoodputHeteroName || name == builtin.GoodputUnawareName {
		return // preemptive, no head-of-line blocking; their promises: checkPreemptive
	}
	order := make([]*policy.Job, len(s.Jobs))
	for i := range s.Jobs {
		order[i] = &s.Jobs[i]
	}
	slices.SortFunc(order, func(a, b *policy.Job) int {
		if c := a.Submitted.Compare(b.Submitted); c != 0 {
			return c
		}
		if a.ID < b.ID {
			return -1
		}
		return 1
	})
	if name == builtin.EDFName {
		slices.SortStableFunc(order, func(a, b *policy.Job) int {
			da, db := a.Progress.Deadline, b.Progress.Deadline
			switch {
			case da.IsZero() || db.IsZero():
				return boolInt(da.IsZero()) - boolInt(db.IsZero())
			}
			return da.Compare(db)
		})
	}
	blocked := ""
	for _, j := range order {
		from, to := j.Allocation.Total(), p.Target(j).Total()
		if from > 0 && wellFormed(j) && to == 0 && name == builtin.QoEName {
			// QoE stops only jobs that miss their deadlines anyway.
			must.False(t, j.Progress.Deadline.IsZero(), why, must.Sprintf("job %s was stopped", j.ID))
			must.StrContains(t, strings.Join(p.Reasons[j.ID], "; "), "preempted (", why)
		} else if from > 0 && wellFormed(j) {
			// No other builtin preempts a well-formed running job.
			must.Positive(t, to, why, must.Sprintf("job %s was stopped", j.ID))
			switch name {
			case builtin.FIFOName, builtin.RoundRobinName, largestfirst.Name:
				must.Eq(t, j.Allocation.Clone(), p.Target(j).Clone(), why, must.Sprintf("job %s was resized", j.ID))
			}
		}
		if from > 0 || name == largestfirst.Name {
			continue
		}
		if name == builtin.QoEName {
			continue // admits whatever fits (no head-of-line blocking)
		}
		// Head-of-line blocking in submission order (EDF: deadline order).
		switch {
		case to == 0 && blocked == "":
			blocked = j.ID
		case to > 0 && blocked != "":
			t.Fatalf("%s: job %s started although job %s before it waits (%v)", name, j.ID, blocked, why)
		}
		if name == builtin.ElasticFIFOName && to > 0 {
			must.Eq(t, j.GPUs.Min, min(to, j.GPUs.Min), why)
		}
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
