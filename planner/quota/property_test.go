package quota_test

import (
	"context"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
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
	view   *quota.Ledger // the round's view, after Enforce
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
				plan, view := roundView(t, name, tree, s, why)
				check(t, propertyCase{policy: name, seed: seed, r: r, defs: defs, tree: tree, s: s,
					plan: plan, view: view, why: why})
			}
		})
	}
}

// planRound plans a round of policy name within tree's rules and checks
// the plan keeps the gang rule on the whole snapshot.
func planRound(t *testing.T, name string, tree *quota.Tree, s *policy.Snapshot, why must.Setting) *policy.Plan {
	t.Helper()
	plan, _ := roundView(t, name, tree, s, why)
	return plan
}

// roundView is planRound with the round's view.
func roundView(t *testing.T, name string, tree *quota.Tree, s *policy.Snapshot, why must.Setting) (*policy.Plan, *quota.Ledger) {
	t.Helper()
	v := quota.NewLedger(tree, s)
	plan, err := allPolicies()[name]().Plan(context.Background(), v.Gate())
	must.NoError(t, err, why)
	enforced, err := v.Enforce(plan)
	must.NoError(t, err, why)
	must.NoError(t, policy.Validate(s, enforced), why)
	return enforced, v
}

// eff is what each queue uses or guards after plan p, as its parent
// counts it (single resource): a leaf's jobs' GPUs; a parent's, over its
// children, what each uses or guards (nominal less lending limit),
// whichever is more.
func (o *oracle) eff(s *policy.Snapshot, p *policy.Plan) map[string]int {
	used := o.used(s, p)
	out := map[string]int{}
	var walk func(q string) int
	walk = func(q string) int {
		if len(o.children[q]) == 0 {
			out[q] = used[q][""]
			return out[q]
		}
		sum := 0
		for _, c := range o.children[q] {
			guard := max(0, o.nominal(c, "")-get(o.defs[c].LendingLimit, "", quota.Unlimited))
			sum += max(walk(c), guard)
		}
		out[q] = sum
		return sum
	}
	for q, d := range o.defs {
		if d.Parent == "" {
			walk(q)
		}
	}
	return out
}

func (o *oracle) weight(q string) float64 {
	if w := o.defs[q].Weight; w > 0 {
		return w
	}
	return 1
}

// line is q and its parents, q first.
func (o *oracle) line(q string) []string {
	var out []string
	for ; q != ""; q = o.defs[q].Parent {
		out = append(out, q)
	}
	return out
}

// branches are the queues of x's and y's lines that are siblings: where
// the two lines meet.
func (o *oracle) branches(x, y string) (string, string) {
	for _, a := range o.line(x) {
		for _, b := range o.line(y) {
			if a != b && o.defs[a].Parent == o.defs[b].Parent {
				return a, b
			}
		}
	}
	return "", ""
}

