package policy

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// ElasticFIFOName is the name of the elastic FIFO builtin.
const ElasticFIFOName = "elastic-fifo"

// ElasticFIFO is first come, first served with elastic jobs; it keeps the
// GPUs busy by growing running jobs into idle GPUs and shrinking them again
// to admit the next job.
//
// Semantics, one round:
//  1. Admission, in submission order (Submitted, then ID; priority ignored):
//     each queued job starts with exactly Min GPUs, packed best fit (see
//     Cluster.Resize). If Min does not fit, running jobs above their Min are
//     shrunk to make room: most recently resized first (LastResized, latest
//     first; then latest submitted), one worker at a time, only on nodes the
//     queued job may use, never below Min, until Min fits. Shrinks that the
//     placement turned out not to need are put back. If Min does not fit
//     even with every such job at its Min, nothing is shrunk, the job waits,
//     and so do all jobs behind it (head-of-line blocking).
//  2. Growth, in submission order: each running job (including those just
//     started) grows toward Max into idle GPUs, in whole workers, on its own
//     nodes first, then packed best fit. The oldest job is grown as far as
//     it can before the next. Jobs shrunk in this round are not grown, and
//     with resize_cooldown > 0 a job that was running in the snapshot and
//     was resized less than resize_cooldown before Now is not grown (a
//     Horovod re-rendezvous is not free). Shrinking to admit ignores the
//     cooldown.
//
// Jobs are never stopped (preempted) and never go below Min.
//
// Config: resize_cooldown = a Go duration (default "0s").
type ElasticFIFO struct {
	cooldown atomic.Int64 // nanoseconds
}

// NewElasticFIFO returns an elastic FIFO policy with the default
// configuration.
func NewElasticFIFO() *ElasticFIFO { return &ElasticFIFO{} }

// PluginInfo implements Base.
func (p *ElasticFIFO) PluginInfo() Info {
	return Info{Name: ElasticFIFOName, Version: Version,
		Description: "first come, first served at each job's minimum; idle GPUs grow running jobs; shrinks them to admit"}
}

// SetConfig implements Base.
func (p *ElasticFIFO) SetConfig(config map[string]string) error {
	d, err := cooldownConfig(ElasticFIFOName, config)
	if err != nil {
		return err
	}
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements Policy.
func (p *ElasticFIFO) Plan(ctx context.Context, s *Snapshot) (*Plan, error) {
	c, err := NewCluster(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	order := make([]int32, len(c.jobs))
	for j := range order {
		order[j] = int32(j)
	}
	e := elasticRound{c: c, shrunk: make([]bool, len(c.jobs)), order: order, cooldown: time.Duration(p.cooldown.Load())}
	return e.run(ctx, s.Now, ElasticFIFOName, "first come, first served")
}

// elasticRound is the state of one round of ElasticFIFO, or of EDF, which
// is the same round in another order.
type elasticRound struct {
	c        *Cluster
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
func (e *elasticRound) run(ctx context.Context, now time.Time, name, rule string) (*Plan, error) {
	c := e.c
	var waiting []string
	for i, jj := range e.order {
		if i%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("failed to plan: %w", err)
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
		if c.place(jj, job.GPUs.Min) || e.shrinkToAdmit(jj) {
			c.note(jj, "started with %d GPUs (its minimum) on %d node(s)", job.GPUs.Min, len(c.alloc[jj]))
			continue
		}
		c.note(jj, "queued: needs %d GPUs, which do not fit even with running jobs at their minimum; later jobs wait behind it", job.GPUs.Min)
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
		if g > 0 && c.place(jj, g) {
			c.note(jj, "grown from %d to %d GPUs into idle GPUs", t, t+g)
		}
	}
	return c.Plan(name), nil
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
	taken, ok := c.takeFor(b, job.GPUs.Min, e.donors, func(d int32) int { return c.jobs[d].GPUs.Min })
	for _, t := range taken {
		e.shrunk[t.job] = true
		c.note(t.job, "shrunk from %d to %d GPUs to admit job %s", c.total[t.job]+t.gpus, c.total[t.job], job.ID)
	}
	return ok
}

// takeFor makes room for job b to gain gain GPUs (a multiple of its
// PerWorker) by shrinking donors, in order, a worker at a time and never
// below floor(donor), on the nodes b may use; then it grows b by gain and
// puts back, last taken first, the shrinks the placement did not need. It
// returns what each donor gave up (job and GPUs, in the order they were
// first taken from). If b cannot gain gain GPUs even with every donor at
// its floor, it changes nothing and returns false.
func (c *Cluster) takeFor(b int32, gain int, donors []int32, floor func(int32) int) ([]change, bool) {
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
		if d == b {
			continue
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
	if !fits || !c.place(b, gain) {
		c.rollback(mark)
		return nil, false
	}
	// Put back what the placement did not use, last taken first.
	for i := len(taken) - 1; i >= 0; i-- {
		t := taken[i]
		capD := c.jobs[t.job].Constraints.MaxGPUsPerNode
		if nodeRoom(c.free[t.node], c.held(t.job, t.node), t.gpus, capD) < t.gpus {
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
	var out []change
	for _, t := range taken {
		if t.gpus == 0 {
			continue
		}
		if i := slices.IndexFunc(out, func(o change) bool { return o.job == t.job }); i >= 0 {
			out[i].gpus += t.gpus
		} else {
			out = append(out, change{job: t.job, gpus: t.gpus})
		}
	}
	return out, true
}

// donorNode picks the node of mask on which donor d gives up a worker for
// job b: one where b holds GPUs already (so that b grows in place), else the
// one with the most free GPUs already (so the freed GPUs join others into a
// worker's room), lowest index among equals; -1 if d holds none in mask.
func (c *Cluster) donorNode(d, b int32, mask bitset) int32 {
	best, bestOwn := int32(-1), false
	for _, s := range c.alloc[d] {
		if !mask.has(s.node) {
			continue
		}
		own := c.held(b, s.node) > 0
		if best < 0 || (own && !bestOwn) || (own == bestOwn && c.free[s.node] > c.free[best]) {
			best, bestOwn = s.node, own
		}
	}
	return best
}
