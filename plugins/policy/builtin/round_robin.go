package builtin

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// RoundRobinName is the name of the round-robin builtin.
const RoundRobinName = "round-robin"

// RoundRobin is FIFO's admission with placement rotated across the nodes.
//
// Semantics:
//   - Order, head-of-line blocking, sizes (start_size) and never resizing
//     running jobs: as FIFO.
//   - Placement: nodes are taken in ID order as a ring. A job's workers go
//     one per node in turn, starting at the first node with room at or after
//     the cursor and going round the ring (again and again if it needs more
//     workers than there are nodes with room); the next job's placement
//     starts at the node after where this one started. The result spreads
//     jobs and their workers over the cluster.
//   - The cursor at the start of a round is derived from the snapshot, not
//     kept between rounds (so a plan depends only on its snapshot): the node
//     after the lowest-ID node of the running job with the latest
//     LastResized (later submission wins ties); the first node if no job
//     runs.
//
// Config: start_size = "largest" | "min".
type RoundRobin struct {
	size atomic.Pointer[StartSize]
}

// NewRoundRobin returns a round-robin policy with the default configuration.
func NewRoundRobin() *RoundRobin {
	p := &RoundRobin{}
	s := StartLargest
	p.size.Store(&s)
	return p
}

// PluginInfo implements policy.Base.
func (p *RoundRobin) PluginInfo() policy.Info {
	return policy.Info{Name: RoundRobinName, Version: Version, IgnoresPriority: true,
		Description: "first come, first served; workers spread round the nodes; no resizing"}
}

// SetConfig implements policy.Base.
func (p *RoundRobin) SetConfig(config map[string]string) error {
	if err := checkKeys(config, "start_size"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", RoundRobinName, err)
	}
	s, err := parseStartSize(config)
	if err != nil {
		return fmt.Errorf("failed to configure %s: %w", RoundRobinName, err)
	}
	p.size.Store(&s)
	return nil
}

// Plan implements policy.Policy.
func (p *RoundRobin) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	cursor := int32(0)
	latest := int32(-1)
	jobs := c.Jobs()
	for j, job := range jobs {
		if c.Held(int32(j)) > 0 && (latest < 0 || !job.LastResized.Before(jobs[latest].LastResized)) {
			latest = int32(j)
		}
	}
	if latest >= 0 {
		cursor = c.FirstNode(latest) + 1
	}
	spread := func(j int32, g int) bool {
		first := c.Spread(j, g, cursor)
		if first < 0 {
			return false
		}
		cursor = first + 1
		return true
	}
	if err := c.AdmitInOrder(ctx, *p.size.Load() == StartLargest, spread); err != nil {
		return nil, err
	}
	return c.Plan(RoundRobinName), nil
}
