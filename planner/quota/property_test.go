package quota_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// oracle reads a tree's definitions the simple way, apart from the
// package's accounting: what each queue's jobs hold (its own, or its
// descendants'), against its nominal quota and limit.
type oracle struct {
	defs     map[string]quota.Def
	children map[string][]string
	perModel bool
}

func newOracle(defs []quota.Def) *oracle {
	o := &oracle{defs: map[string]quota.Def{}, children: map[string][]string{}}
	for _, d := range defs {
		o.defs[d.Name] = d
		if d.Parent != "" {
			o.children[d.Parent] = append(o.children[d.Parent], d.Name)
		}
		if _, any := d.Nominal[quota.AnyModel]; len(d.Nominal) > 0 && !any {
			o.perModel = true
		}
	}
	return o
}

func (o *oracle) res(n *policy.Node) string {
	if o.perModel {
		return n.GPUModel
	}
	return quota.AnyModel
}

func get(a quota.Amount, m string, def int) int {
	if v, ok := a[m]; ok {
		return v
	}
	if v, ok := a[quota.AnyModel]; ok {
		return v
	}
	return def
}

func (o *oracle) nominal(q, m string) int {
	d := o.defs[q]
	if d.Nominal != nil || len(o.children[q]) == 0 {
		return get(d.Nominal, m, 0)
	}
	sum := 0
	for _, c := range o.children[q] {
		sum += o.nominal(c, m)
	}
	return sum
}

func (o *oracle) limit(q, m string) int {
	return o.nominal(q, m) + get(o.defs[q].BorrowingLimit, m, quota.Unlimited)
}

// used is what each queue's jobs hold per resource after plan p (nil:
// now), its descendants' included.
func (o *oracle) used(s *policy.Snapshot, p *policy.Plan) map[string]map[string]int {
	res := map[string]string{}
	for i := range s.Nodes {
		res[s.Nodes[i].ID] = o.res(&s.Nodes[i])
	}
	out := map[string]map[string]int{}
	for q := range o.defs {
		out[q] = map[string]int{}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		a := j.Allocation
		if p != nil {
			a = p.Target(j)
		}
		for q := quota.QueueOf(j); q != ""; q = o.defs[q].Parent {
			if _, ok := o.defs[q]; !ok {
				break
			}
			for n, g := range a {
				out[q][res[n]] += g
			}
		}
	}
	return out
}

// outside are the queues beside q's line: the siblings of q and of each
// of its parents (the queues q may take back GPUs from).
func (o *oracle) outside(q string) []string {
	var out []string
	for a := q; a != ""; a = o.defs[a].Parent {
		for name, d := range o.defs {
			if name != a && d.Parent == o.defs[a].Parent {
				out = append(out, name)
			}
		}
	}
	return out
}

// TestProperty_Limits: on random snapshots and random queue trees, with
// every builtin policy and the example external one planning on Gate's
// snapshot, the enforced plan
// passes Validate on the whole snapshot (the gang rule), and no queue
// holds more than its nominal quota plus borrowing limit, unless it
// already did and holds no more than before; the plan does not depend on
// the order of the snapshot's nodes and jobs.
func TestProperty_Limits(t *testing.T) {
	forEachCase(t, 16, func(seed uint64) genOptions { return genOptions{perModel: seed%3 == 0} },
		func(t *testing.T, c propertyCase) {
			defs, tree, s, plan, why := c.defs, c.tree, c.s, c.plan, c.why
			again := planRound(t, c.policy, tree, shuffled(c.r, s), why)
			must.Eq(t, plan.Allocations, again.Allocations, why, must.Sprint("the order of nodes and jobs changes nothing"))
			o := newOracle(defs)
			before, after := o.used(s, nil), o.used(s, plan)
			for q, byRes := range after {
				for m, got := range byRes {
					if lim := o.limit(q, m); got > lim {
						must.True(t, before[q][m] > lim && got <= before[q][m], why,
							must.Sprintf("queue %s holds %d GPUs of %q after the plan, above its limit %d (before: %d)", q, got, m, lim, before[q][m]))
					}
				}
			}
		})
}

