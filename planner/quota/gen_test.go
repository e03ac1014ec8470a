package quota_test

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/examples/largestfirst"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

var t0 = time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)

func at(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }

var models = []string{"A100", "H100"}

// genOptions shape a random case.
type genOptions struct {
	// simple: one GPU model, 1-GPU workers, no placement constraints, and
	// nominal quotas that fit the cluster, so a queue's guarantee can
	// always be met by taking GPUs back (the reclaim property's premise).
	simple bool
	// perModel gives quotas per GPU model.
	perModel bool
}

// randomTree returns 1 to 5 top-level queues, some with 1 to 3 children,
// with random nominal quotas (budget GPUs in all, where budget > 0),
// borrowing and lending limits and weights.
func randomTree(r *rand.Rand, o genOptions, budget int) []quota.Def {
	var defs []quota.Def
	amount := func(n int) quota.Amount {
		if !o.perModel {
			return quota.Amount{quota.AnyModel: n}
		}
		a := quota.Amount{}
		for _, m := range models {
			if r.IntN(3) != 0 {
				a[m] = r.IntN(n + 1)
			}
		}
		if len(a) == 0 {
			a[models[0]] = n
		}
		return a
	}
	limit := func(n int) quota.Amount {
		if r.IntN(2) == 0 {
			return nil
		}
		return quota.Amount{quota.AnyModel: r.IntN(n + 1)}
	}
	var leaves []int
	for i := range 1 + r.IntN(5) {
		name := fmt.Sprintf("q%d", i)
		kids := 0
		if r.IntN(3) == 0 {
			kids = 1 + r.IntN(3)
		}
		d := quota.Def{Name: name, BorrowingLimit: limit(8), Weight: float64(1 + r.IntN(3))}
		if kids == 0 {
			d.LendingLimit = limit(8)
			leaves = append(leaves, len(defs))
		} else if r.IntN(2) == 0 {
			d.LendingLimit = limit(8)
		}
		defs = append(defs, d)
		for k := range kids {
			leaves = append(leaves, len(defs))
			defs = append(defs, quota.Def{Name: fmt.Sprintf("%s-%d", name, k), Parent: name,
				BorrowingLimit: limit(8), LendingLimit: limit(8), Weight: float64(1 + r.IntN(3))})
		}
	}
	// Nominal quotas: leaves get random shares; parents their children's
	// sum, or more.
	for _, i := range leaves {
		n := r.IntN(12)
		if budget > 0 {
			n = r.IntN(budget/len(leaves) + 1)
		}
		defs[i].Nominal = amount(n)
	}
	for i := range defs {
		if defs[i].Nominal != nil || r.IntN(2) == 0 || budget > 0 {
			continue
		}
		sum := quota.Amount{}
		for _, c := range defs {
			if c.Parent == defs[i].Name {
				for m, g := range c.Nominal {
					sum[m] += g
				}
			}
		}
		for m := range sum {
			sum[m] += r.IntN(4)
		}
		if len(sum) > 0 {
			defs[i].Nominal = sum
		}
	}
	return defs
}

// leafNames are the queues of defs without children.
func leafNames(defs []quota.Def) []string {
	parents := map[string]bool{}
	for _, d := range defs {
		parents[d.Parent] = true
	}
	var out []string
	for _, d := range defs {
		if !parents[d.Name] {
			out = append(out, d.Name)
		}
	}
	return out
}

