package quota

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Fair sharing divides what queues borrow by their weights, as Kueue's
// fair sharing does: a queue's share is what it borrows (its effective
// usage above its nominal quota, on the resource where that is most)
// per unit of its weight (Ledger.share). Two queues are compared where
// their lines meet: the children of their lowest common parent (or the
// top-level queues) that hold each.
//
// A queued job that fits its queue's limits but finds no free GPUs may
// take GPUs from a job of a queue beside its own that borrows, as a
// nominal claim does (the plan's gains first, then shrinks in place, then
// stops), but only while, after each take, the giving queue's line still
// borrows at least as much per weight as the taking queue's would with
// the job started (Kueue's LessThanOrEqualToFinalShare), and never into
// the giver's nominal quota: every queue from the giving job's to the
// one compared stays at or above its nominal quota of what it gives. The
// next round thus has no reason to move them back: the giver, starting a
// job, would borrow more per weight than the taker would after giving.

// shareEps absorbs float rounding when shares are compared (a share is
// GPUs over a weight of at most MaxWeight).
const shareEps = 1e-9

// fairClaims starts the first pending job, queues borrowing least per
// weight first (compared down the tree), then queue order, that fair
// sharing entitles to GPUs other queues borrow; true when one started.
func (e *enforcer) fairClaims(pending []int, t *tries) bool {
	v := e.v
	eff := v.effective(e.u)
	var order []int
	for _, i := range pending {
		if e.tgt[i].Total() == 0 && !t.failed[i] && !e.claimed[i] {
			order = append(order, i)
		}
	}
	// Priority first within a queue: a job is not claimed for while a job
	// of higher priority of its queue, needing no more, stays queued.
	above := map[int]int{}      // job -> least min of its queue's higher-priority queued jobs
	least := map[int]int{}      // queue -> least min of its queued jobs seen so far
	prio := map[int]int{}       // queue -> priority of the jobs being seen
	ahead := map[int]int{}      // queue -> least min of the jobs seen of higher priority
	for _, i := range pending { // queue order: priority first
		if e.tgt[i].Total() > 0 {
			continue
		}
		q, j := v.leaf[i], &v.s.Jobs[i]
		if p, ok := prio[q]; !ok || p != j.Priority {
			ahead[q] = cmp.Or(least[q], math.MaxInt)
			prio[q] = j.Priority
		}
		above[i] = ahead[q]
		least[q] = min(cmp.Or(least[q], math.MaxInt), j.GPUs.Min)
	}
	path := map[int][]float64{}
	for _, i := range order {
		if q := v.leaf[i]; path[q] == nil {
			path[q] = v.pathShares(eff, q)
		}
	}
	slices.SortStableFunc(order, func(a, b int) int { return slices.Compare(path[v.leaf[a]], path[v.leaf[b]]) })
	for _, i := range order {
		if t.exhausted() {
			return false
		}
		q, j := v.leaf[i], &v.s.Jobs[i]
		allowed := v.allowed(j)
		room := make([]int, len(v.res))
		for r := range v.res {
			room[r] = max(0, v.limit[q][r]-eff[q][r])
		}
		w := max(1, j.GPUs.PerWorker)
		c := claim{i: i, q: q, room: room, allowed: allowed, fair: true, need: (j.GPUs.Min + w - 1) / w * w}
		if above[i] <= c.need || !fits(j, room, allowed) || !e.fairChance(eff, c) {
			continue
		}
		switch e.claimFor(c) {
		case started:
			return true
		case unneeded:
			// Tried again after the next start, which may take those
			// free GPUs.
		case failed:
			if !t.fail(i) {
				return false
			}
		}
	}
	return false
}

// pathShares are the shares of queue q's line, top-level queue first.
func (v *Ledger) pathShares(eff [][]int, q int) []float64 {
	var out []float64
	for x := q; x != -1; x = v.t.queues[x].parent {
		out = append(out, v.share(eff, x))
	}
	slices.Reverse(out)
	return out
}

// fairChance reports whether some queue beside claim c's line borrows a
// resource the job may use and, now, at least as much per weight as c's
// line would with the job started: the claim cannot succeed otherwise
// (taking only lowers the giver's share).
func (e *enforcer) fairChance(eff [][]int, c claim) bool {
	v := e.v
	for a := c.q; a != -1; a = v.t.queues[a].parent {
		p := v.t.queues[a].parent
		mine := -1.0
		for x := range v.t.queues {
			if x == a || v.t.queues[x].parent != p || !v.borrowsAny(eff, x, c.allowed) {
				continue
			}
			if mine < 0 {
				mine = e.claimShare(c, p, nil).least
			}
			if v.share(eff, x)+shareEps >= mine {
				return true
			}
		}
	}
	return false
}

// borrowsAny reports whether queue x borrows one of the allowed
// resources.
func (v *Ledger) borrowsAny(eff [][]int, x int, allowed []bool) bool {
	for r := range v.res {
		if allowed[r] && v.borrows(eff, x, r) {
			return true
		}
	}
	return false
}

// claimShare is the share of the child of top (-1: the top-level queue)
// on claim c's line once its job starts at c.need GPUs, put on the
// allowed resource where that share is least (where the job lands is
// known once it is placed: fairAfter checks that), and on each resource,
// its share of that resource with the job all on it. cache, when not
// nil, keeps the answers for one state of the targets.
func (e *enforcer) claimShare(c claim, top int, cache map[int]claimShares) claimShares {
	if s, ok := cache[top]; ok {
		return s
	}
	v := e.v
	a := v.branch(c.q, top)
	out := claimShares{least: math.Inf(1), on: make([]float64, len(v.res))}
	for r := range v.res {
		if !c.allowed[r] {
			continue
		}
		next := clone(e.u)
		next[c.q][r] += c.need
		eff := v.effective(next)
		out.least = min(out.least, v.share(eff, a))
		out.on[r] = v.shareOn(eff, a, r)
	}
	if cache != nil {
		cache[top] = out
	}
	return out
}

