package builtin

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// GoodputJCTName is the name of the goodput-jct builtin.
const GoodputJCTName = "goodput-jct"

// Defaults of the goodput-jct builtin (see GoodputJCT).
const (
	DefaultGoodputJCTAttainedScale  = 3600.0
	DefaultGoodputJCTResizeCooldown = 5 * time.Minute
)

// GoodputJCT is the goodput builtin aimed at the average job completion
// time: the same greedy on marginal goodput per GPU (see Goodput), with two
// changes that use what the planner knows of each job's past.
//
//  1. Least attained service first, softly. A job's scores are multiplied by
//     attained_scale / (attained_scale + AttainedGPUSeconds). The average JCT
//     is least when the jobs with the least remaining work go first (SRPT);
//     the remaining work is not known, but training times are heavy-tailed,
//     so a job that has run long is likely to run long still (as Tiresias
//     assumes). A job's first GPU-hour (the default scale) counts about
//     fully, a job past ten GPU-hours about a tenth as much per GPU.
//  2. Fewer resizes. A running job resized less than resize_cooldown before
//     Now is not grown (not in the counts, not into GPUs left free). Every
//     resize stops a job for a restart (about 30 s in Pollux's measurements);
//     growing a job into GPUs that the next arrival takes back costs it two.
//     With the 5-minute default a job spends at most about a tenth of its
//     time restarting for growth. It can still be shrunk or stopped at any
//     time, so arrivals do not wait for it.
//
// As the weights change with attained service, the plan depends on the time
// (it is not time-invariant).
//
// Config: stickiness (as Goodput, default 0.1), attained_scale = GPU-seconds
// > 0 (default 3600), resize_cooldown = a non-negative duration (default 5m).
type GoodputJCT struct {
	stickiness atomic.Uint64 // math.Float64bits
	scale      atomic.Uint64 // math.Float64bits
	cooldown   atomic.Int64  // time.Duration
}

// NewGoodputJCT returns a goodput-jct policy with the default configuration.
func NewGoodputJCT() *GoodputJCT {
	p := &GoodputJCT{}
	p.stickiness.Store(math.Float64bits(DefaultGoodputStickiness))
	p.scale.Store(math.Float64bits(DefaultGoodputJCTAttainedScale))
	p.cooldown.Store(int64(DefaultGoodputJCTResizeCooldown))
	return p
}

// PluginInfo implements policy.Base.
func (p *GoodputJCT) PluginInfo() policy.Info {
	return policy.Info{Name: GoodputJCTName, Version: Version,
		Description: "goodput with least-attained-service weights and a resize cooldown, for the average JCT; preemptive, elastic"}
}

// SetConfig implements policy.Base.
func (p *GoodputJCT) SetConfig(config map[string]string) error {
	cd, ok := config["resize_cooldown"]
	d := DefaultGoodputJCTResizeCooldown
	if ok {
		var err error
		if d, err = cooldownConfig(GoodputJCTName, config, "stickiness", "attained_scale"); err != nil {
			return err
		}
		_ = cd
	} else if err := checkKeys(config, "resize_cooldown", "stickiness", "attained_scale"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", GoodputJCTName, err)
	}
	s, err := floatConfig(GoodputJCTName, config, "stickiness", DefaultGoodputStickiness,
		func(x float64) bool { return x >= 0 && !math.IsInf(x, 0) }, "a non-negative number")
	if err != nil {
		return err
	}
	a, err := floatConfig(GoodputJCTName, config, "attained_scale", DefaultGoodputJCTAttainedScale,
		func(x float64) bool { return x > 0 && !math.IsInf(x, 0) }, "a positive number of GPU-seconds")
	if err != nil {
		return err
	}
	p.stickiness.Store(math.Float64bits(s))
	p.scale.Store(math.Float64bits(a))
	p.cooldown.Store(int64(d))
	return nil
}

// Plan implements policy.Policy.
func (p *GoodputJCT) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	scale := math.Float64frombits(p.scale.Load())
	cooldown := time.Duration(p.cooldown.Load())
	g := goodputRound{c: c, jobs: c.Jobs(), bonus: 1 + math.Float64frombits(p.stickiness.Load())}
	setup := func() {
		g.weight = make([]float64, len(g.jobs))
		g.frozen = make([]bool, len(g.jobs))
		for j, job := range g.jobs {
			g.weight[j] = scale / (scale + max(job.AttainedGPUSeconds, 0))
			g.frozen[j] = g.cur[j] > 0 && cooldown > 0 && s.Now.Sub(job.LastResized) < cooldown
		}
	}
	if err := g.counts(ctx, setup); err != nil {
		return nil, err
	}
	g.place()
	return c.Plan(GoodputJCTName), nil
}
