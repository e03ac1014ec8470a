package quota

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// maxReclaimFailures bounds the queued jobs a round tries, and fails, to
// make room for: each try costs a pass over the borrowers' jobs and the
// nodes, and a job that does not fit now is tried again next round.
const maxReclaimFailures = 32

// reclaim keeps the running jobs the plan stops or shrinks where their
// queues' nominal quota entitles them to their GPUs while the plan gives
// those GPUs to queues that borrow, and starts the queued jobs that
// their queues' nominal quota entitles to run while other queues borrow,
// taking GPUs back from the borrowers (see Enforce); then it starts the
// jobs fair sharing entitles to GPUs that queues borrowing more per
// weight hold (see fairClaims). Jobs are taken in priority order, a
// queue's running jobs before its queued ones of the same priority, then
// submission; nominal claims before fair ones.
func (e *enforcer) reclaim() {
	v := e.v
	var pending, losing []int
	for i := range v.s.Jobs {
		switch {
		case v.leaf[i] == -1:
		case v.gpus[i] == 0:
			pending = append(pending, i)
		case e.loses(i):
			losing = append(losing, i)
		}
	}
	slices.SortFunc(pending, v.byQueueOrder)
	slices.SortFunc(losing, v.byQueueOrder)
	// Nominal claims: priority first, then the jobs the plan stops or
	// shrinks (the policy ran them until now, and keeping one costs no
	// restart), then the queued ones.
	claims := append(losing, pending...)
	slices.SortStableFunc(claims, func(a, b int) int { return cmp.Compare(v.s.Jobs[b].Priority, v.s.Jobs[a].Priority) })
	// After each start the passes begin again from the top: a start (or
	// what it took back) can make an earlier job entitled, which then goes
	// first, so that priority holds within each queue, and nominal claims
	// keep their precedence over fair ones.
	nominal, fair := newTries(), newTries()
	// Each pass starts a job; a job started is taken back only by a
	// claim of another queue, and one a fair claim started is not claimed
	// again, so this bound is never reached: it only guards the round.
	for range 2*len(claims) + 1 {
		if e.nominalClaims(claims, nominal) {
			if e.inverted {
				// The claim held back a start where the GPUs were wanted
				// (a kept job's own nodes) while a lower-priority start
				// of its queue stays: priority within the queue again.
				e.prioritize()
				e.inverted = false
			}
			continue
		}
		if !e.fairClaims(pending, fair) {
			return
		}
	}
}

// tries counts the claims a round tried and failed, by job: a failed job
// is not tried again in the round, and a round gives up after
// maxReclaimFailures of them.
type tries struct {
	failed   map[int]bool
	failures int
}

func newTries() *tries { return &tries{failed: map[int]bool{}} }

// fail records job i's failed claim; false once the round should stop.
func (t *tries) fail(i int) bool {
	t.failed[i] = true
	t.failures++
	return t.failures < maxReclaimFailures
}

func (t *tries) exhausted() bool { return t.failures >= maxReclaimFailures }

// nominalClaims makes the first claim (in the order of claims) that its
// queue's nominal quota entitles to GPUs while a queue beside it borrows:
// a running job the plan stops or shrinks keeps what of its GPUs its
// queue has room for below its nominal quota (see kept), a queued job
// starts where its queue is below its nominal quota by at least its
// minimum; true when one did.
func (e *enforcer) nominalClaims(claims []int, t *tries) bool {
	v := e.v
	eff := v.effective(e.u)
	borrower := map[int]bool{}
	for _, i := range claims {
		if t.exhausted() {
			return false
		}
		q, j := v.leaf[i], &v.s.Jobs[i]
		running := j.Allocation.Total() > 0
		if running && !e.loses(i) || !running && e.tgt[i].Total() > 0 || t.failed[i] {
			continue
		}
		allowed := v.allowed(j)
		room := make([]int, len(v.res))
		for r := range v.res {
			room[r] = max(0, v.nominal[q][r]-eff[q][r])
		}
		var keep policy.Allocation
		if running {
			if keep = e.kept(i, room); keep == nil {
				continue
			}
		} else if !fits(j, room, allowed) {
			continue
		}
		b, ok := borrower[q]
		if !ok {
			b = e.anyBorrower(eff, q, nil)
			borrower[q] = b
		}
		if !b || !e.anyBorrower(eff, q, allowed) {
			continue
		}
		if e.claimFor(claim{i: i, q: q, room: room, allowed: allowed, keep: keep}) == started {
			return true
		}
		t.fail(i)
	}
	return false
}

