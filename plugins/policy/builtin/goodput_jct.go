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
	// DefaultGoodputJCTAttainedScale is twenty GPU-hours.
	DefaultGoodputJCTAttainedScale = 72000.0
	// DefaultGoodputJCTAttainedFloor is the least attained-service weight:
	// a job's scores never drop below 0.3 of a newcomer's.
	DefaultGoodputJCTAttainedFloor = 0.3
	// DefaultGoodputJCTRestartCost is what Pollux measured for a
	// checkpoint-restart, and what its simulator (and ours) charges.
	DefaultGoodputJCTRestartCost = 30 * time.Second
	// DefaultGoodputJCTAging is how long an elastic job waits at 0 GPUs
	// before its weight has doubled.
	DefaultGoodputJCTAging = time.Hour
)

// GoodputJCT is the goodput builtin aimed at the average job completion
// time. It is the same greedy on marginal goodput per GPU (see Goodput), with
// five changes that use what the planner knows of each job's past and of
// the nodes:
//
//  1. Least attained service first, softly, down to a floor. A job's scores
//     are multiplied by max(attained_floor, attained_scale / (attained_scale
//     + AttainedGPUSeconds)). The average JCT is least when the jobs with the
//     least remaining work go first (SRPT); the remaining work is not known,
//     but training times are heavy-tailed, so a job that has run long is
//     likely to run long still (Tiresias's premise). With the default scale
//     of twenty GPU-hours, a job's GPUs are worth half as much per unit of
//     speedup after twenty GPU-hours; the floor (0.3, reached after about 47
//     GPU-hours) keeps the longest jobs from being starved: without it an
//     imagenet job at a few hundred GPU-hours weighs a tenth of a newcomer
//     or less, is shrunk or preempted by every arrival, and finishes later
//     than under Pollux, which costs the average more than the short jobs
//     gain. The floor suits job sizes up to a few hundred GPU-hours (the
//     Pollux workloads). It applies to elastic jobs only (Min < Max): a
//     rigid job holds all it asks or nothing, so its weight only orders
//     who runs (Tiresias's least attained service, which the floor would
//     blur: on Philly's rigid jobs, which run to thousands of GPU-hours,
//     every long job would weigh the same at the floor and the shorter of
//     them wait behind the longest: 18,155 s average JCT against 15,135).
//  2. Restarts priced in. A resize stops a job for a restart (its own,
//     as measured: Job.RestartSeconds; restart_cost where not measured
//     yet); that is worth it only if the new allocation lasts long enough.
//     A running job's speedup at the count it holds is raised by the
//     fraction restart / max(age, restart), age being the time since its
//     allocation last changed (LastResized): an allocation that has lasted
//     t is expected to last about t more, so moving off it costs about
//     restart_cost / t of its speedup. A job just resized is hard to move
//     (it holds twice its speedup), one that has run an hour at its size
//     is moved for a gain of 1%. Since the greedy follows each job's upper
//     concave envelope, the raised count is a step like any other, and a
//     shrink or a grow happens only where it gains more than it costs.
//  3. Packed placements. The jobs a round starts or resizes (they restart
//     anyway) are placed again from scratch, largest first, if that puts
//     them on fewer nodes in all, and otherwise each alone where that puts
//     it on fewer nodes; the speedup tables are for packed placements, and
//     a job over more nodes than it needs syncs over the network.
//  4. Aging. An elastic job at 0 GPUs has its weight multiplied by 1 + w /
//     aging, w being how long it has waited at 0 GPUs (since it was stopped
//     or, if it never ran, submitted): with the default of an hour, twice
//     its weight after an hour. A queued job's first GPU scores at most its
//     weight, while a running job's held GPUs score the weight times (1 +
//     stickiness) and the restart price, so without aging a newcomer could
//     wait behind equally weighted running jobs until one ends, and a job
//     stopped after some hours of service behind every newcomer (at 2.0x
//     load on the Pollux workloads, yolov3 and imagenet jobs waited at 0
//     GPUs for more than four hours). Elastic jobs only, as the floor: among
//     rigid jobs least attained service is Tiresias's order (with aging on
//     Philly's rigid jobs the preemptions tripled for 0.7% of average JCT).
//  5. One node where one node will do. An elastic job that a round grows or
//     starts at a count one node can hold gets it on one node: where it is,
//     or placed afresh (it restarts anyway); where no node has the room, the
//     largest count that one node has room for, or (a grow) what it holds,
//     where it holds it (a start that fits on no node at its minimum is
//     placed as before). The speedup tables are for packed placements, and
//     a job on two nodes where one would do syncs over the network: in
//     Pollux's measured step times yolov3 on 2 GPUs of two nodes trains
//     slower than on one GPU. Before the rule yolov3 spent a quarter to a
//     third of its running time on more nodes than its count needed, and
//     lost 4-6% of its progress there (1.0x and 2.0x load, Pollux's
//     workloads). The jobs the round shrank or stopped for GPUs that then
//     nobody took (a grow the rule held back) get back what they held
//     (no restart for nothing); without that the rule alone gained nothing.
//     Beyond one node no rule: the sync is over the network either way.
//
// The weights change with attained service and waiting, and the restart
// prices with the time, so the plan depends on the time (it is not
// time-invariant). The round costs what the goodput round costs, plus a
// sort of the jobs that change and their placements.
//
// Config: stickiness (as Goodput, default 0.1), attained_scale = GPU-seconds
// > 0 (default 72000), attained_floor = a number in [0, 1] (default 0.3; 0
// turns the floor off), restart_cost = a duration from 0s to MaxResizeCooldown
// (default 30s: the price of a restart not measured yet; 0 turns the
// pricing off), aging = a duration from 0s to
// MaxAging (default 1h; 0 turns aging off).
type GoodputJCT struct {
	stickiness atomic.Uint64 // math.Float64bits
	scale      atomic.Uint64 // math.Float64bits
	floor      atomic.Uint64 // math.Float64bits
	restart    atomic.Int64  // time.Duration
	aging      atomic.Int64  // time.Duration
}