// claimShares are a claim's line's shares with its job started (see
// claimShare).
type claimShares struct {
	least float64   // over resources, placed where it is least
	on    []float64 // of each resource, the job all on it
}

// branch is the queue on q's line whose parent is top (-1: q's top-level
// queue); q itself where q's parent is top.
func (v *Ledger) branch(q, top int) int {
	for v.t.queues[q].parent != top {
		q = v.t.queues[q].parent
	}
	return q
}

// shareUnder is the share of the queue on leaf q's line just under top
// (-1: its top-level queue); 0 where q is top.
func (v *Ledger) shareUnder(eff [][]int, q, top int) float64 {
	if q == top {
		return 0
	}
	return v.share(eff, v.branch(q, top))
}

// meet is the lowest queue holding both a and b (-1: none, the root);
// a and b are distinct leaves.
func (v *Ledger) meet(a, b int) int {
	for x := v.t.queues[a].parent; x != -1; x = v.t.queues[x].parent {
		if v.under(b, x) {
			return x
		}
	}
	return -1
}

// byFairShare is cands ordered by how much the line of each (where it
// meets q's) borrows per weight, most first; the order of cands within
// a share.
func (e *enforcer) byFairShare(eff [][]int, q int, cands []int) []int {
	v := e.v
	share := make(map[int]float64, len(cands))
	for _, k := range cands {
		share[k] = v.share(eff, v.branch(v.leaf[k], v.meet(q, v.leaf[k])))
	}
	out := slices.Clone(cands)
	slices.SortStableFunc(out, func(a, b int) int { return cmp.Compare(share[b], share[a]) })
	return out
}

// fairTake reports whether job k may go from its target to a for fair
// claim c: every queue from k's up to the one compared with c's line (Y)
// stays at or above its nominal quota of the resources it gives, and Y
// still borrows at least as much per weight as c's line would with the
// job started, over all resources (the share) and of each resource it
// gives. A job a claim started this round gives nothing to another, and
// a start is not taken back whole while a lower-priority start of its
// queue stays (startsBelow).
// shares caches claimShare for the current targets.
func (e *enforcer) fairTake(c claim, k int, a policy.Allocation, shares map[int]claimShares) bool {
	v := e.v
	if e.claimed[k] || a.Total() == 0 && e.startsBelow(k) {
		return false
	}
	y := v.leaf[k]
	top := v.meet(c.q, y)
	next := clone(e.u)
	v.add(next, y, e.tgt[k], -1)
	v.add(next, y, a, 1)
	eff := v.effective(next)
	gives := make([]bool, len(v.res))
	for n, g := range e.tgt[k] {
		if g > a[n] {
			gives[v.nodeRes[n]] = true
		}
	}
	for x := y; x != top; x = v.t.queues[x].parent {
		for r := range v.res {
			if gives[r] && eff[x][r] < v.nominal[x][r] {
				return false
			}
		}
	}
	mine, g := e.claimShare(c, top, shares), v.branch(y, top)
	for r := range v.res {
		if gives[r] && c.allowed[r] && mine.on[r] > v.shareOn(eff, g, r)+shareEps {
			return false
		}
	}
	return mine.least <= v.share(eff, g)+shareEps
}

// fairAfter checks fair claim c, its job placed at alloc after the takes
// in log: each queue given from still borrows at least as much per
// weight as c's line, where they meet, over all resources and of each
// resource the job holds.
func (e *enforcer) fairAfter(c claim, alloc policy.Allocation, log []undo) bool {
	v := e.v
	next := clone(e.u)
	v.add(next, c.q, alloc, 1)
	eff := v.effective(next)
	lands := make([]bool, len(v.res))
	for n, g := range alloc {
		lands[v.nodeRes[n]] = lands[v.nodeRes[n]] || g > 0
	}
	for _, u := range log {
		y := v.leaf[u.job]
		top := v.meet(c.q, y)
		x, g := v.branch(c.q, top), v.branch(y, top)
		if v.share(eff, x) > v.share(eff, g)+shareEps {
			return false
		}
		for r := range v.res {
			if lands[r] && v.shareOn(eff, x, r) > v.shareOn(eff, g, r)+shareEps {
				return false
			}
		}
	}
	return true
}

// borrowed is what queue q borrows under eff, in GPUs, on the resource
// where it borrows most.
func (v *Ledger) borrowed(eff [][]int, q int) int {
	most := 0
	for r := range v.res {
		most = max(most, eff[q][r]-v.nominal[q][r])
	}
	return most
}

// fairWhy says why fair sharing took GPUs from a job of queue y for job
// id of queue q, under the effective usage after the move.
func (v *Ledger) fairWhy(eff [][]int, q, y int, id string) string {
	top := v.meet(q, y)
	x, g := v.branch(q, top), v.branch(y, top)
	return fmt.Sprintf("fair share: queue %s borrows %s per weight %g (%.2f per unit) after giving these back, no less than queue %s with job %s started: %d per weight %g (%.2f)",
		v.t.queues[g].name, policy.GPUs(v.borrowed(eff, g)), v.t.queues[g].weight, v.share(eff, g),
		v.t.queues[x].name, id, v.borrowed(eff, x), v.t.queues[x].weight, v.share(eff, x))
}
