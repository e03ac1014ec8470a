package policy

import (
	"context"
	"fmt"
	"sync/atomic"
)

// FIFOName is the name of the FIFO builtin.
const FIFOName = "fifo"

// FIFO is first come, first served with fixed-size jobs.
//
// Semantics:
//   - Order: queued jobs are considered in submission order (Submitted, then
//     ID). Priority is ignored.
//   - Head-of-line blocking: a job starts only when every job submitted
//     before it holds GPUs. The first queued job that does not fit stops the
//     round; the jobs behind it wait even if they would fit.
//   - Size: with start_size = "largest" (the default) a job starts with the
//     largest multiple of PerWorker in [Min, Max] that fits now, so a
//     fixed-count job gets exactly its count; with start_size = "min" it
//     starts with Min. A job starts only if at least Min fits.
//   - Placement: packed onto as few nodes as possible, best fit (the node
//     whose free GPUs fit most tightly), spilling across nodes in whole
//     workers; see Cluster.Resize.
//   - Running jobs are never resized, moved or preempted (except to repair
//     an allocation that breaks the gang rule; see Cluster).
//
// Config: start_size = "largest" | "min".
type FIFO struct {
	size atomic.Pointer[StartSize]
}

// NewFIFO returns a FIFO policy with the default configuration.
func NewFIFO() *FIFO {
	p := &FIFO{}
	s := StartLargest
	p.size.Store(&s)
	return p
}

// PluginInfo implements Base.
func (p *FIFO) PluginInfo() Info {
	return Info{Name: FIFOName, Version: Version,
		Description: "first come, first served; fixed sizes; packed placement; no resizing"}
}

// SetConfig implements Base.
func (p *FIFO) SetConfig(config map[string]string) error {
	if err := checkKeys(config, "start_size"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", FIFOName, err)
	}
	s, err := parseStartSize(config)
	if err != nil {
		return fmt.Errorf("failed to configure %s: %w", FIFOName, err)
	}
	p.size.Store(&s)
	return nil
}

// Plan implements Policy.
func (p *FIFO) Plan(ctx context.Context, s *Snapshot) (*Plan, error) {
	c, err := NewCluster(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	if err := admitInOrder(ctx, c, *p.size.Load(), c.place); err != nil {
		return nil, err
	}
	return c.Plan(FIFOName), nil
}

// admitInOrder starts queued jobs in submission order with place, sized by
// size, until one does not fit; the rest wait behind it.
func admitInOrder(ctx context.Context, c *Cluster, size StartSize, place func(j int32, g int) bool) error {
	var waiting []string
	for j, job := range c.jobs {
		if j%1024 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("failed to plan: %w", err)
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
		r := job.GPUs
		room := c.room(jj)
		g := r.Min
		if size == StartLargest {
			g = min(r.Max, room/r.PerWorker*r.PerWorker)
		}
		if g >= r.Min && g <= room && place(jj, g) {
			c.note(jj, "started with %d GPUs on %d node(s)", g, len(c.alloc[j]))
			continue
		}
		c.note(jj, "queued: needs at least %d GPUs in %d-GPU workers, room for %d now; later jobs wait behind it",
			r.Min, r.PerWorker, room)
		waiting = []string{fmt.Sprintf("queued: waiting behind job %s, which does not fit yet (first come, first served)", job.ID)}
	}
	return nil
}

// wait gives job j the shared reason why; the slice is shared between jobs
// (len == cap, so an append copies it).
func (c *Cluster) wait(j int32, why []string) {
	id := c.jobs[j].ID
	if prev := c.reasons[id]; prev != nil {
		c.reasons[id] = append(prev, why...)
		return
	}
	c.reasons[id] = why
}
