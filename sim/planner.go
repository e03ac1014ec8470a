package sim

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// The simulator drives the planner's own round (planner.Planner), as
// Nomad's scheduler Harness drives the real scheduler: the planner keeps
// its records in an in-memory store (store.Memory), reads the time from
// the simulated clock, the nodes from the simulated cluster (simCluster),
// and carries out its plans through the simulated actuator (simActuator),
// which changes the jobs' models' allocations and answers whether a job
// has ended. Jobs are submitted through Planner.Submit at their arrival,
// and report their progress through Planner.ReportProgress, as the SDK
// would; what the models know that the planner would otherwise estimate
// from the reports (the speedup table, the remaining work) is put into
// the job's outlook through planner.WithOutlooks. sim/README.md says what
// is and is not the planner's own code.

// newPlanner returns the planner of run s, planning with p.
func (s *simulator) newPlanner(p policy.Policy) *planner.Planner {
	pl := (&planner.Planner{
		Store:    store.NewMemory(),
		Cluster:  simCluster{s},
		Actuator: simActuator{s},
		Policies: planner.NewFixedPolicyHost(p, hclog.NewNullLogger()),
		Logger:   hclog.NewNullLogger(),
		Metrics:  simMetrics{s},
	}).With(
		planner.WithClock(func() time.Time { return s.at(s.now).Add(s.tie) }),
		// The trace's IDs, which are unique (Run checks).
		planner.WithJobIDs(func(spec *jobspec.Spec) string { return spec.Name }),
		// It sets every target's outlook (a job with a target is one with
		// a deadline, and amendOutlook gives each its model's).
		planner.WithOutlooks(s.amendOutlook, true),
	)
	switch {
	case s.queuesOn():
		pl.SetQueues(s.cfg.Queues.Tree)
	case s.cfg.DeadlineAdmission != "":
		pl.SetQueues(quota.DefaultAdmitting(s.cfg.DeadlineAdmission))
	}
	return pl
}

// queuesOn reports whether the planner enforces queues in run s.
func (s *simulator) queuesOn() bool {
	q := s.cfg.Queues
	return q != nil && !q.Off && q.Tree != nil
}

// specOf is the jobspec a job of the trace is submitted with: its GPU
// request, and for a job with a deadline a target on the progress metric
// (1 when done) due then.
func (s *simulator) specOf(j *simJob) *jobspec.Spec {
	sp := j.spec
	spec := &jobspec.Spec{Name: sp.ID, Command: "simulated", Launcher: jobspec.LauncherHorovod,
		GPUs: jobspec.GPUs{Min: sp.GPUs.Min, Max: sp.GPUs.Max, PerWorker: sp.GPUs.PerWorker}}
	if s.queuesOn() {
		spec.Queue = queueName(sp.Queue)
	}
	if sp.HasDeadline {
		spec.Target = &jobspec.Target{Metric: ProgressMetric, Goal: 1, Deadline: s.at(sp.Deadline)}
	}
	return spec
}

// submit queues job j with the planner at its arrival. A job its deadline
// admission refuses (Config.DeadlineAdmission) is done there, refused: it
// never runs; any other refusal stops the run.
func (s *simulator) submit(ctx context.Context, j *simJob) error {
	_, _, err := s.planner.Submit(ctx, s.specOf(j), "", nil)
	switch {
	case errors.Is(err, structs.ErrDeadlineRefused):
		j.refused = true
		s.depart(j)
		j.finished, j.end = true, s.now
		s.finished++
	case err != nil:
		return fmt.Errorf("failed to simulate: submit job %s: %w", j.spec.ID, err)
	}
	return nil
}

// report sends job j's progress to the planner when what the policies read
// of it would otherwise be wrong: at its first round, and when its
// throughput, its speedup table or its remaining work (beyond what the
// planner works out from the last report, at the GPUs it holds) has
// changed. A job whose model knows neither a speedup nor a deadline (a
// rigid trace job) reports nothing. done is current.
func (s *simulator) report(ctx context.Context, j *simJob) error {
	if j.done >= j.speedTo {
		// Tables change at epoch boundaries, which are events; a table
		// holds (nil too: a rigid job's, for good) up to speedTo, which
		// is 0 before the first.
		j.speedup, j.speedTo = s.speedupOf(j)
	}
	s.byModelOf(j)
	if j.speedup == nil && !j.deadline {
		return nil
	}
	rate := 0.0
	if j.gpus > 0 {
		rate = j.rate
	}
	r := &j.reported
	if r.ok && r.rate == rate && sameTable(r.speedup, j.speedup) && sameByModel(r.byModel, j.byModel) && !s.drifted(j) {
		return nil
	}
	value := 1.0
	if j.work > 0 {
		value = min(j.done/j.work, 1)
	}
	rep := structs.ProgressReport{Step: int64(j.done), SamplesPerSec: &rate,
		WorldSize: j.gpus, Metric: &structs.Metric{Name: ProgressMetric, Value: value}}
	*r = lastReport{ok: true, at: s.now, rate: rate, speedup: j.speedup, byModel: j.byModel, remaining: s.remainingWork(j), done: j.done}
	if err := s.planner.ReportProgress(ctx, j.spec.ID, []structs.ProgressReport{rep}); err != nil {
		return fmt.Errorf("failed to simulate: progress of job %s: %w", j.spec.ID, err)
	}
	return nil
}

// lastReport is what a job last reported, as the planner extrapolates it.
type lastReport struct {
	ok        bool
	at        float64
	rate      float64
	speedup   []float64
	byModel   map[string][]float64
	remaining float64
	done      float64 // the job's progress then
}

