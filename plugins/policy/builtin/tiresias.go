package builtin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// TiresiasName is the name of the Tiresias builtin.
const TiresiasName = "tiresias"

// DefaultTiresiasThresholds are the queue thresholds, in attained
// GPU-seconds, of the Tiresias builtin: two queues split at 16 GPU-hours,
// as in the Tiresias port of the Pollux (OSDI'21) simulator.
var DefaultTiresiasThresholds = []float64{16 * 3600}

// Tiresias is discretized two-dimensional least-attained-service (2D-LAS),
// after Tiresias (Gu et al., NSDI'19): a job's priority falls with the GPU
// time it has had (GPUs x seconds, so both dimensions count), and jobs that
// have had less run first, preempting those that have had more.
//
// Semantics, one round:
//   - Queues: a job with attained service A (AttainedGPUSeconds) is in queue
//     k, the number of thresholds <= A; queue 0 is the highest priority. A
//     job enters queue 0 and is demoted as it runs; it is never promoted
//     (the paper's starvation knob is off, as in the Pollux simulator's
//     port). Within a queue, jobs go in submission order (Submitted, then
//     ID). Priority is ignored.
//   - Size: a running job keeps its count; a queued job asks for Min
//     (Tiresias is for fixed-size jobs; give them Min == Max).
//   - Selection: in priority order, a job is selected if its count fits in
//     the GPUs that the jobs selected before it leave (counted over the
//     cluster; no head-of-line blocking: a job that does not fit is passed
//     over and smaller jobs behind it may run).
//   - Preemption: running jobs that are not selected are stopped. Selected
//     queued jobs start in priority order, packed best fit
//     (place.Board.Grow; placement = "packed", the default) or worst fit
//     as the Pollux port places them (place.Board.GrowMostFree: the node
//     with the most free GPUs first, then the next; placement =
//     "most-free", which the simulator's comparisons with the published
//     Tiresias set: on a big cluster it fragments the nodes, and on all of
//     Philly the replay ran out of hand, docs/sim/README.md); one that
//     does not fit whole workers is passed over, and queued jobs that were
//     not selected may then take the room in priority order. A preempted
//     job whose GPUs are still free at the end gets them back
//     (place.Board.Restore).
//   - Running jobs are never resized or moved.
//
// The Pollux port orders its second queue by when jobs were demoted, not
// by submission; this policy plans from the snapshot alone and keeps
// submission order (on the Pollux workloads the two differ in a handful
// of jobs at 1.5x and 2x load, docs/sim/README.md).
//
// Config: queue_thresholds = comma-separated finite, positive, increasing
// GPU-second thresholds ("57600" by default; "" for one queue, which is
// first come, first served with preemption-free backfilling); placement =
// "packed" (default) or "most-free".
type Tiresias struct {
	thresholds atomic.Pointer[[]float64]
	mostFree   atomic.Bool // placement = "most-free"; the zero value is packed, the default
}

// NewTiresias returns a Tiresias policy with the default configuration.
func NewTiresias() *Tiresias {
	p := &Tiresias{}
	th := slices.Clone(DefaultTiresiasThresholds)
	p.thresholds.Store(&th)
	return p
}

// PluginInfo implements policy.Base.
func (p *Tiresias) PluginInfo() policy.Info {
	return policy.Info{Name: TiresiasName, Version: Version, IgnoresPriority: true,
		Description: "discretized 2D least-attained-service (Tiresias): queues by attained GPU-seconds, preemptive"}
}

// SetConfig implements policy.Base.
func (p *Tiresias) SetConfig(config map[string]string) error {
	if err := checkKeys(config, "queue_thresholds", "placement"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", TiresiasName, err)
	}
	mostFree := false
	switch v := config["placement"]; v {
	case "", "packed":
	case "most-free":
		mostFree = true
	default:
		return fmt.Errorf("failed to configure %s: placement: %q is not most-free or packed", TiresiasName, v)
	}
	th := slices.Clone(DefaultTiresiasThresholds)
	if v, ok := config["queue_thresholds"]; ok {
		var err error
		if th, err = parseThresholds(v); err != nil {
			return fmt.Errorf("failed to configure %s: queue_thresholds: %q: %w", TiresiasName, v, err)
		}
	}
	p.thresholds.Store(&th)
	p.mostFree.Store(mostFree)
	return nil
}

// parseThresholds reads queue_thresholds: comma-separated finite,
// positive, increasing GPU-seconds ("" or only commas: none).
func parseThresholds(v string) ([]float64, error) {
	var th []float64
	for f := range strings.SplitSeq(v, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		x, err := strconv.ParseFloat(f, 64)
		switch {
		case err != nil || !finite(x):
			return nil, fmt.Errorf("%q is not a finite number of GPU-seconds", f)
		case x <= 0:
			return nil, fmt.Errorf("%q: a threshold is above 0 GPU-seconds", f)
		case len(th) > 0 && x <= th[len(th)-1]:
			return nil, fmt.Errorf("%q is not above the threshold before it: thresholds increase", f)
		}
		th = append(th, x)
	}
	return th, nil
}

