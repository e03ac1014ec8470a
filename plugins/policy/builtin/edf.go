package builtin

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
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

// PluginInfo implements policy.Base.
func (p *EDF) PluginInfo() policy.Info {
	return policy.Info{Name: EDFName, Version: Version, IgnoresPriority: true,
		Description: "earliest deadline first at each job's minimum; idle GPUs grow the earliest deadlines; shrinks the latest to admit"}
}

// SetConfig implements policy.Base.
func (p *EDF) SetConfig(config map[string]string) error {
	d, err := cooldownConfig(EDFName, config)
	if err != nil {
		return err
	}
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements policy.Policy.
func (p *EDF) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	order := c.DeadlineOrder()
	e := place.Elastic{Order: order, Donors: reversed(order), Cooldown: time.Duration(p.cooldown.Load()),
		Rule: "earliest deadline first"}
	if err := c.RunElastic(ctx, s.Now, e); err != nil {
		return nil, err
	}
	return c.Plan(EDFName), nil
}

// reversed returns a reversed copy of s.
func reversed(s []int32) []int32 {
	out := slices.Clone(s)
	slices.Reverse(out)
	return out
}