// TestProperty_Reclaim: where the nominal quotas fit the cluster and any
// GPU can serve any job, once a round has run no job waits whose queue
// is below its nominal quota by at least the job's minimum while a queue
// beside the job's (a sibling of its queue or of a parent) holds more
// than its own nominal quota: reclaim took the GPUs back, whatever the
// policy planned.
func TestProperty_Reclaim(t *testing.T) {
	forEachCase(t, 61, func(uint64) genOptions { return genOptions{simple: true} },
		func(t *testing.T, c propertyCase) {
			s, plan, why := c.s, c.plan, c.why
			o := newOracle(c.defs)
			after := o.used(s, plan)
			for i := range s.Jobs {
				j := &s.Jobs[i]
				q := quota.QueueOf(j)
				if _, ok := o.defs[q]; !ok || j.Allocation.Total() > 0 || plan.Target(j).Total() > 0 {
					continue
				}
				if after[q][""]+j.GPUs.Min > o.nominal(q, "") {
					continue
				}
				for _, x := range o.outside(q) {
					must.LessEq(t, o.nominal(x, ""), after[x][""], why,
						must.Sprintf("job %s (min %d) waits in queue %s (%d of %d) while queue %s holds %d of its %d",
							j.ID, j.GPUs.Min, q, after[q][""], o.nominal(q, ""), x, after[x][""], o.nominal(x, "")))
				}
			}
		})
}

// TestProperty_PriorityFirst: where any GPU can serve any job, no job
// starts in a round while a job of higher priority in the same queue,
// needing no more GPUs than it was given, stays queued.
func TestProperty_PriorityFirst(t *testing.T) {
	forEachCase(t, 90, func(uint64) genOptions { return genOptions{simple: true} },
		func(t *testing.T, c propertyCase) {
			seed, s, plan := c.seed, c.s, c.plan
			for i := range s.Jobs {
				l := &s.Jobs[i]
				got := plan.Target(l).Total()
				if l.Allocation.Total() > 0 || got == 0 {
					continue
				}
				for k := range s.Jobs {
					h := &s.Jobs[k]
					if quota.QueueOf(h) == quota.QueueOf(l) && h.Priority > l.Priority && h.Allocation.Total() == 0 &&
						plan.Target(h).Total() == 0 && h.GPUs.Min <= got {
						t.Fatalf("seed %d: job %s (priority %d) started with %d GPUs while %s (priority %d, min %d) of queue %s waits",
							seed, l.ID, l.Priority, got, h.ID, h.Priority, h.GPUs.Min, quota.QueueOf(l))
					}
				}
			}
		})
}

// propertyCase is one random case of a property test: a snapshot, its
// queues, and the plan of one policy enforced on them.
type propertyCase struct {
	policy string
	seed   uint64
	r      *rand.Rand
	defs   []quota.Def
	tree   *quota.Tree
	s      *policy.Snapshot
	plan   *policy.Plan
	why    must.Setting
}

// forEachCase runs check on 400 random cases (50 with -short) for every
// policy, from the random stream numbered stream, each made with the
// options opts gives for its seed.
func forEachCase(t *testing.T, stream uint64, opts func(seed uint64) genOptions, check func(*testing.T, propertyCase)) {
	iterations := 400
	if testing.Short() {
		iterations = 50
	}
	for _, name := range policyNames() {
		t.Run(name, func(t *testing.T) {
			for seed := range uint64(iterations) {
				r := rand.New(rand.NewPCG(seed, stream))
				defs, tree, s := randomCase(r, opts(seed))
				why := must.Sprintf("seed %d", seed)
				check(t, propertyCase{policy: name, seed: seed, r: r, defs: defs, tree: tree, s: s,
					plan: planRound(t, name, tree, s, why), why: why})
			}
		})
	}
}

// planRound plans a round of policy name within tree's rules and checks
// the plan keeps the gang rule on the whole snapshot.
func planRound(t *testing.T, name string, tree *quota.Tree, s *policy.Snapshot, why must.Setting) *policy.Plan {
	t.Helper()
	v := quota.NewView(tree, s)
	plan, err := allPolicies()[name]().Plan(context.Background(), v.Gate())
	must.NoError(t, err, why)
	enforced, err := v.Enforce(plan)
	must.NoError(t, err, why)
	must.NoError(t, policy.Validate(s, enforced), why)
	return enforced
}