// loses reports whether the plan stops or shrinks job i in place: its
// target holds fewer GPUs than it holds now on some node, and no more on
// any (a job the plan moves is the policy's to place).
func (e *enforcer) loses(i int) bool {
	cur, less := e.v.s.Jobs[i].Allocation, false
	for n, g := range e.tgt[i] {
		if g > cur[n] {
			return false
		}
	}
	for n, g := range cur {
		less = less || e.tgt[i][n] < g
	}
	return less
}

// kept is what running job i, which the plan stops or shrinks, may keep
// as a nominal claim: its target with the GPUs it loses given back, a
// worker at a time on the nodes where it holds them now (in node order),
// within room per resource (what its queue lacks of its nominal quota).
// nil when that gives nothing back or leaves it below its minimum: the
// rest of the loss went to its own queue's jobs, the policy's order
// within the queue.
func (e *enforcer) kept(i int, room []int) policy.Allocation {
	v, j := e.v, &e.v.s.Jobs[i]
	w := max(1, j.GPUs.PerWorker)
	left := slices.Clone(room)
	a, back := e.tgt[i].Clone(), false
	if a == nil {
		a = policy.Allocation{}
	}
	for _, n := range j.Allocation.Nodes() {
		r := v.nodeRes[n]
		for a[n]+w <= j.Allocation[n] && left[r] >= w {
			a[n] += w
			left[r] -= w
			back = true
		}
	}
	if !back || a.Total() < j.GPUs.Min {
		return nil
	}
	return a
}

// borrows reports whether queue x holds more of resource r than its
// nominal quota, under effective usage eff (a parent's counts what its
// children guard).
func (v *Ledger) borrows(eff [][]int, x, r int) bool { return eff[x][r] > v.nominal[x][r] }

// anyBorrower reports whether a queue outside q's line (a sibling of q or
// of one of its parents, or a subtree of one) borrows a resource q's job
// may use (allowed; nil: any).
func (e *enforcer) anyBorrower(st [][]int, q int, allowed []bool) bool {
	v := e.v
	for a := q; ; a = v.t.queues[a].parent {
		p := -1
		if a != -1 {
			p = v.t.queues[a].parent
		}
		for x := range v.t.queues {
			if x == a || v.t.queues[x].parent != p {
				continue
			}
			for r := range v.res {
				if (allowed == nil || allowed[r]) && v.borrows(st, x, r) {
					return true
				}
			}
		}
		if a == -1 || p == -1 {
			return false
		}
	}
}

// eligible reports whether job k's GPUs of resource r may be taken back
// for queue q: every queue from k's up to (not including) the one it
// shares with q borrows r.
func (e *enforcer) eligible(st [][]int, k, q, r int) bool {
	for x := e.v.leaf[k]; x != -1 && !e.v.under(q, x); x = e.v.t.queues[x].parent {
		if !e.v.borrows(st, x, r) {
			return false
		}
	}
	return true
}

// block is what keeps a job from starting: no room on the nodes
// (place; where on is not nil, on the nodes it lacks GPUs on), or a bound
// it would exceed (at queue x, or the root when x is -1, for resource r).
type block struct {
	place bool
	on    map[string]bool
	jobs  map[int]bool // the jobs whose GPUs on the nodes block it (anti-affinity); nil: any job's
	x, r  int
}

