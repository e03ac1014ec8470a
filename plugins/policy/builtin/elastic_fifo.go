package builtin

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
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
//     place.Board.Resize). If Min does not fit, running jobs above their
//     Min are shrunk to make room: most recently resized first
//     (LastResized, latest first; then latest submitted), one worker at a
//     time, only on nodes the queued job may use, never below Min, until
//     Min fits. Shrinks that the placement turned out not to need are put
//     back. If Min does not fit even with every such job at its Min,
//     nothing is shrunk, the job waits, and so do all jobs behind it
//     (head-of-line blocking).
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
// Config: resize_cooldown = a Go duration from 0s to MaxResizeCooldown
// (default "0s").
type ElasticFIFO struct {
	cooldown atomic.Int64 // nanoseconds
}

// NewElasticFIFO returns an elastic FIFO policy with the default
// configuration.
func NewElasticFIFO() *ElasticFIFO { return &ElasticFIFO{} }

// PluginInfo implements policy.Base.
func (p *ElasticFIFO) PluginInfo() policy.Info {
	return policy.Info{Name: ElasticFIFOName, Version: Version, IgnoresPriority: true,
		Description: "first come, first served at each job's minimum; idle GPUs grow running jobs; shrinks them to admit"}
}

// SetConfig implements policy.Base.
func (p *ElasticFIFO) SetConfig(config map[string]string) error {
	d, err := cooldownConfig(ElasticFIFOName, config)
	if err != nil {
		return err
	}
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements policy.Policy.
func (p *ElasticFIFO) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	order := make([]int32, len(c.Jobs()))
	for j := range order {
		order[j] = int32(j)
	}
	e := place.Elastic{Order: order, Cooldown: time.Duration(p.cooldown.Load()), Rule: "first come, first served"}
	if err := c.RunElastic(ctx, s.Now, e); err != nil {
		return nil, err
	}
	return c.Plan(ElasticFIFOName), nil
}