// NewGoodputJCT returns a goodput-jct policy with the default configuration.
func NewGoodputJCT() *GoodputJCT {
	p := &GoodputJCT{}
	p.stickiness.Store(math.Float64bits(DefaultGoodputStickiness))
	p.scale.Store(math.Float64bits(DefaultGoodputJCTAttainedScale))
	p.floor.Store(math.Float64bits(DefaultGoodputJCTAttainedFloor))
	p.restart.Store(int64(DefaultGoodputJCTRestartCost))
	p.aging.Store(int64(DefaultGoodputJCTAging))
	return p
}

// PluginInfo implements policy.Base.
func (p *GoodputJCT) PluginInfo() policy.Info {
	return policy.Info{Name: GoodputJCTName, Version: Version, IgnoresPriority: true,
		Description: "goodput for the average JCT: least-attained-service weights down to a floor, aging at 0 GPUs, restarts priced in, packed placements, one node where one will do; preemptive, elastic"}
}

// SetConfig implements policy.Base.
func (p *GoodputJCT) SetConfig(config map[string]string) error {
	if err := checkKeys(config, "stickiness", "attained_scale", "attained_floor", "restart_cost", "aging"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", GoodputJCTName, err)
	}
	s, err := floatConfig(GoodputJCTName, config, "stickiness", DefaultGoodputStickiness,
		func(x float64) bool { return x >= 0 }, "a finite non-negative number")
	if err != nil {
		return err
	}
	a, err := floatConfig(GoodputJCTName, config, "attained_scale", DefaultGoodputJCTAttainedScale,
		func(x float64) bool { return x > 0 }, "a finite positive number of GPU-seconds")
	if err != nil {
		return err
	}
	fl, err := floatConfig(GoodputJCTName, config, "attained_floor", DefaultGoodputJCTAttainedFloor,
		func(x float64) bool { return x >= 0 && x <= 1 }, "a number in [0, 1]")
	if err != nil {
		return err
	}
	rc, err := durationConfig(GoodputJCTName, config, "restart_cost", DefaultGoodputJCTRestartCost, MaxResizeCooldown)
	if err != nil {
		return err
	}
	ag, err := durationConfig(GoodputJCTName, config, "aging", DefaultGoodputJCTAging, MaxAging)
	if err != nil {
		return err
	}
	p.stickiness.Store(math.Float64bits(s))
	p.scale.Store(math.Float64bits(a))
	p.floor.Store(math.Float64bits(fl))
	p.restart.Store(int64(rc))
	p.aging.Store(int64(ag))
	return nil
}

// Plan implements policy.Policy.
func (p *GoodputJCT) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	g := p.round(c, s)
	if err := g.counts(ctx, p.setup(&g, s)); err != nil {
		return nil, err
	}
	g.place()
	return c.Plan(GoodputJCTName), nil
}

// round returns the goodput round of goodput-jct's options on board c of
// snapshot s.
func (p *GoodputJCT) round(c *place.Board, s *policy.Snapshot) goodputRound {
	return goodputRound{c: c, jobs: c.Jobs(), bonus: 1 + math.Float64frombits(p.stickiness.Load()), repack: true,
		oneNode: true, nodes: s.Nodes}
}

// setup returns the counts' setup of round g of snapshot s: the weights
// and restart prices (1., 2. and 4. of GoodputJCT).
func (p *GoodputJCT) setup(g *goodputRound, s *policy.Snapshot) func() {
	scale := math.Float64frombits(p.scale.Load())
	floor := math.Float64frombits(p.floor.Load())
	rc := time.Duration(p.restart.Load()).Seconds()
	aging := time.Duration(p.aging.Load()).Seconds()
	return func() {
		g.weight = make([]float64, len(g.jobs))
		g.bump, g.priced = make([]float64, len(g.jobs)), rc > 0
		for j, job := range g.jobs {
			a := job.AttainedGPUSeconds
			if !(a > 0) { // NaN too
				a = 0
			}
			g.weight[j] = scale / (scale + a)
			if job.GPUs.Min < job.GPUs.Max {
				// The floor keeps an elastic job's claim on GPUs beyond
				// its minimum; a rigid job's only question is whether it
				// runs, where least attained service is Tiresias's order.
				g.weight[j] = max(floor, g.weight[j])
				if g.cur[j] == 0 && aging > 0 {
					// Aging (4. above): a zero LastResized is
					// a job that never ran.
					since := job.LastResized
					if since.IsZero() {
						since = job.Submitted
					}
					g.weight[j] *= 1 + max(0, s.Now.Sub(since).Seconds())/aging
				}
			}
			if g.cur[j] > 0 && rc > 0 {
				// Its own restart where measured. A zero LastResized
				// is long ago: no price.
				rc := rc
				if job.RestartSeconds > 0 {
					rc = min(job.RestartSeconds, policy.MaxRestartSeconds)
				}
				g.bump[j] = rc / max(s.Now.Sub(job.LastResized).Seconds(), rc)
			}
		}
	}
}