// useful lists the nodes where job k holds GPUs that may be taken back
// for queue q and that address b: for a placement, nodes job j may use;
// for a bound, nodes of its resource, k's queue being under its queue.
// eff is the effective usage now. Most free first.
func (e *enforcer) useful(eff [][]int, k, q int, j *policy.Job, b block) []string {
	v := e.v
	if !b.place && !v.under(v.leaf[k], b.x) || b.jobs != nil && !b.jobs[k] {
		return nil
	}
	var out []string
	for _, n := range e.tgt[k].Nodes() {
		r := v.nodeRes[n]
		if b.place && (b.on != nil && !b.on[n] || !j.Constraints.Allows(&v.s.Nodes[v.nodeIndex()[n]])) || !b.place && r != b.r {
			continue
		}
		if e.eligible(eff, k, q, r) {
			out = append(out, n)
		}
	}
	slices.SortStableFunc(out, func(x, y string) int { return cmp.Compare(e.free[y], e.free[x]) })
	return out
}

// victims are the jobs reclaim may take GPUs from for job i of queue q,
// in the order it takes them: lowest priority first, then the queue that
// borrows most per weight, then the most recently resized.
func (e *enforcer) victims(i, q int) []int {
	v := e.v
	eff := v.effective(e.u)
	var out []int
	for k := range v.s.Jobs {
		if k != i && v.leaf[k] != -1 && v.leaf[k] != q && e.tgt[k].Total() > 0 {
			out = append(out, k)
		}
	}
	slices.SortFunc(out, func(a, b int) int {
		x, y := &v.s.Jobs[a], &v.s.Jobs[b]
		return cmp.Or(cmp.Compare(x.Priority, y.Priority),
			cmp.Compare(v.share(eff, v.leaf[b]), v.share(eff, v.leaf[a])),
			y.LastResized.Compare(x.LastResized), cmp.Compare(x.ID, y.ID))
	})
	return out
}

type undo struct {
	job  int
	prev policy.Allocation
}

// claim is a queued job to start at its minimum, taking GPUs back from
// borrowers: job i of queue q, placed within room per resource, on the
// resources it is allowed. fair: a fair-sharing claim (fairClaims), whose
// takes must leave the queues they come from borrowing at least as much
// per weight as q's line would; else a claim within q's nominal quota.
// keep: a running job the plan stops or shrinks, kept at keep, on the
// nodes it holds now (see kept), with only the plan's own gains of
// borrowers taken back; nil for a queued job.
type claim struct {
	i, q    int
	room    []int
	allowed []bool
	fair    bool
	need    int // the job's start: its min rounded up to whole workers
	keep    policy.Allocation
}

// outcome is what came of a claim.
type outcome int

const (
	failed   outcome = iota // nothing taken: the job could still not start
	started                 // started, GPUs taken back as needed
	unneeded                // a fair claim the free GPUs already hold: left to the policy
)

// claimFor starts claim c's job, taking GPUs back from borrowers as
// needed, each taken where it addresses what keeps the job from
// starting, in order: the plan's own gains of borrowers, then elastic
// jobs shrunk in place a worker at a time, then jobs stopped. A keep
// claim takes back the plan's gains only: what the plan gave of the
// job's GPUs. It changes nothing when even that leaves no room.
func (e *enforcer) claimFor(c claim) outcome {
	r := &claimRun{e: e, c: c, j: &e.v.s.Jobs[c.i], kind: map[int]string{}}
	r.alloc, r.b = r.try()
	if r.alloc != nil && c.fair {
		// GPUs are free for it: whether it starts is the policy's call.
		return unneeded
	}
	if r.alloc == nil {
		r.cands = e.victims(c.i, c.q)
	}
	// The plan's own gains of borrowers first: they cost no one work.
	r.takeBack("held", e.holdGain)
	if c.keep == nil {
		// Then elastic jobs, shrunk in place toward their min, a worker
		// at a time; then whole jobs, stopped.
		r.takeBack("shrunk", e.shrinkWorker)
		r.takeBack("stopped", stopWhole)
	}
	if r.alloc != nil && c.fair && !e.fairAfter(c, r.alloc, r.log) {
		r.alloc = nil
	}
	if r.alloc == nil {
		r.undoTakes()
		r.explainFailure()
		return failed
	}
	r.commit()
	return started
}

