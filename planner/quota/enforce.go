package quota

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Enforce returns plan p, which the policy made on Gate's snapshot, made
// to hold the queues' rules on the whole snapshot, in these steps:
//
//  1. Trim: while a queue (or a parent, or the cluster's lending) would
//     exceed its bound after the plan, the plan's gains of the queue's jobs
//     are taken back, one job at a time: the jobs of queues that borrow
//     before those within their nominal quota, then the line (under the
//     bound) that borrows most per weight, then grows before starts, then
//     lowest priority first, then the latest submitted. A job whose queue
//     the tree lacks keeps what it holds, or less.
//  2. Priority: within a queue, a job the plan starts gives way to a
//     queued job of higher priority that fits once its start is taken
//     back (see prioritize).
//  3. Reclaim: a running job the plan stops or shrinks keeps its GPUs
//     where its queue would still be within its nominal quota holding
//     them and the plan gives them to queues that borrow (a borrower never
//     preempts a job within its queue's nominal quota): the plan's gains
//     of borrowers on its nodes are taken back. A queued job whose queue
//     is below its nominal quota by at least the job's minimum, while
//     another queue borrows, is started at its minimum by best fit, with
//     GPUs taken back from borrowers as needed: first the plan's own
//     gains of borrowers, then elastic jobs shrunk in place toward their
//     min, then jobs stopped (preempted: requeued), lowest priority first,
//     only from queues that borrow at the time, and only where the GPUs
//     help. Nothing is taken when the job could still not start. Within a
//     queue, priority first, then the kept jobs, then submission; priority
//     within each queue is checked again after each claim.
//  4. Fair sharing: a queued job that fits its queue's limits but finds
//     no free GPUs starts at its minimum the same way, taking GPUs from
//     queues beside its queue's line only while each, after the take,
//     still borrows at least as much per weight as the job's line would
//     (see fair.go), queues that borrow least per weight first.
//
// The result passes policy.Validate against the whole snapshot; the error
// (with a plan that keeps every job as it is, but for the policy's shrinks
// and stops) says when a step broke it, which is a bug.
func (v *Ledger) Enforce(p *policy.Plan) (*policy.Plan, error) {
	if v.t.implicit && v.onePrio {
		// The default tree (one queue, unlimited) and jobs of one
		// priority: nothing to trim, reorder or reclaim, so the plan
		// stands as the policy made it (a round of a planner without
		// queues costs nothing more than before).
		return p, nil
	}
	e := &enforcer{v: v, tgt: make([]policy.Allocation, len(v.s.Jobs)), claimed: map[int]bool{},
		out: &policy.Plan{Policy: p.Policy, Allocations: map[string]policy.Allocation{}, Reasons: map[string][]string{}, Waiting: p.Waiting}}
	for id, r := range p.Reasons {
		e.out.Reasons[id] = slices.Clone(r)
	}
	for i := range v.s.Jobs {
		e.tgt[i] = p.Target(&v.s.Jobs[i]).Clone()
		// A job whose queue is gone from the tree keeps what it holds,
		// or less: it counts against no queue, so it takes no more.
		if cur := v.s.Jobs[i].Allocation; v.leaf[i] == -1 && !e.tgt[i].Equal(cur) && e.gainsAny(i) {
			e.tgt[i] = cur.Clone()
			delete(e.out.Reasons, v.s.Jobs[i].ID)
		}
	}
	e.u = v.usage(e.tgt)
	e.free = v.free(e.tgt)
	if !e.trim() {
		e.decreasesOnly()
	}
	e.prioritize()
	e.reclaim()
	plan := e.plan(p)
	if !e.changed(p) {
		// The policy's plan as it was: the policy host validated it on
		// Gate's snapshot, which differs only by queued jobs it leaves be.
		return plan, nil
	}
	if err := policy.Validate(v.s, plan); err != nil {
		e.tgt = make([]policy.Allocation, len(v.s.Jobs))
		for i := range v.s.Jobs {
			e.tgt[i] = p.Target(&v.s.Jobs[i]).Clone()
		}
		e.decreasesOnly()
		return e.plan(p), fmt.Errorf("failed to keep the plan within the queues' quotas: %w", err)
	}
	return plan, nil
}

type enforcer struct {
	v    *Ledger
	tgt  []policy.Allocation // each job's target, by index
	u    [][]int             // usage under tgt
	free map[string]int      // free GPUs per node under tgt
	out  *policy.Plan
	// claimed is the jobs fair claims started this round: they give no
	// GPUs to another fair claim (a round does not undo its own moves).
	claimed map[int]bool
	// inverted: a claim held back a start while a lower-priority start
	// of its queue stays (see startsBelow).
	inverted bool
}