// sameTable reports whether a and b are the same table (the models share
// their tables, so identity is equality).
func sameTable(a, b []float64) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// remainingWork is job j's work left in seconds on one GPU (0: its model
// does not know).
func (s *simulator) remainingWork(j *simJob) float64 {
	if j.remaining == nil || !j.deadline {
		return 0
	}
	return j.remaining.RemainingWork(j.done)
}

// drifted reports whether the planner's estimate of job j's remaining work
// (the last report's, less the time since at the speedup of the GPUs it
// holds, as the planner's snapshot works it out) is off the model's.
func (s *simulator) drifted(j *simJob) bool {
	r := &j.reported
	if r.remaining <= 0 {
		return false
	}
	if j.gpus == 0 && j.done == r.done {
		// Queued since the report, having done nothing: the estimate is
		// the report's, less nothing, and the model's is the same
		// function of the same progress (found so without reading the
		// model, a cache miss for each of thousands of queued jobs).
		return false
	}
	est := max(r.remaining-(s.now-r.at)*policy.SpeedupAt(r.speedup, j.gpus), 1)
	truth := max(s.remainingWork(j), 1)
	return math.Abs(est-truth) > 1e-9*max(truth, 1)
}

// amendOutlook puts what job j's model knows into the outlook the planner
// has just renewed from its progress report: the speedup table, and for a
// job with a deadline the work left (or unknown, where the model does not
// know it). At submission (no outlook yet) it gives the planner's deadline
// admission the same: the model's table and whole work.
func (s *simulator) amendOutlook(rec *structs.Job) {
	j := s.byID[rec.ID]
	if j == nil {
		return
	}
	speedup, remaining := j.reported.speedup, j.reported.remaining
	if rec.Outlook == nil {
		if !j.deadline || j.reported.ok {
			return
		}
		if j.speedup == nil {
			j.speedup, j.speedTo = s.speedupOf(j)
		}
		speedup, remaining = j.speedup, s.remainingWork(j)
		rec.Outlook = &structs.Outlook{Updated: s.at(s.now)}
	}
	rec.Outlook.Speedup = speedup
	rec.Outlook.ByModel = j.reported.byModel
	// What a change costs the job, once one has cost it something (the
	// planner would measure it from the reports after it).
	switch {
	case s.cfg.Launcher == LauncherInPlace && j.restarts > 0:
		rec.Outlook.RestartSeconds = s.cfg.InPlaceDelay.Seconds() // most changes: grows and shrinks
	case j.started && (j.spec.ChargeStart || j.restarts > 0):
		rec.Outlook.RestartSeconds = s.restartDelay(j)
	}
	if !j.deadline {
		return
	}
	t := &structs.TargetOutlook{Status: structs.OutlookUnknown, Reason: "simulated: the model does not know"}
	if remaining > 0 {
		t = &structs.TargetOutlook{Status: structs.OutlookEstimated, RemainingWork: remaining, Reason: "simulated: the job's model"}
	}
	rec.Outlook.Target = t
}

// simCluster is the simulated cluster as the planner reads it.
type simCluster struct{ s *simulator }

// Nodes implements planner.Cluster.
func (c simCluster) Nodes(context.Context) ([]policy.Node, error) { return c.s.nodes, nil }

// simActuator carries the planner's decisions out on the jobs' models.
type simActuator struct{ s *simulator }

// Apply implements planner.Actuator: job's model gets target, at the cost
// of its kind of change.
func (e simActuator) Apply(_ context.Context, job *structs.Job, target policy.Allocation) error {
	j := e.s.byID[job.ID]
	if j == nil {
		return fmt.Errorf("no simulated job %s", job.ID)
	}
	e.s.change(j, changeKind(j.alloc, target), target)
	e.s.dirty = true
	return nil
}

// changeKind is the kind of change from from to to, as policy.Plan.Diff
// names it.
func changeKind(from, to policy.Allocation) policy.ChangeKind {
	ft, tt := from.Total(), to.Total()
	switch {
	case ft == 0:
		return policy.Start
	case tt == 0:
		return policy.Stop
	case tt > ft:
		return policy.Grow
	case tt < ft:
		return policy.Shrink
	}
	return policy.Move
}

// Outcome implements planner.Actuator: a job has ended once its model's
// work is done; the run of a job the planner stopped to move it to
// another GPU model (structs.Job.Moving) ends at once, as it holds
// nothing here (the move's cost is the restart delay the simulator
// charges when it starts again).
func (e simActuator) Outcome(_ context.Context, job *structs.Job) (planner.Outcome, error) {
	if e.s.ended[job.ID] {
		return planner.Outcome{Done: true, Message: "simulated: work done"}, nil
	}
	if m := job.Moving; m != nil && !m.Stopped {
		if j := e.s.byID[job.ID]; j != nil && j.alloc.Total() == 0 {
			return planner.Outcome{Done: true, Message: "simulated: the run stopped to move"}, nil
		}
	}
	return planner.Outcome{}, nil
}

// simMetrics takes the planner's timings: the policy's time per round.
type simMetrics struct{ s *simulator }

func (m simMetrics) Round(_, plan time.Duration, _ bool) {
	m.s.planMs = append(m.s.planMs, float64(plan)/float64(time.Millisecond))
}
func (simMetrics) Change(policy.ChangeKind, time.Duration, bool) {}
func (simMetrics) Delivery(string, bool)                         {}
func (simMetrics) ProgressReports(int)                           {}
func (simMetrics) Requeue(string)                                {}
func (simMetrics) SweptRun()                                     {}