// claimRun is one claimFor under way. It carries what the steps of a
// claim share: the claim and its job; what was taken back so far, in
// order (log, undone newest first when the claim fails) and how each job
// gave (kind: held, shrunk or stopped, for the reasons); where the job
// fits once it does (alloc) or else what keeps it from starting (b); and
// the jobs it may take from, in the order it takes them (cands, see
// victims).
type claimRun struct {
	e     *enforcer
	c     claim
	j     *policy.Job
	log   []undo
	kind  map[int]string
	alloc policy.Allocation
	b     block
	cands []int
}

// proposal is one way of taking GPUs back, asked of candidate k (which
// holds GPUs that address the block on nodes, most free first): what k
// would keep, and whether k may give that way at all.
type proposal func(k int, nodes []string) (policy.Allocation, bool)

// try places the claim's job as things stand: at keep for a keep claim
// (which needs the free GPUs on its own nodes), else where place finds
// room. It checks the queues' bounds with the job there, so that a start
// never breaches one. The allocation on success; else nil and what
// blocks it, which tells the next take where it helps.
func (r *claimRun) try() (policy.Allocation, block) {
	e, v, c := r.e, r.e.v, r.c
	var a policy.Allocation
	if c.keep != nil {
		if lack := e.lacks(c.i, c.keep); len(lack) > 0 {
			return nil, block{place: true, on: lack}
		}
		// The plan may have started a job beside it there that it must
		// not share a node with (it left those GPUs): that start goes
		// first, or the job is not kept.
		if on, jobs := e.antiOn(c.i, c.keep); len(jobs) > 0 {
			return nil, block{place: true, on: on, jobs: jobs}
		}
		a = c.keep
	} else if a = e.place(c.i, c.room); a == nil {
		return nil, block{place: true}
	}
	next := clone(e.u)
	v.add(next, c.q, e.tgt[c.i], -1)
	v.add(next, c.q, a, 1)
	if x, bad := v.breach(next); bad {
		return nil, block{x: x.q, r: x.r}
	}
	return a, block{}
}

// pick is the first candidate that may give for the current block, and
// what it would keep (propose; false: it may not give this way). A fair
// claim takes from the queue that borrows most per weight first, and only
// what fairTake allows, so that a queue never ends up borrowing less per
// weight than the one it gave to. -1 when no candidate may give.
func (r *claimRun) pick(propose proposal) (int, policy.Allocation) {
	e, c := r.e, r.c
	eff := e.v.effective(e.u)
	order := r.cands
	var shares map[int]claimShares
	if c.fair {
		order = e.byFairShare(eff, c.q, r.cands)
		shares = map[int]claimShares{}
	}
	for _, k := range order {
		if e.tgt[k].Total() == 0 {
			continue
		}
		nodes := e.useful(eff, k, c.q, r.j, r.b)
		if len(nodes) == 0 {
			continue
		}
		if a, ok := propose(k, nodes); ok && (!c.fair || e.fairTake(c, k, a, shares)) {
			return k, a
		}
	}
	return -1, nil
}

// takeBack takes GPUs back one way (propose, reported as how) until the
// job fits or no candidate may give that way: a take at a time, each
// picked for what blocks the job after the last, so that no more is
// taken than the start needs.
func (r *claimRun) takeBack(how string, propose proposal) {
	for r.alloc == nil {
		k, a := r.pick(propose)
		if k == -1 {
			return
		}
		r.apply(k, a, how)
		r.alloc, r.b = r.try()
	}
}

// apply sets job k's target to a, logging what it was so that a failed
// claim can undo it, and how k gave (a job once stopped is reported as
// stopped, whatever was taken from it before).
func (r *claimRun) apply(k int, a policy.Allocation, how string) {
	r.log = append(r.log, undo{k, r.e.tgt[k]})
	r.e.set(k, a)
	if r.kind[k] != "stopped" {
		r.kind[k] = how
	}
}