// changed reports whether any job's target differs from what plan p
// gives it.
func (e *enforcer) changed(p *policy.Plan) bool {
	for i := range e.v.s.Jobs {
		if !e.tgt[i].Equal(p.Target(&e.v.s.Jobs[i])) {
			return true
		}
	}
	return false
}

// usage is the leaves' usage under targets tgt, the GPUs held outside
// the snapshot included.
func (v *Ledger) usage(tgt []policy.Allocation) [][]int {
	u := clone(v.reserved)
	for i, a := range tgt {
		if q := v.leaf[i]; q != -1 {
			v.add(u, q, a, 1)
		}
	}
	return u
}

// free is each node's free GPUs under targets tgt.
func (v *Ledger) free(tgt []policy.Allocation) map[string]int {
	f := maps.Clone(v.caps())
	for _, a := range tgt {
		for n, g := range a {
			f[n] -= g
		}
	}
	return f
}

// set makes job i's target a, keeping usage and free GPUs in step.
func (e *enforcer) set(i int, a policy.Allocation) {
	if q := e.v.leaf[i]; q != -1 {
		e.v.add(e.u, q, e.tgt[i], -1)
		e.v.add(e.u, q, a, 1)
	}
	for n, g := range e.tgt[i] {
		e.free[n] += g
	}
	for n, g := range a {
		e.free[n] -= g
	}
	e.tgt[i] = a
}

// revertible reports whether job i can go back to its current allocation
// without overfilling a node (the GPUs it would leave may have gone to
// another job in the plan).
func (e *enforcer) revertible(i int) bool {
	cur := e.v.s.Jobs[i].Allocation
	for n, g := range cur {
		if d := g - e.tgt[i][n]; d > 0 && e.free[n] < d {
			return false
		}
	}
	return true
}

// gains is how many GPUs of resource r job i's target holds above its
// current allocation.
func (e *enforcer) gains(i, r int) int {
	d := 0
	for n, g := range e.tgt[i] {
		if e.v.nodeRes[n] == r {
			d += g
		}
	}
	for n, g := range e.v.s.Jobs[i].Allocation {
		if e.v.nodeRes[n] == r {
			d -= g
		}
	}
	return d
}

// under reports whether queue q is x or inside it (x == -1: the root).
func (v *Ledger) under(q, x int) bool {
	for ; q != -1; q = v.t.queues[q].parent {
		if q == x {
			return true
		}
	}
	return x == -1
}

// trim takes back the plan's gains until no bound is exceeded that the
// snapshot did not already exceed as much; false when it cannot. A job's
// gain is cut a worker at a time while it stays a valid start or grow
// (at least its min; no node below what it holds now), then taken back
// whole.
func (e *enforcer) trim() bool {
	v := e.v
	limit := len(v.s.Jobs) + 1
	for _, c := range v.caps() {
		limit += c
	}
	cut := map[int]string{}
	defer func() {
		for _, k := range slices.Sorted(maps.Keys(cut)) {
			switch j := &v.s.Jobs[k]; {
			case e.tgt[k].Equal(j.Allocation):
				e.out.Reasons[j.ID] = append(e.out.Reasons[j.ID], "not grown: "+cut[k])
			case e.tgt[k].Total() > 0:
				e.out.Reasons[j.ID] = append(e.out.Reasons[j.ID], fmt.Sprintf("cut to %s: %s", policy.GPUs(e.tgt[k].Total()), cut[k]))
			}
		}
	}()
	for range limit {
		bad, ok := e.firstBreach()
		if !ok {
			return true
		}
		st := v.effective(e.u)
		var cands []int
		for i := range v.s.Jobs {
			if q := v.leaf[i]; q != -1 && v.under(q, bad.q) && e.gains(i, bad.r) > 0 && (e.cuttable(i, bad.r) != "" || e.revertible(i)) {
				cands = append(cands, i)
			}
		}
		if len(cands) == 0 {
			return false
		}
		k := slices.MinFunc(cands, func(a, b int) int {
			x, y := &v.s.Jobs[a], &v.s.Jobs[b]
			return cmp.Or(
				cmp.Compare(lender(v.share(st, v.leaf[a])), lender(v.share(st, v.leaf[b]))), // borrowers first
				// Fair sharing: the line that borrows most per weight
				// under the bound gives first, then the queue.
				cmp.Compare(v.shareUnder(st, v.leaf[b], bad.q), v.shareUnder(st, v.leaf[a], bad.q)),
				cmp.Compare(v.share(st, v.leaf[b]), v.share(st, v.leaf[a])),
				cmp.Compare(startOrder(x), startOrder(y)), // grows before starts
				cmp.Compare(x.Priority, y.Priority),
				y.Submitted.Compare(x.Submitted),
				cmp.Compare(y.ID, x.ID))
		})
		j := &v.s.Jobs[k]
		why := e.v.describeBreach(bad)
		if n := e.cuttable(k, bad.r); n != "" {
			a := e.tgt[k].Clone()
			a[n] -= max(1, j.GPUs.PerWorker)
			e.set(k, a.Clone())
			cut[k] = why
			continue
		}
		delete(cut, k)
		if j.Allocation.Total() == 0 {
			delete(e.out.Reasons, j.ID)
			v.why[j.ID] = "not started: " + why
		} else {
			e.out.Reasons[j.ID] = append(e.out.Reasons[j.ID], "not grown: "+why)
		}
		e.set(k, j.Allocation.Clone())
	}
	return false
}

