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
	if err := checkKeys(config, "resize_cooldown"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", ElasticFIFOName, err)
	}
	var d time.Duration
	if v, ok := config["resize_cooldown"]; ok {
		var err error
		if d, err = time.ParseDuration(v); err != nil || d < 0 {
			return fmt.Errorf("failed to configure %s: resize_cooldown: %q is not a non-negative duration", ElasticFIFOName, v)
		}
	}
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements Policy.
func (p *ElasticFIFO) Plan(ctx context.Context, s *Snapshot) (*Plan, error) {
	cooldown := time.Duration(p.cooldown.Load())
	c, err := NewCluster(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	e := elasticRound{c: c, shrunk: make([]bool, len(c.jobs))}

	var waiting []string
	for j, job := range c.jobs {
		if j%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return nil, fmt.Errorf("failed to plan: %w", err)
			}
		}
		jj := int32(j)
		if c.total[j] > 0 {
			continue
		}
		if waiting != nil {
			c.wait(jj, waiting)
			continue
		}
		if c.place(jj, job.GPUs.Min) || e.shrinkToAdmit(jj) {
			c.note(jj, "started with %d GPUs (its minimum) on %d node(s)", job.GPUs.Min, len(c.alloc[j]))
			continue
		}
		c.note(jj, "queued: needs %d GPUs, which do not fit even with running jobs at their minimum; later jobs wait behind it", job.GPUs.Min)
		waiting = []string{fmt.Sprintf("queued: waiting behind job %s, which does not fit yet (first come, first served)", job.ID)}
	}

	for j, job := range c.jobs {
		if c.totalFree == 0 {
			break
		}
		jj := int32(j)
		r := job.GPUs
		t := c.total[j]
		if t == 0 || t >= r.Max || e.shrunk[j] || c.totalFree < r.PerWorker {
			continue
		}
		if cooldown > 0 && job.Allocation.Total() > 0 && s.Now.Sub(job.LastResized) < cooldown {
			continue
		}
		g := min(r.Max-t, c.room(jj)) / r.PerWorker * r.PerWorker
		if g > 0 && c.place(jj, g) {
			c.note(jj, "grown from %d to %d GPUs into idle GPUs", t, t+g)
		}
	}
	return c.Plan(ElasticFIFOName), nil
}

// elasticRound is the state of one ElasticFIFO round.
type elasticRound struct {
	c      *Cluster
	donors []int32 // running jobs, most recently resized first; nil until needed
	shrunk []bool  // by job: shrunk in this round
}

// shrinkToAdmit shrinks donors to make room for queued job b at its Min and
// places it; or changes nothing and returns false.
func (e *elasticRound) shrinkToAdmit(b int32) bool {
	c := e.c
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
	need, w, capN := job.GPUs.Min, job.GPUs.PerWorker, job.Constraints.MaxGPUsPerNode
	c.candidates(b)
	// The candidates can only grow as donors shrink, so this mask is safe
	// for deciding when enough room exists; place recomputes it exactly.
	mask := slices.Clone(c.cand)
	mark := len(c.undo)
	var taken []change
	fits := c.capacity(mask, w, capN) >= need
	for _, d := range e.donors {
		if fits {
			break
		}
		if d == b {
			continue
		}
		dr := c.jobs[d].GPUs
		for !fits && c.total[d]-dr.PerWorker >= dr.Min {
			n := e.donorNode(d, mask)
			if n < 0 {
				break
			}
			c.add(d, n, -dr.PerWorker)
			taken = append(taken, change{job: d, node: n, gpus: dr.PerWorker})
			fits = c.capacity(mask, w, capN) >= need
		}
	}
	if !fits || !c.place(b, need) {
		c.rollback(mark)
		return false
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
	before := make(map[int32]int)
	for _, t := range taken {
		before[t.job] += t.gpus
	}
	for _, t := range taken {
		if lost := before[t.job]; lost > 0 {
			before[t.job] = 0
			e.shrunk[t.job] = true
			c.note(t.job, "shrunk from %d to %d GPUs to admit job %s", c.total[t.job]+lost, c.total[t.job], job.ID)
		}
	}
	return true
}

// donorNode picks the node of mask on which donor d gives up a worker: the
// one with the most free GPUs already (so the freed GPUs join others into a
// worker's room), lowest index among equals; -1 if d holds none in mask.
func (e *elasticRound) donorNode(d int32, mask bitset) int32 {
	c := e.c
	best := int32(-1)
	for _, s := range c.alloc[d] {
		if mask.has(s.node) && (best < 0 || c.free[s.node] > c.free[best]) {
			best = s.node
		}
	}
	return best
}