// holdGain proposes that job k keep its current allocation: the plan's
// gain of a borrower given up, which costs no one work. Only for a job
// the plan changes, that gains some resource, and that may be reverted.
func (e *enforcer) holdGain(k int, _ []string) (policy.Allocation, bool) {
	cur := e.v.s.Jobs[k].Allocation
	return cur.Clone(), !e.tgt[k].Equal(cur) && e.gainsAny(k) && e.revertible(k)
}

// shrinkWorker proposes that elastic job k give one worker's GPUs on the
// first of nodes (the most free): a shrink in place, never below its
// minimum, so that it keeps running.
func (e *enforcer) shrinkWorker(k int, nodes []string) (policy.Allocation, bool) {
	w := max(1, e.v.s.Jobs[k].GPUs.PerWorker)
	if e.tgt[k].Total()-w < e.v.s.Jobs[k].GPUs.Min {
		return nil, false
	}
	a := e.tgt[k].Clone()
	a[nodes[0]] -= w
	return a, true
}

// stopWhole proposes that a job give all its GPUs: stopped and requeued,
// the last resort.
func stopWhole(int, []string) (policy.Allocation, bool) { return nil, true }

// undoTakes gives back what a failed claim took, newest first, so that
// the targets are as they were before it.
func (r *claimRun) undoTakes() {
	for x := len(r.log) - 1; x >= 0; x-- {
		r.e.set(r.log[x].job, r.log[x].prev)
	}
}

// explainFailure says why a failed claim's queued job still waits, for
// Waits to report. A keep claim's job needs no word: the plan's stop or
// shrink stands, the GPUs having gone to jobs reclaim may not take them
// from.
func (r *claimRun) explainFailure() {
	v, c, j := r.e.v, r.c, r.j
	switch {
	case c.keep != nil:
	case c.fair:
		v.why[j.ID] = fmt.Sprintf("fair share: queue %s may borrow, but the queues that borrow more per weight could not give %s and still borrow at least as much per weight as it would",
			v.t.queues[c.q].name, policy.GPUs(c.need))
	default:
		v.why[j.ID] = fmt.Sprintf("queue %s is below its nominal quota, but taking GPUs back from the queues that borrow would not make room for %s (placement: model, pool, per-node and anti-affinity rules)",
			v.t.queues[c.q].name, policy.GPUs(j.GPUs.Min))
	}
}

// commit starts the claim's job at alloc and gives the reasons: to each
// job it took GPUs from, and to the job itself, which names those takes.
func (r *claimRun) commit() {
	e, v := r.e, r.e.v
	e.set(r.c.i, r.alloc)
	if r.c.fair {
		e.claimed[r.c.i] = true
	}
	delete(v.why, r.j.ID)
	eff := v.effective(e.u)
	took := r.explainTakes(eff)
	e.out.Reasons[r.j.ID] = []string{r.startReason(eff, took)}
}

// explainTakes gives each job the claim took GPUs from its reason, once
// however often it gave, in the order first taken (eff: the effective
// usage with the job started), and lists the takes as "how ID" for the
// started job's own reason.
func (r *claimRun) explainTakes(eff [][]int) []string {
	var took []string
	for _, u := range r.log {
		k := u.job
		if r.kind[k] == "" {
			continue
		}
		r.noteTake(k, r.takeWhy(eff, k))
		took = append(took, fmt.Sprintf("%s %s", r.kind[k], r.e.v.s.Jobs[k].ID))
		r.kind[k] = ""
	}
	return took
}