// cuttable is a node of resource r where job k's target may lose a
// worker and stay a valid start or grow: at least its min in all, and no
// less than it holds now on the node. The node where it gains least;
// "" when there is none.
func (e *enforcer) cuttable(k, r int) string {
	j := &e.v.s.Jobs[k]
	w := max(1, j.GPUs.PerWorker)
	if e.tgt[k].Total()-w < j.GPUs.Min {
		return ""
	}
	best, gain := "", 0
	for _, n := range e.tgt[k].Nodes() {
		if g := e.tgt[k][n] - j.Allocation[n]; e.v.nodeRes[n] == r && g >= w && (best == "" || g < gain) {
			best, gain = n, g
		}
	}
	return best
}

// lender is 0 for a queue that borrows (share > 0), 1 for one that does not.
func lender(share float64) int {
	if share > 0 {
		return 0
	}
	return 1
}

// startOrder is 0 for a running job (a grow), 1 for a queued one.
func startOrder(j *policy.Job) int {
	if j.Allocation.Total() > 0 {
		return 0
	}
	return 1
}

// firstBreach is the first bound exceeded under the targets that the
// snapshot did not exceed as much.
func (e *enforcer) firstBreach() (violation, bool) { return e.v.breach(e.u) }

// breach is the first bound usage u exceeds that the snapshot did not
// exceed as much (see within).
func (v *Ledger) breach(u [][]int) (violation, bool) {
	was := map[[2]int]int{}
	for _, b := range v.violations(v.cur) {
		was[[2]int{b.q, b.r}] = b.have
	}
	for _, x := range v.violations(u) {
		if have, ok := was[[2]int{x.q, x.r}]; !ok || x.have > have {
			return x, true
		}
	}
	return violation{}, false
}

// describeBreach says which bound a violation exceeds.
func (v *Ledger) describeBreach(x violation) string {
	m := modelSuffix(v.res[x.r])
	if x.q == -1 {
		return fmt.Sprintf("the other queues' idle GPUs%s are not free to lend (the cluster's queues would use or guard %d of %d)", m, x.have, x.bound)
	}
	q := &v.t.queues[x.q]
	return fmt.Sprintf("queue %s would hold %s%s, above its limit of %d (nominal %s + borrowing limit %s)",
		q.name, policy.GPUs(x.have), m, x.bound, amount(v.nominal[x.q][x.r]), amount(v.limit[x.q][x.r]-v.nominal[x.q][x.r]))
}

// decreasesOnly keeps of the plan only what frees GPUs: each job holds
// its target where that is no more than its current allocation on every
// node (a stop or a shrink), else its current allocation. This never
// overfills a node and never raises a queue's usage.
func (e *enforcer) decreasesOnly() {
	for i := range e.v.s.Jobs {
		cur := e.v.s.Jobs[i].Allocation
		keep := true
		for n, g := range e.tgt[i] {
			keep = keep && g <= cur[n]
		}
		if !keep {
			e.tgt[i] = cur.Clone()
			if cur.Total() == 0 {
				delete(e.out.Reasons, e.v.s.Jobs[i].ID)
			}
		}
	}
	e.u = e.v.usage(e.tgt)
	e.free = e.v.free(e.tgt)
}

// plan is the enforced plan: every job the policy listed or Enforce
// changed, at its target.
func (e *enforcer) plan(p *policy.Plan) *policy.Plan {
	out := e.out
	out.Allocations = map[string]policy.Allocation{}
	for i := range e.v.s.Jobs {
		j := &e.v.s.Jobs[i]
		_, listed := p.Allocations[j.ID]
		if listed || !e.tgt[i].Equal(j.Allocation) {
			a := e.tgt[i].Clone()
			if a == nil {
				a = policy.Allocation{}
			}
			out.Allocations[j.ID] = a
		}
	}
	for id := range out.Reasons {
		if !e.v.hasJob(id) {
			delete(out.Reasons, id)
		}
	}
	return out
}