// randomCase returns a tree and a consistent snapshot: random nodes, and
// jobs in the tree's leaf queues (a few in a queue the tree lacks), some
// running, placed by a first round of a random builtin kept within the
// queues' rules, then more queued jobs.
func randomCase(r *rand.Rand, o genOptions) ([]quota.Def, *quota.Tree, *policy.Snapshot) {
	s := &policy.Snapshot{Now: at(60)}
	phys := 0
	for i := range 1 + r.IntN(10) {
		gpus := []int{0, 1, 2, 4, 8, 8}[r.IntN(6)]
		m := models[0]
		if !o.simple {
			m = models[r.IntN(2)]
		}
		s.Nodes = append(s.Nodes, policy.Node{ID: fmt.Sprintf("node-%02d", i), Name: fmt.Sprintf("n%d", i),
			GPUModel: m, GPUs: gpus, Pool: []string{"a", "b"}[r.IntN(2)]})
		phys += gpus
	}
	budget := 0
	if o.simple {
		budget = max(phys, 1)
	}
	defs := randomTree(r, o, budget)
	tree, err := quota.New(defs)
	if err != nil {
		panic(fmt.Sprintf("random tree: %v", err))
	}
	queues := leafNames(defs)
	addJobs := func(n, from, to int) {
		for range n {
			w := 1
			if !o.simple {
				w = []int{1, 1, 2}[r.IntN(3)]
			}
			lo := w * (1 + r.IntN(3))
			j := policy.Job{ID: fmt.Sprintf("job-%03d", len(s.Jobs)), Submitted: at(from + r.IntN(to-from)),
				State: policy.Queued, Queue: queues[r.IntN(len(queues))], Priority: []int{10, 50, 50, 90}[r.IntN(4)],
				GPUs: policy.GPURequest{Min: lo, Max: lo + w*r.IntN(4), PerWorker: w}}
			if r.IntN(20) == 0 {
				j.Queue = "ghost"
			}
			if !o.simple {
				switch r.IntN(6) {
				case 0:
					j.Constraints.GPUModel = models[r.IntN(2)]
				case 1:
					j.Constraints.Pool = "b"
				case 2:
					j.Constraints.MaxGPUsPerNode = w
				}
				if r.IntN(8) == 0 && len(s.Jobs) > 0 {
					j.AntiAffinity.Jobs = []string{s.Jobs[r.IntN(len(s.Jobs))].ID}
				}
				if r.IntN(2) == 0 {
					j.ByModel = randomByModel(r, j.GPUs.Max)
				}
			}
			s.Jobs = append(s.Jobs, j)
		}
	}
	addJobs(r.IntN(25), 0, 50)
	p := randomPolicy(r)
	v := quota.NewLedger(tree, s)
	plan, err := p.Plan(context.Background(), v.Gate())
	if err != nil {
		panic(fmt.Sprintf("warm-up plan: %v", err))
	}
	if plan, err = v.Enforce(plan); err != nil {
		panic(fmt.Sprintf("warm-up enforce: %v", err))
	}
	s = s.Apply(plan, at(50+r.IntN(10)))
	addJobs(r.IntN(25), 50, 100)
	s.Now = at(100)
	return defs, tree, s
}

// randomByModel is a job's goodput by GPU model up to max GPUs, as the
// planner gives it on clusters of two models (so goodput-hetero places by
// model): one model or both, each its own speed and scaling, and now and
// then a table shorter than max (more GPUs add nothing).
func randomByModel(r *rand.Rand, max int) map[string][]float64 {
	out := map[string][]float64{}
	for _, m := range models {
		if r.IntN(4) == 0 {
			continue // not measured on m
		}
		speed, loss := 0.5+2*r.Float64(), 0.2*r.Float64()
		tab := make([]float64, 1+r.IntN(max))
		for g := range tab {
			tab[g] = speed * float64(g+1) / (1 + loss*float64(g))
		}
		out[m] = tab
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// allPolicies are the builtins, the example external policy (in
// process), and one that never plans anything: none knows of queues.
func allPolicies() map[string]host.Factory {
	all := host.Builtins()
	all[largestfirst.Name] = func() policy.Policy { return largestfirst.New() }
	all["idle"] = func() policy.Policy { return idle{} }
	return all
}

// idle is a policy that changes nothing.
type idle struct{}

func (idle) PluginInfo() policy.Info           { return policy.Info{Name: "idle"} }
func (idle) SetConfig(map[string]string) error { return nil }
func (idle) Plan(context.Context, *policy.Snapshot) (*policy.Plan, error) {
	return &policy.Plan{Policy: "idle"}, nil
}

// shuffled returns s with its nodes and jobs in another order.
func shuffled(r *rand.Rand, s *policy.Snapshot) *policy.Snapshot {
	out := &policy.Snapshot{Now: s.Now, Nodes: slices.Clone(s.Nodes), Jobs: slices.Clone(s.Jobs)}
	r.Shuffle(len(out.Nodes), func(i, j int) { out.Nodes[i], out.Nodes[j] = out.Nodes[j], out.Nodes[i] })
	r.Shuffle(len(out.Jobs), func(i, j int) { out.Jobs[i], out.Jobs[j] = out.Jobs[j], out.Jobs[i] })
	return out
}

func policyNames() []string { return slices.Sorted(maps.Keys(allPolicies())) }

func randomPolicy(r *rand.Rand) policy.Policy {
	names := policyNames()
	return allPolicies()[names[r.IntN(len(names))]]()
}