// takeWhy is why job k gave GPUs to the claim's job: the fair shares of
// the two queues for a fair claim, the claim's nominal quota otherwise
// (worded for a job kept or a job started).
func (r *claimRun) takeWhy(eff [][]int, k int) string {
	v, q, j := r.e.v, r.c.q, r.j
	switch {
	case r.c.fair:
		return v.fairWhy(eff, q, v.leaf[k], j.ID)
	case r.c.keep != nil:
		return fmt.Sprintf("queue %s does not lend these GPUs: job %s (priority %d) keeps them within its nominal quota; queue %s borrows",
			v.t.queues[q].name, j.ID, j.Priority, v.t.queues[v.leaf[k]].name)
	}
	return fmt.Sprintf("queue %s takes back GPUs it lent: job %s (priority %d) starts within its nominal quota; queue %s borrows",
		v.t.queues[q].name, j.ID, j.Priority, v.t.queues[v.leaf[k]].name)
}

// noteTake records why job k gave, as its kind of take: a start held back
// is a wait (and may break priority within its queue, which prioritize
// then restores), a growth held back, a shrink and a stop are plan
// reasons; shrinks and stops are also the takes Reclaimed reports.
func (r *claimRun) noteTake(k int, why string) {
	e, v := r.e, r.e.v
	vk := &v.s.Jobs[k]
	switch r.kind[k] {
	case "held":
		if vk.Allocation.Total() == 0 {
			delete(e.out.Reasons, vk.ID)
			v.why[vk.ID] = "not started: " + why
			e.inverted = e.inverted || e.startsBelow(k)
		} else {
			e.out.Reasons[vk.ID] = append(e.out.Reasons[vk.ID], "not grown: "+why)
		}
	case "shrunk":
		e.out.Reasons[vk.ID] = append(e.out.Reasons[vk.ID], "shrunk in place: "+why)
	case "stopped":
		e.out.Reasons[vk.ID] = append(e.out.Reasons[vk.ID], "preempted (requeued): "+why)
	}
	if r.kind[k] != "held" {
		v.taken[vk.ID] = Taken{Job: r.j.ID, Queue: v.t.queues[r.c.q].name, From: v.t.queues[v.leaf[k]].name, Why: why}
	}
}

// startReason is the started job's reason: how many GPUs it started (or
// was kept) at, under which rule, and the takes that made room.
func (r *claimRun) startReason(eff [][]int, took []string) string {
	v, q, total := r.e.v, r.c.q, policy.GPUs(r.alloc.Total())
	reason := fmt.Sprintf("started at %s within queue %s's nominal quota", total, v.t.queues[q].name)
	switch {
	case r.c.fair:
		reason = fmt.Sprintf("started at %s by fair share: queue %s borrows %s per weight %g with it", total,
			v.t.queues[q].name, policy.GPUs(v.borrowed(eff, q)), v.t.queues[q].weight)
	case r.c.keep != nil:
		reason = fmt.Sprintf("kept at %s within queue %s's nominal quota, whose GPUs the plan gave to queues that borrow", total, v.t.queues[q].name)
	}
	if len(took) > 0 && r.c.keep != nil {
		reason += "; GPUs taken back: " + strings.Join(took, ", ")
	} else if len(took) > 0 {
		reason += "; GPUs taken back from borrowers: " + strings.Join(took, ", ")
	}
	return reason
}

// lacks is the nodes where job i's target holds fewer GPUs than a and the
// free GPUs do not make up the difference; empty when a fits.
func (e *enforcer) lacks(i int, a policy.Allocation) map[string]bool {
	out := map[string]bool{}
	for n, g := range a {
		if g-e.tgt[i][n] > e.free[n] {
			out[n] = true
		}
	}
	return out
}

// antiOn is the nodes of a (nil: of the whole cluster) where another
// job's target holds GPUs that job i must not share a node with
// (anti-affinity, either way), and those jobs; none without
// anti-affinity.
func (e *enforcer) antiOn(i int, a policy.Allocation) (map[string]bool, map[int]bool) {
	v, j := e.v, &e.v.s.Jobs[i]
	if !v.hasAnti() {
		return nil, nil
	}
	var on map[string]bool
	var jobs map[int]bool
	for k := range v.s.Jobs {
		if k == i || e.tgt[k].Total() == 0 || !j.AntiAffinity.Matches(&v.s.Jobs[k]) && !v.s.Jobs[k].AntiAffinity.Matches(j) {
			continue
		}
		for n := range e.tgt[k] {
			if a == nil || a[n] > 0 {
				if on == nil {
					on, jobs = map[string]bool{}, map[int]bool{}
				}
				on[n], jobs[k] = true, true
			}
		}
	}
	return on, jobs
}

