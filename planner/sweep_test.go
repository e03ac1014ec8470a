package planner

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A run that goes on though its job's record says the job ended (a stop
// recorded, then the planner died before it stopped the run) is stopped
// by the sweep, and the job's events and metrics say so; the runs of
// running and queued jobs (a queued one's may go on: a move's old run
// ending with its checkpoint) and of jobs this planner has no record of
// (another deployment's) are left alone.
func TestSweepRuns(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	metrics := &countingMetrics{changes: map[policy.ChangeKind]int{}}
	p.Metrics = metrics
	orphan := submit(t, p, now, spec(t, "orphan", 4, 4))
	running := submit(t, p, now, spec(t, "running", 4, 4))
	queued := submit(t, p, now, spec(t, "queued", 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"orphan:4", "running:4"}, exec.take())

	// orphan's stop recorded, its run not stopped: as a planner killed
	// between the two leaves it.
	rec := state(t, st, orphan.ID)
	rec.State, rec.Allocation, rec.Finished = structs.JobStopped, nil, *now
	must.NoError(t, st.UpdateJob(ctx, rec))
	exec.runs = []string{orphan.ID, running.ID, queued.ID, "elsewhere-1a2b3c4d"}

	*now = now.Add(time.Minute)
	n, err := p.SweepRuns(ctx)
	must.NoError(t, err)
	must.Eq(t, 1, n)
	must.Eq(t, []string{"orphan:0"}, exec.take())
	metrics.mu.Lock()
	must.Eq(t, 1, metrics.swept)
	must.Zero(t, metrics.changes[policy.Stop], must.Sprint("a swept run is no preemption"))
	metrics.mu.Unlock()
	rec = state(t, st, orphan.ID)
	must.Eq(t, structs.JobStopped, rec.State)
	last := rec.Events[len(rec.Events)-1]
	must.Eq(t, EventSwept, last.Type)
	must.Eq(t, "its run went on after the job ended (stopped): stopped", last.Message)
	must.Eq(t, structs.JobRunning, state(t, st, running.ID).State)
	must.Eq(t, structs.JobQueued, state(t, st, queued.ID).State)

	// A stop that fails is said, and tried again by the next sweep.
	exec.failTimes = map[string]int{"orphan": 2}
	_, err = p.SweepRuns(ctx)
	must.ErrorContains(t, err, "failed to stop the run of job "+orphan.ID+", which has ended (stopped): nomad said no")
	must.SliceEmpty(t, exec.take())
	_, err = p.SweepRuns(ctx)
	must.NoError(t, err)
	must.Eq(t, []string{"orphan:0"}, exec.take())
}

// Run sweeps before its first round: a run left going by a stopped job
// is stopped before the round plans its GPUs as free.
func TestRun_SweepsBeforeTheFirstRound(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	orphan := submit(t, p, now, spec(t, "orphan", 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"orphan:4"}, exec.take())
	rec := state(t, st, orphan.ID)
	rec.State, rec.Allocation, rec.Finished = structs.JobStopped, nil, *now
	must.NoError(t, st.UpdateJob(ctx, rec))
	exec.runs = []string{orphan.ID}
	next := submit(t, p, now, spec(t, "next", 4, 4))

	done := make(chan struct{})
	go func() { defer close(done); p.Run(ctx, time.Hour) }()
	for deadline := time.Now().Add(10 * time.Second); state(t, st, next.ID).State != structs.JobRunning; {
		must.True(t, time.Now().Before(deadline), must.Sprint("next did not start"))
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	<-done
	must.Eq(t, []string{"orphan:0", "next:4"}, exec.take())
}
