package sim

import (
	"slices"
	"time"
)

// Result is what one run measured. Times are in seconds.
type Result struct {
	Policy string `json:"policy"`
	// Jobs ran; Refused were refused at submission by deadline admission
	// (Config.DeadlineAdmission) and never ran: the other figures are of
	// the jobs that ran, except Deadlines, where they count as missed.
	Jobs        int     `json:"jobs"`
	Refused     int     `json:"refused,omitempty"`
	GPUs        int     `json:"gpus"`
	JCT         Stats   `json:"jct"`
	Queueing    Stats   `json:"queueing"`
	Makespan    float64 `json:"makespan"`
	Utilization float64 `json:"utilization"` // GPU-seconds held / (GPUs x makespan)
	// GPUSecondsPerJob is the GPU-seconds a job held, on average (Sia's
	// "GPU hours a job", restarts included).
	GPUSecondsPerJob float64 `json:"gpu_seconds_per_job"`
	Restarts         Stats   `json:"restarts"`    // per job: re-allocations after the first start
	Preemptions      int     `json:"preemptions"` // total
	Bounds           Bounds  `json:"bounds"`
	Rounds           int     `json:"rounds"`
	// SkippedRounds are quiet rounds not planned (Config.SkipQuietRounds).
	SkippedRounds int     `json:"skipped_rounds"`
	PlanMs        Stats   `json:"plan_ms"` // time the policy took per round
	WallSeconds   float64 `json:"wall_seconds"`
	// Steps are the times the event loop moved the clock: what the run
	// cost, beside its rounds (a stretch of quiet rounds is one step).
	Steps int `json:"-"`
	// Deadlines is how the jobs with deadlines fared; nil if none has one.
	Deadlines *DeadlineResult `json:"deadlines,omitempty"`
	// Queues is how each queue fared, and QueueSummary their fairness
	// together (Config.Queues); nil without queues.
	Queues       []QueueResult `json:"queues,omitempty"`
	QueueSummary *QueueSummary `json:"queue_summary,omitempty"`

	// JCTs are the jobs' completion times, sorted (for the CDF).
	JCTs []float64 `json:"-"`
	// JobJCTs are the same per job, in submission order.
	JobJCTs []JobJCT `json:"-"`
	// Util is the GPUs held over time, a point per change.
	Util []UtilPoint `json:"-"`
	// Segments are the GPUs' holders over time (Config.Gantt).
	Segments []Segment `json:"-"`
	// Start is the first arrival.
	Start float64 `json:"-"`
}

// JobJCT is one job's completion time.
type JobJCT struct {
	ID  string
	JCT float64
}

// Stats summarises a sample.
type Stats struct {
	Mean   float64 `json:"mean"`
	Median float64 `json:"median"`
	P99    float64 `json:"p99"`
	Max    float64 `json:"max"`
}

// Bounds are lower bounds that no policy can beat (traces/README.md).
type Bounds struct {
	// MeanJCT is the mean over jobs of the run time at the best allowed
	// GPU count.
	MeanJCT float64 `json:"mean_jct"`
	// Makespan is max(least total GPU-seconds / GPUs, max over jobs of
	// arrival + best run time - first arrival).
	Makespan float64 `json:"makespan"`
	// OfferedLoad is least total GPU-seconds / (GPUs x arrival span); at 1
	// or more the queue grows without bound (0 if all jobs arrive at once).
	OfferedLoad float64 `json:"offered_load"`
}

// UtilPoint is the number of GPUs held from T on.
type UtilPoint struct {
	T    float64 `json:"t"`
	Busy int     `json:"busy"`
}

// Segment is a job holding one GPU from Start to End.
type Segment struct {
	GPU        int32
	Job        int32
	Start, End float64
}

func (s *simulator) result(wall time.Duration) *Result {
	gpus := s.gpus
	r := &Result{Policy: s.policy.PluginInfo().Name, GPUs: gpus, Rounds: s.rounds, SkippedRounds: s.skipped,
		Steps: s.steps, WallSeconds: wall.Seconds(), Util: s.util, Segments: s.segments}
	ran := make([]*simJob, 0, len(s.jobs))
	for _, j := range s.jobs {
		if !j.refused {
			ran = append(ran, j)
		}
	}
	r.Jobs, r.Refused = len(ran), len(s.jobs)-len(ran)
	r.Deadlines = s.deadlines()
	if len(ran) == 0 {
		return r
	}
	jct := make([]float64, len(ran))
	queue := make([]float64, len(ran))
	restarts := make([]float64, len(ran))
	first, last := ran[0].spec.Submit, 0.0
	var held float64
	r.JobJCTs = make([]JobJCT, len(ran))
	for i, j := range ran {
		jct[i] = j.end - j.spec.Submit
		r.JobJCTs[i] = JobJCT{ID: j.spec.ID, JCT: jct[i]}
		queue[i] = j.firstStart - j.spec.Submit
		restarts[i] = float64(j.restarts)
		r.Preemptions += j.preemptions
		last = max(last, j.end)
		held += j.attained
	}
	r.Start = first
	r.Makespan = last - first
	if r.Makespan > 0 {
		r.Utilization = held / (float64(gpus) * r.Makespan)
	}
	r.JCT = summarize(jct)
	r.JCTs = jct // sorted by summarize
	r.Queueing = summarize(queue)
	r.Restarts = summarize(restarts)
	r.PlanMs = summarize(s.planMs)
	r.GPUSecondsPerJob = held / float64(len(ran))
	r.Bounds = bounds(ran, gpus, s.cfg.LargestNode())
	r.Queues, r.QueueSummary = s.queueResults(r.Makespan)
	return r
}

func bounds(jobs []*simJob, gpus, gpusPerNode int) Bounds {
	var b Bounds
	var sumRun, gpuSec float64
	first, lastArrival, latest := jobs[0].spec.Submit, 0.0, 0.0
	for _, j := range jobs {
		t, g := j.spec.Model.Best(j.spec.GPUs, gpusPerNode)
		sumRun += t
		gpuSec += g
		lastArrival = max(lastArrival, j.spec.Submit)
		latest = max(latest, j.spec.Submit+t)
	}
	b.MeanJCT = sumRun / float64(len(jobs))
	b.Makespan = max(gpuSec/float64(gpus), latest-first)
	if span := lastArrival - first; span > 0 {
		b.OfferedLoad = gpuSec / (float64(gpus) * span)
	}
	return b
}

// summarize sorts xs and returns its statistics.
func summarize(xs []float64) Stats {
	if len(xs) == 0 {
		return Stats{}
	}
	slices.Sort(xs)
	var sum float64
	for _, x := range xs {
		sum += x
	}
	return Stats{Mean: sum / float64(len(xs)), Median: quantile(xs, 0.5), P99: quantile(xs, 0.99), Max: xs[len(xs)-1]}
}

// quantile is the q-quantile of sorted xs, linearly interpolated.
func quantile(xs []float64, q float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	pos := q * float64(len(xs)-1)
	i := int(pos)
	if i >= len(xs)-1 {
		return xs[len(xs)-1]
	}
	return xs[i] + (pos-float64(i))*(xs[i+1]-xs[i])
}