// startsBelow reports whether job k is a start this round while a job of
// lower priority of its queue starts with at least k's minimum: holding
// k back would break priority within the queue (which a fair claim,
// taking only part of what a queue borrows, could otherwise do).
func (e *enforcer) startsBelow(k int) bool {
	v, jk := e.v, &e.v.s.Jobs[k]
	if jk.Allocation.Total() > 0 {
		return false
	}
	for l := range v.s.Jobs {
		if jl := &v.s.Jobs[l]; l != k && v.leaf[l] == v.leaf[k] && jl.Priority < jk.Priority && jl.Allocation.Total() == 0 &&
			e.tgt[l].Total() >= jk.GPUs.Min {
			return true
		}
	}
	return false
}

// gainsAny reports whether job k's target holds more than its current
// allocation of some resource.
func (e *enforcer) gainsAny(k int) bool {
	for r := range e.v.res {
		if e.gains(k, r) > 0 {
			return true
		}
	}
	return false
}

// place finds nodes for job i's smallest valid GPU count among the free
// GPUs, within room per resource, honouring its constraints and
// anti-affinity: the fullest single node that holds it all, else the
// nodes with the most free GPUs first, all of one GPU model. nil when it
// does not fit.
func (e *enforcer) place(i int, room []int) policy.Allocation {
	v, j := e.v, &e.v.s.Jobs[i]
	w := max(1, j.GPUs.PerWorker)
	need := (j.GPUs.Min + w - 1) / w * w
	if need <= 0 || need > j.GPUs.Max {
		return nil
	}
	blocked, _ := e.antiOn(i, nil)
	left := slices.Clone(room)
	type cand struct {
		id    string
		model string
		cap   int
		r     int
	}
	var cands []cand
	for x := range v.s.Nodes {
		n := &v.s.Nodes[x]
		if blocked[n.ID] || !j.Constraints.Allows(n) {
			continue
		}
		c := e.free[n.ID]
		if m := j.Constraints.MaxGPUsPerNode; m > 0 {
			c = min(c, m)
		}
		if c -= c % w; c > 0 {
			cands = append(cands, cand{n.ID, n.GPUModel, c, v.nodeRes[n.ID]})
		}
	}
	best := -1
	for x, c := range cands {
		if min(c.cap, left[c.r]) >= need && (best == -1 || c.cap < cands[best].cap || c.cap == cands[best].cap && c.id < cands[best].id) {
			best = x
		}
	}
	if best != -1 {
		return policy.Allocation{cands[best].id: need}
	}
	// Across nodes, all of one GPU model (policy.Validate's one-model
	// rule): the models by their room for the job, most first (then by
	// name), each tried on its own.
	slices.SortFunc(cands, func(a, b cand) int { return cmp.Or(cmp.Compare(b.cap, a.cap), cmp.Compare(a.id, b.id)) })
	byModel := map[string]int{}
	for _, c := range cands {
		byModel[c.model] += c.cap
	}
	models := slices.SortedFunc(maps.Keys(byModel), func(a, b string) int {
		return cmp.Or(cmp.Compare(byModel[b], byModel[a]), cmp.Compare(a, b))
	})
	for _, m := range models {
		left := slices.Clone(room)
		out := policy.Allocation{}
		rem := need
		for _, c := range cands {
			if c.model != m {
				continue
			}
			g := min(c.cap, left[c.r], rem)
			if g -= g % w; g > 0 {
				out[c.id] = g
				left[c.r] -= g
				rem -= g
			}
			if rem == 0 {
				return out
			}
		}
	}
	return nil
}
