package policy

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"
)

// EDFName is the name of the earliest-deadline-first builtin.
const EDFName = "edf"

// EDF is earliest deadline first with elastic jobs: Elastic FIFO's round in
// deadline order. It is the classic baseline for deadline scheduling; it
// looks at deadlines only, not at how far each job has to go.
//
// Semantics, one round: the jobs are ordered by Progress.Deadline, earliest
// first (ties and jobs without a deadline, which come after all others, in
// submission order). Admission in that order at each job's Min, shrinking
// running jobs with the latest deadlines first (jobs without a deadline
// before any with one; never below Min) when the next job does not fit,
// with head-of-line blocking when even that does not help; then idle GPUs
// grow running jobs toward Max in that order, own nodes first. Jobs are
// never stopped.
//
// Config: resize_cooldown = a Go duration (default "0s"), as ElasticFIFO.
type EDF struct {
	cooldown atomic.Int64 // nanoseconds
}

// NewEDF returns an EDF policy with the default configuration.
func NewEDF() *EDF { return &EDF{} }

// PluginInfo implements Base.
func (p *EDF) PluginInfo() Info {
	return Info{Name: EDFName, Version: Version,
		Description: "earliest deadline first at each job's minimum; idle GPUs grow the earliest deadlines; shrinks the latest to admit"}
}

// SetConfig implements Base.
func (p *EDF) SetConfig(config map[string]string) error {
	d, err := cooldownConfig(EDFName, config)
	if err != nil {
		return err
	}
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements Policy.
func (p *EDF) Plan(ctx context.Context, s *Snapshot) (*Plan, error) {
	c, err := NewCluster(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	order := deadlineOrder(c)
	e := elasticRound{c: c, shrunk: make([]bool, len(c.jobs)), order: order,
		preferDonors: reversed(order), cooldown: time.Duration(p.cooldown.Load())}
	return e.run(ctx, s.Now, EDFName, "earliest deadline first")
}

// deadlineOrder returns the jobs of c by deadline, earliest first; jobs
// without one last; ties in submission order.
func deadlineOrder(c *Cluster) []int32 {
	order := make([]int32, len(c.jobs))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		da, db := c.jobs[a].Progress.Deadline, c.jobs[b].Progress.Deadline
		switch {
		case da.IsZero() && db.IsZero():
			return 0
		case da.IsZero():
			return 1
		case db.IsZero():
			return -1
		}
		return da.Compare(db)
	})
	return order
}

func reversed(s []int32) []int32 {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
