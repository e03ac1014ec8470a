package elasticflow

import (
	"fmt"
	"math"
	"slices"
)

// Slot is ElasticFlow's scheduling slot in seconds (run_fig8b.sh,
// --scheduling_slot=60).
const Slot = 60

// Model names the job model a run used, for the report.
const Model = "elasticflow (iterations at the measured throughput of model, batch and power-of-two GPU count; ElasticFlow ASPLOS'23 simulator)"

// Config is one replay.
type Config struct {
	Spec        Spec
	Throughputs *Throughputs
	Policy      string // see Policies
}

// Policies are the schedulers Run knows: ElasticFlow's and its baselines,
// then the planner's own qoe.
var Policies = []string{"edf", "dlas-gpu", "themis", "ef-accessctrl", QoEName}

// JobResult is how one job fared.
type JobResult struct {
	ID string
	// Finish is when its last iteration ran (seconds); -1 if never.
	Finish int64
	Met    bool
}

// Result is a replay's outcome.
type Result struct {
	Policy, Model string
	Jobs          []JobResult
	// Met is the number of jobs done by their deadline; Ratio is Met over
	// all jobs (ElasticFlow's deadline satisfaction ratio: a refused job
	// counts as missed).
	Met   int
	Ratio float64
	// Possible is the number of jobs that could meet their deadlines at
	// all (see Possible): no scheduler meets more.
	Possible int
}

// job is a job's state during a replay.
type job struct {
	*Job
	idx      int
	maxGPUs  int
	iterLeft float64
	gpus     int
	overhead float64 // seconds without progress at the start of the next interval
	done     bool
	finish   int64
	endEvent int64 // when the loop takes its GPUs back; 0 none
	// Tiresias
	executed int64 // seconds run, for the queues
	total    int64 // seconds run in all
	queue    int
	lastSeen int64
	// Themis
	remaining     int64   // seconds of its recorded duration left
	isoTime       float64 // cumulative isolated time (themisShares)
	prevIter      float64 // iterations left at the last share
	prevShare     float64 // its equal share then
	valued        bool    // it has had a share
	share         float64
	tfDen, tfWait float64 // finish-time fairness terms (themisShares)
	tfWork        float64
}

func (j *job) rate(tp *Throughputs, g int) float64 { return tp.Rate(j.Model, j.Batch, g) }

// progress runs j for the interval [from, to) on its GPUs: the first
// j.overhead seconds make no progress, then iterations at the table's
// rate. A job whose last iteration falls in the interval finishes at
// from + ceil(iterations left / rate), as ElasticFlow's simulator counts it
// (jobs.py, run_all_jobs, which leaves the overhead out of that time).
func (j *job) progress(tp *Throughputs, from, to int64) {
	if j.done || j.gpus == 0 {
		return
	}
	r := j.rate(tp, j.gpus)
	run := math.Max(0, float64(to-from)-j.overhead)
	j.overhead = 0
	if it := run * r; it >= j.iterLeft {
		j.finish = from + int64(math.Ceil(j.iterLeft/r))
		j.done, j.iterLeft = true, 0
		return
	}
	j.iterLeft -= run * r
}

// Run replays tr under cfg.
func Run(tr *Trace, cfg Config) (*Result, error) {
	if len(tr.Jobs) == 0 {
		return nil, fmt.Errorf("failed to replay %s: no jobs", tr.Name)
	}
	jobs := make([]*job, len(tr.Jobs))
	for i := range tr.Jobs {
		j := &tr.Jobs[i]
		if cfg.Throughputs.Rate(j.Model, j.Batch, 1) <= 0 {
			return nil, fmt.Errorf("failed to replay %s: job %s: no throughput for %s at batch %d", tr.Name, j.ID, j.Model, j.Batch)
		}
		jobs[i] = &job{Job: j, idx: i, iterLeft: float64(j.Iterations), finish: -1,
			maxGPUs: min(cfg.Throughputs.MaxGPUsBaseline(j.Model, j.Batch), cfg.Spec.GPUs())}
	}
	var err error
	switch cfg.Policy {
	case "edf":
		err = runEDF(jobs, cfg)
	case "dlas-gpu":
		err = runTiresias(jobs, cfg)
	case "themis":
		err = runThemis(jobs, cfg)
	case "ef-accessctrl":
		err = runAccessCtrl(jobs, cfg)
	case QoEName:
		err = runQoE(jobs, cfg)
	default:
		return nil, fmt.Errorf("failed to replay %s: unknown policy %q (known: %v)", tr.Name, cfg.Policy, Policies)
	}
	if err != nil {
		return nil, fmt.Errorf("failed to replay %s under %s: %w", tr.Name, cfg.Policy, err)
	}
	res := &Result{Policy: cfg.Policy, Model: Model}
	for _, j := range jobs {
		met := j.done && j.finish <= j.Deadline
		if met {
			res.Met++
		}
		res.Jobs = append(res.Jobs, JobResult{ID: j.ID, Finish: j.finish, Met: met})
	}
	res.Ratio = float64(res.Met) / float64(len(jobs))
	res.Possible = Possible(tr, cfg.Spec, cfg.Throughputs)
	return res, nil
}

// Possible counts the jobs of tr that could meet their deadlines at all:
// alone on the cluster from their submission, at their fastest power of
// two of GPUs, without overheads. Possible over the jobs bounds the
// deadline satisfaction ratio of every scheduler under this model.
func Possible(tr *Trace, spec Spec, tp *Throughputs) int {
	n := 0
	for _, j := range tr.Jobs {
		best := 0.0
		for g := 1; g <= spec.GPUs(); g *= 2 {
			best = max(best, tp.Rate(j.Model, j.Batch, g))
		}
		if best > 0 && float64(j.Submit)+math.Ceil(float64(j.Iterations)/best) <= float64(j.Deadline) {
			n++
		}
	}
	return n
}

// arrivalTimes is the arrivals' part of the pending events nextEvent
// steps to, from jobs[next:] (in submission order): ElasticFlow's job
// events hold every later arrival, and nextEvent reads only the earliest
// event and whether there is another, so the next two distinct
// submission times stand for them all.
func arrivalTimes(jobs []*job, next int) []int64 {
	var times []int64
	for k := next; k < len(jobs) && len(times) < 2; k++ {
		if len(times) == 0 || jobs[k].Submit != times[0] {
			times = append(times, jobs[k].Submit)
		}
	}
	return times
}

// nextEvent is ElasticFlow's step from one scheduling event to the next
// (scheduler.py, one_queue_edf_sim_jobs and ef_sim_jobs_access_control):
// the earliest pending event, but when it is at most a slot after now and
// another event is pending, it moves to now + Slot, with every event up
// to then. times are the pending events' times, all after now.
func nextEvent(now int64, times []int64) int64 {
	if len(times) == 0 {
		return -1
	}
	first := slices.Min(times)
	if first-now <= Slot && len(times) > 1 {
		return now + Slot
	}
	return first
}