// Plan implements policy.Policy.
func (p *Tiresias) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	th := *p.thresholds.Load()
	grow := (*place.Board).Grow
	if p.mostFree.Load() {
		grow = (*place.Board).GrowMostFree
	}
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	jobs := c.Jobs()
	n := len(jobs)
	queue := make([]int, n)
	order := make([]int32, n)
	capacity := c.FreeGPUs()
	for j, job := range jobs {
		queue[j] = tiresiasQueue(job.AttainedGPUSeconds, th)
		order[j] = int32(j)
		capacity += c.Held(int32(j))
	}
	// Stable: submission order within a queue. The queues are few, so a
	// counting sort: linear, no comparisons.
	order = byQueue(order, queue, len(th)+1)

	// Selection by count, in priority order.
	selected := make([]bool, n)
	rem := capacity
	for _, j := range order {
		need := c.Held(j)
		if need == 0 {
			need = jobs[j].GPUs.Min
		}
		if need <= rem {
			selected[j] = true
			rem -= need
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}

	// Preempt the running jobs that lost their place; remember where they
	// were, to give the GPUs back if nobody takes them.
	var preempted []int32
	held := make(map[int32]place.Holding)
	for _, j := range order {
		if !selected[j] && c.Held(j) > 0 {
			held[j] = c.Preempt(j)
			preempted = append(preempted, j)
		}
	}

	// A running job that keeps its place gets no reason: nothing changes
	// for it (formatting one for each of hundreds of running jobs every
	// round was a tenth of a whole-Philly replay).

	// Start the selected queued jobs, then let the others take what is left.
	for pass := range 2 {
		for _, j := range order {
			if selected[j] != (pass == 0) || c.Held(j) > 0 || held[j] != nil {
				continue
			}
			job := jobs[j]
			if grow(c, j, job.GPUs.Min) {
				c.NoteStarted(j, "", fmt.Sprintf("queue %d of %d (attained %.0f GPU-s)", queue[j], len(th)+1, job.AttainedGPUSeconds))
				continue
			}
			if !selected[j] {
				// One reason for the thousands a round behind the
				// selected jobs (formatting one each was most of a
				// round at 100,000 jobs); the job's attained service
				// is on its record.
				c.Wait(j, tiresiasBehind)
				continue
			}
			c.Notef(j, "queued: queue %d of %d (attained %.0f GPU-s), needs %s; its workers do not fit on the free GPUs of any node",
				queue[j], len(th)+1, job.AttainedGPUSeconds, policy.GPUs(job.GPUs.Min))
		}
	}

	for _, j := range preempted {
		job := jobs[j]
		if c.Restore(j, held[j]) {
			c.Notef(j, "kept its GPUs: queue %d of %d, and no higher-priority job could use them", queue[j], len(th)+1)
			continue
		}
		c.Notef(j, "preempted: queue %d of %d (attained %.0f GPU-s); jobs with less attained service take its GPUs",
			queue[j], len(th)+1, job.AttainedGPUSeconds)
	}
	return c.Plan(TiresiasName), nil
}

// tiresiasBehind is why a job that Tiresias does not select waits.
var tiresiasBehind = []string{"queued: jobs in higher-priority queues (less attained service), or before it in its queue, hold the GPUs"}

// SteadyUntil implements policy.Steady: the plan depends on the time
// only through each job's queue, which changes when a running job's
// attained service, growing by its GPUs each second, reaches the next
// threshold; the earliest such time (the far future when no running job
// has a threshold ahead of it).
func (p *Tiresias) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	th := *p.thresholds.Load()
	until := math.Inf(1) // seconds after s.Now
	for i := range s.Jobs {
		j := &s.Jobs[i]
		held := j.Allocation.Total()
		if held <= 0 {
			continue
		}
		if q := tiresiasQueue(j.AttainedGPUSeconds, th); q < len(th) {
			until = min(until, (th[q]-j.AttainedGPUSeconds)/float64(held))
		}
	}
	if until >= steadyHorizon.Seconds() {
		return s.Now.Add(steadyHorizon), true
	}
	return s.Now.Add(time.Duration(until * float64(time.Second))), true
}

// tiresiasQueue returns the queue of a job with attained GPU-seconds a.
func tiresiasQueue(a float64, th []float64) int {
	q := 0
	for q < len(th) && a >= th[q] {
		q++
	}
	return q
}

// byQueue returns order (job indexes) sorted by queue[j], a value in
// [0, queues), stably.
func byQueue(order []int32, queue []int, queues int) []int32 {
	start := make([]int, queues+1)
	for _, j := range order {
		start[queue[j]+1]++
	}
	for q := 1; q <= queues; q++ {
		start[q] += start[q-1]
	}
	out := make([]int32, len(order))
	for _, j := range order {
		out[start[queue[j]]] = j
		start[queue[j]]++
	}
	return out
}
