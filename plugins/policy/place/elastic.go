package place

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Elastic is the round of the elastic builtins: Elastic FIFO's, and EDF's,
// which is the same round in deadline order. See RunElastic.
type Elastic struct {
	// Order is the jobs (indexes into Jobs) in the order they are admitted
	// and grown.
	Order []int32
	// Donors, if set, are the jobs in the order they give up GPUs to admit
	// another; when nil, the running jobs most recently resized first
	// (LastResized, latest first; then latest submitted).
	Donors []int32
	// Cooldown: with Cooldown > 0, a job that was running in the snapshot
	// and was resized less than Cooldown before the round is not grown.
	Cooldown time.Duration
	// Rule names the order in the reasons of jobs that wait behind another,
	// e.g. "first come, first served".
	Rule string
}

// RunElastic runs round e at time now: admission in e.Order at each job's
// Min, shrinking donors (TakeFor, never below their Min) when Min does not
// fit, with head-of-line blocking when even that does not help; then growth
// into idle GPUs toward Max in e.Order, own nodes first. Jobs are never
// stopped. builtin.ElasticFIFO states the semantics in full.
func (c *Board) RunElastic(ctx context.Context, now time.Time, e Elastic) error {
	r := elasticRound{c: c, order: e.Order, preferDonors: e.Donors, cooldown: e.Cooldown, shrunk: make([]bool, len(c.jobs))}
	return r.run(ctx, now, e.Rule)
}

// elasticRound is the state of one RunElastic.
type elasticRound struct {
	c        *Board
	order    []int32 // the jobs in the order they are admitted and grown
	cooldown time.Duration
	// donors are the running jobs in the order they give up GPUs to admit
	// a job; nil until needed, then those of preferDonors if that is set,
	// else most recently resized first.
	donors       []int32
	preferDonors []int32
	shrunk       []bool // by job: shrunk in this round
}

// run admits and then grows the jobs in e.order; rule names the order in
// the reasons of jobs that wait behind another.
func (e *elasticRound) run(ctx context.Context, now time.Time, rule string) error {
	c := e.c
	var waiting []string
	for i, jj := range e.order {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("failed to plan: %w", err)
			}
		}
		job := c.jobs[jj]
		if c.total[jj] > 0 {
			continue
		}
		if waiting != nil {
			c.wait(jj, waiting)
			continue
		}
		if c.Grow(jj, job.GPUs.Min) || e.shrinkToAdmit(jj) {
			c.NoteStarted(jj, "its minimum", "")
			continue
		}
		c.Notef(jj, "queued: needs %s, which do not fit even with running jobs at their minimum; later jobs wait behind it", policy.GPUs(job.GPUs.Min))
		waiting = []string{fmt.Sprintf("queued: waiting behind job %s, which does not fit yet (%s)", job.ID, rule)}
	}

	for _, jj := range e.order {
		if c.totalFree == 0 {
			break
		}
		job := c.jobs[jj]
		r := job.GPUs
		t := c.total[jj]
		if t == 0 || t >= r.Max || e.shrunk[jj] || c.totalFree < r.PerWorker {
			continue
		}
		if e.cooldown > 0 && job.Allocation.Total() > 0 && now.Sub(job.LastResized) < e.cooldown {
			continue
		}
		g := min(r.Max-t, c.room(jj)) / r.PerWorker * r.PerWorker
		if g > 0 && c.Grow(jj, g) {
			c.NoteGrown(jj, t, "into idle GPUs", "")
		}
	}
	return nil
}