// TestProperty_FairShare: where any GPU serves any job, once a round has
// run no job waits (with fewer GPUs free than its minimum) that could
// start by taking its minimum from a queue beside its line by shrinking
// one queue's elastic jobs, that queue's line staying above its nominal
// quotas and still borrowing at least as much per weight as the job's
// line would (the move fair sharing makes); and a second round (the
// quota layer alone, the same jobs pending) moves no GPUs back between
// the lines the first round's fair claims moved them between.
func TestProperty_FairShare(t *testing.T) {
	forEachCase(t, 29, func(uint64) genOptions { return genOptions{simple: true} },
		func(t *testing.T, c propertyCase) {
			s, plan, why := c.s, c.plan, c.why
			o := newOracle(c.defs)
			used, eff := o.used(s, plan), o.eff(s, plan)
			free := 0
			for _, n := range s.Nodes {
				free += n.GPUs
			}
			for i := range s.Jobs {
				free -= plan.Target(&s.Jobs[i]).Total()
			}
			borrow := func(q string, d int) float64 {
				return float64(max(0, eff[q]+d-o.nominal(q, ""))) / o.weight(q)
			}
			// give is what leaf l's elastic jobs may give by shrinking
			// (those a fair claim started this round give nothing).
			give := map[string]int{}
			for i := range s.Jobs {
				j := &s.Jobs[i]
				if n := plan.Target(j).Total(); n > 0 && !fairStarted(plan, j.ID) {
					give[quota.QueueOf(j)] += n - j.GPUs.Min
				}
			}
			for i := range s.Jobs {
				j := &s.Jobs[i]
				x, m := quota.QueueOf(j), j.GPUs.Min
				if _, ok := o.defs[x]; !ok || j.Allocation.Total() > 0 || plan.Target(j).Total() > 0 || free >= m ||
					used[x][""]+m > o.limit(x, "") || blockedAbove(s, plan, j) {
					continue
				}
				for _, y := range o.outside(x) {
					ax, _ := o.branches(x, y)
					if borrow(ax, m) > borrow(y, -m) || !o.fits(eff, x, ax, m) {
						continue
					}
					for _, l := range slices.Sorted(maps.Keys(give)) {
						if give[l] < m || !slices.Contains(o.line(l), y) || !o.above(eff, l, y, m) {
							continue
						}
						t.Fatalf("seed %d: job %s (min %d) of queue %s waits while queue %s (in %s) could give it %d GPUs by shrinking, %s still borrowing %.2f per weight against %s's %.2f; reasons %v",
							c.seed, j.ID, m, x, l, y, m, y, borrow(y, -m), ax, borrow(ax, m), plan.Reasons)
					}
				}
			}
			// Round 2: nothing moves back.
			moved := map[[2]string]bool{}
			for _, tk := range c.view.Reclaimed() {
				if strings.HasPrefix(tk.Why, "fair share:") {
					to, from := o.branches(tk.Queue, tk.From)
					moved[[2]string{from, to}] = true
				}
			}
			next := s.Apply(plan, at(200))
			v := quota.NewLedger(c.tree, next)
			v.Gate()
			again, err := v.Enforce(&policy.Plan{Policy: "none"})
			must.NoError(t, err, why)
			for id, tk := range v.Reclaimed() {
				if to, from := o.branches(tk.Queue, tk.From); strings.HasPrefix(tk.Why, "fair share:") && moved[[2]string{to, from}] {
					t.Fatalf("seed %d: round 2 moves GPUs of job %s from %s back to %s (%s); round 2: %v", c.seed, id, from, to, tk.Why, again.Reasons)
				}
			}
		})
}

// fits reports whether every queue from leaf x up to a may hold m more.
func (o *oracle) fits(eff map[string]int, x, a string, m int) bool {
	for _, z := range o.line(x) {
		if eff[z]+m > o.limit(z, "") {
			return false
		}
		if z == a {
			break
		}
	}
	return true
}

// above reports whether every queue from leaf l up to y stays at or above
// its nominal quota with m less.
func (o *oracle) above(eff map[string]int, l, y string, m int) bool {
	for _, z := range o.line(l) {
		if eff[z]-m < o.nominal(z, "") {
			return false
		}
		if z == y {
			break
		}
	}
	return true
}

// fairStarted reports whether plan p's round started job id by a fair
// claim.
func fairStarted(p *policy.Plan, id string) bool {
	rs := p.Reasons[id]
	return len(rs) > 0 && strings.HasPrefix(rs[0], "started at ") && strings.Contains(rs[0], " by fair share")
}

// blockedAbove reports whether a job of j's queue of higher priority,
// needing no more, stays queued after plan p (j then waits behind it).
func blockedAbove(s *policy.Snapshot, p *policy.Plan, j *policy.Job) bool {
	for i := range s.Jobs {
		h := &s.Jobs[i]
		if quota.QueueOf(h) == quota.QueueOf(j) && h.Priority > j.Priority && h.Allocation.Total() == 0 &&
			p.Target(h).Total() == 0 && h.GPUs.Min <= j.GPUs.Min {
			return true
		}
	}
	return false
}
