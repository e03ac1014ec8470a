package builtin

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
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
//     workers; see place.Board.Resize.
//   - Running jobs are never resized, moved or preempted (except to repair
//     an allocation that breaks the gang rule; see place.Board).
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

// PluginInfo implements policy.Base.
func (p *FIFO) PluginInfo() policy.Info {
	return policy.Info{Name: FIFOName, Version: Version, IgnoresPriority: true,
		Description: "first come, first served; fixed sizes; packed placement; no resizing"}
}

// SetConfig implements policy.Base.
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

// Plan implements policy.Policy.
func (p *FIFO) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	if err := c.AdmitInOrder(ctx, *p.size.Load() == StartLargest, c.Grow); err != nil {
		return nil, err
	}
	return c.Plan(FIFOName), nil
}