// shrinkToAdmit shrinks donors to make room for queued job b at its Min and
// places it; or changes nothing and returns false.
func (e *elasticRound) shrinkToAdmit(b int32) bool {
	c := e.c
	if e.donors == nil && e.preferDonors != nil {
		e.donors = make([]int32, 0, len(c.jobs))
		for _, j := range e.preferDonors {
			if c.total[j] > 0 {
				e.donors = append(e.donors, j)
			}
		}
	}
	if e.donors == nil {
		e.donors = make([]int32, 0, len(c.jobs))
		for j := range c.jobs {
			if c.total[j] > 0 {
				e.donors = append(e.donors, int32(j))
			}
		}
		slices.SortStableFunc(e.donors, func(a, b int32) int {
			if x := c.jobs[b].LastResized.Compare(c.jobs[a].LastResized); x != 0 {
				return x
			}
			return int(b - a) // later in submission order first
		})
	}
	job := c.jobs[b]
	taken, ok := c.TakeFor(b, job.GPUs.Min, e.donors, func(d int32) int { return c.jobs[d].GPUs.Min })
	for _, t := range taken {
		e.shrunk[t.Job] = true
		c.Notef(t.Job, "shrunk from %d to %s to admit job %s", c.total[t.Job]+t.GPUs, policy.GPUs(c.total[t.Job]), job.ID)
	}
	return ok
}

// Taken is what a donor gave up in TakeFor.
type Taken struct {
	Job  int32
	GPUs int
}

// TakeFor makes room for job b to gain gain GPUs (a multiple of its
// PerWorker) by shrinking donors, in order, a worker at a time and never
// below floor(donor), on the nodes b may use; then it grows b by gain and
// puts back, last taken first, the shrinks the placement did not need. It
// returns what each donor gave up (in the order they were first taken
// from). If b cannot gain gain GPUs even with every donor at its floor, it
// changes nothing and returns false. A donor left below its Min is the
// caller's to stop.
func (c *Board) TakeFor(b int32, gain int, donors []int32, floor func(int32) int) ([]Taken, bool) {
	c.candidates(b)
	// The candidates can only grow as donors shrink, so this mask is safe
	// for choosing where to shrink; room recomputes them exactly.
	mask := slices.Clone(c.cand)
	mark := len(c.undo)
	var taken []change
	fits := c.room(b) >= gain
	for _, d := range donors {
		if fits {
			break
		}
		if d == b || c.total[d] == 0 {
			continue // a donor that holds nothing has nothing to give
		}
		w := c.jobs[d].GPUs.PerWorker
		for !fits && c.total[d]-w >= floor(d) {
			n := c.donorNode(d, b, mask)
			if n < 0 {
				break
			}
			c.add(d, n, -w)
			taken = append(taken, change{job: d, node: n, gpus: w})
			fits = c.room(b) >= gain
		}
	}
	if !fits || !c.Grow(b, gain) {
		c.rollback(mark)
		return nil, false
	}
	// Put back what the placement did not use, last taken first.
	for i := len(taken) - 1; i >= 0; i-- {
		t := taken[i]
		capD := c.jobs[t.job].Constraints.MaxGPUsPerNode
		if nodeRoom(c.free[t.node], c.heldOn(t.job, t.node), t.gpus, capD) < t.gpus {
			continue
		}
		if len(c.antiJobs) > 0 {
			if c.candidates(t.job); !c.cand.has(t.node) {
				continue
			}
		}
		c.add(t.job, t.node, t.gpus)
		taken[i].gpus = 0
	}
	var out []Taken
	for _, t := range taken {
		if t.gpus == 0 {
			continue
		}
		if i := slices.IndexFunc(out, func(o Taken) bool { return o.Job == t.job }); i >= 0 {
			out[i].GPUs += t.gpus
		} else {
			out = append(out, Taken{Job: t.job, GPUs: t.gpus})
		}
	}
	return out, true
}

// donorNode picks the node of mask on which donor d gives up a worker for
// job b: one where b holds GPUs already (so that b grows in place), else the
// one with the most free GPUs already (so the freed GPUs join others into a
// worker's room), lowest index among equals; -1 if d holds none in mask.
func (c *Board) donorNode(d, b int32, mask bitset) int32 {
	best, bestOwn := int32(-1), false
	for _, s := range c.alloc[d] {
		if !mask.has(s.node) {
			continue
		}
		own := c.heldOn(b, s.node) > 0
		if best < 0 || (own && !bestOwn) || (own == bestOwn && c.free[s.node] > c.free[best]) {
			best, bestOwn = s.node, own
		}
	}
	return best
}
