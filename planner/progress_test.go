package planner

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

func f64(v float64) *float64 { return &v }

func targetSpec(t *testing.T, name, metric string, goal float64) *jobspec.Spec {
	t.Helper()
	src := fmt.Sprintf("training %q {\n command = \"python3\"\n gpus {\n min = 1\n max = 4\n }\n target {\n metric = %q\n goal = %g\n deadline = \"2h\"\n }\n}\n", name, metric, goal)
	s, diags := jobspec.Parse([]byte(src), name+".hcl", time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC))
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return s
}

// Reports land in the job's record and in the next round's snapshot: the
// step, the throughput and the target metric's value reach the policy.
func TestReportProgress_FeedsSnapshot(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "elastic-fifo", node("n1", 8))
	j := submit(t, p, now, targetSpec(t, "a", "accuracy", 0.9))
	must.NoError(t, p.Round(ctx))

	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{
		{Step: 100, SamplesPerSec: f64(800), Loss: f64(1.5), Metric: &structs.Metric{Name: "accuracy", Value: 0.5}, WorldSize: 4},
		{Step: 120, Loss: f64(1.2), Metric: &structs.Metric{Name: "top5", Value: 0.8}},
	}))
	rec := state(t, st, j.ID)
	must.Eq(t, int64(120), rec.Progress.Step)
	must.Eq(t, 800.0, *rec.Progress.SamplesPerSec)
	must.Eq(t, 1.2, *rec.Progress.Loss)
	must.Eq(t, map[string]float64{"accuracy": 0.5, "top5": 0.8}, rec.Progress.Metrics)
	must.Eq(t, *now, rec.Progress.Updated)
	must.Len(t, 2, rec.Progress.History)
	for _, e := range rec.Events {
		must.NotEq(t, structs.EventWarning, e.Type, must.Sprint("the target metric was reported: no warning"))
	}

	live, err := st.ListJobs(ctx)
	must.NoError(t, err)
	snap := snapshot(*now, []policy.Node{node("n1", 8)}, live)
	pr := snap.Jobs[0].Progress
	must.Eq(t, "accuracy", pr.Metric)
	must.Eq(t, 0.5, pr.Value, must.Sprint("the target's metric, not the last one reported"))
	must.Eq(t, 0.9, pr.Target)
	must.Eq(t, int64(120), pr.Step)
	must.Eq(t, 800.0, pr.Throughput)
	must.Eq(t, j.Submitted.Add(2*time.Hour), pr.Deadline)
}

// Without a target the policy sees the metric reported last; with a target
// never reported, it sees no value, and the job gets one warning event.
func TestReportProgress_MetricMismatch(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8))
	free := submit(t, p, now, spec(t, "free", 1, 1))
	must.NoError(t, p.ReportProgress(ctx, free.ID, []structs.ProgressReport{{Step: 1, Metric: &structs.Metric{Name: "bleu", Value: 21}}}))

	tj := submit(t, p, now, targetSpec(t, "t", "accuracy", 0.9))
	for range 3 {
		must.NoError(t, p.ReportProgress(ctx, tj.ID, []structs.ProgressReport{{Step: 1, Metric: &structs.Metric{Name: "acc", Value: 0.7}}}))
	}
	rec := state(t, st, tj.ID)
	must.Eq(t, 0.7, rec.Progress.Metrics["acc"], must.Sprint("kept"))
	var warnings []string
	for _, e := range rec.Events {
		if e.Type == structs.EventWarning {
			warnings = append(warnings, e.Message)
		}
	}
	must.Eq(t, []string{`target metric "accuracy" was never reported; got "acc"`}, warnings)

	live, err := st.ListJobs(ctx)
	must.NoError(t, err)
	snap := snapshot(*now, []policy.Node{node("n1", 8)}, live)
	must.Eq(t, "bleu", snap.Jobs[0].Progress.Metric)
	must.Eq(t, 21.0, snap.Jobs[0].Progress.Value)
	must.Eq(t, "accuracy", snap.Jobs[1].Progress.Metric)
	must.Eq(t, 0.0, snap.Jobs[1].Progress.Value)
}

// An unknown job is the store's ErrNotFound; too many metric names an
// *structs.InputError that records nothing.
func TestReportProgress_Refusals(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8))
	err := p.ReportProgress(ctx, "nope", []structs.ProgressReport{{Step: 1}})
	must.True(t, errors.Is(err, store.ErrNotFound), must.Sprint(err))

	j := submit(t, p, now, spec(t, "a", 1, 1))
	var many []structs.ProgressReport
	for i := range structs.MaxProgressMetrics + 1 {
		many = append(many, structs.ProgressReport{Step: int64(i), Metric: &structs.Metric{Name: fmt.Sprint("m", i), Value: 1}})
	}
	err = p.ReportProgress(ctx, j.ID, many)
	var ie *structs.InputError
	must.True(t, errors.As(err, &ie), must.Sprint(err))
	must.Nil(t, state(t, st, j.ID).Progress)
	must.Eq(t, uint64(1), state(t, st, j.ID).Version)
}

// A report that loses a race with another write is retried on the fresh
// record, a few times; then it fails with the store's ErrConflict.
func TestReportProgress_RetriesConflicts(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8))
	j := submit(t, p, now, spec(t, "a", 1, 1))
	st.conflicts = updateAttempts - 1
	must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{{Step: 7}}))
	must.Eq(t, int64(7), state(t, st, j.ID).Progress.Step)

	st.conflicts = updateAttempts
	err := p.ReportProgress(ctx, j.ID, []structs.ProgressReport{{Step: 8}})
	must.True(t, errors.Is(err, store.ErrConflict), must.Sprint(err))
	must.Eq(t, int64(7), state(t, st, j.ID).Progress.Step)
}

// A report that arrives while a round applies a change (between the
// round's read and its write) costs the round nothing: the change is
// recorded on the fresh record, which keeps the report.
func TestRound_RecordSurvivesProgressRace(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	j := submit(t, p, now, spec(t, "a", 2, 2))
	exec.onApply = func(applied *structs.Job) {
		must.NoError(t, p.ReportProgress(ctx, applied.ID, []structs.ProgressReport{{Step: 3}}))
	}
	must.NoError(t, p.Round(ctx))
	rec := state(t, st, j.ID)
	must.Eq(t, structs.JobRunning, rec.State)
	must.Eq(t, 2, rec.GPUs())
	must.Eq(t, int64(3), rec.Progress.Step)

	// Stop, too: a report between its read and its write (the stop is
	// recorded before the run is stopped).
	*now = now.Add(time.Minute)
	exec.onApply = nil
	reported := false
	st.refuse = func(*structs.Job) error {
		if !reported { // the report's own write comes here too
			reported = true
			must.NoError(t, p.ReportProgress(ctx, j.ID, []structs.ProgressReport{{Step: 4}}))
		}
		return nil
	}
	stopped, err := p.Stop(ctx, j.ID)
	must.NoError(t, err)
	st.refuse = nil
	must.Eq(t, structs.JobStopped, stopped.State)
	must.Eq(t, int64(2), stopped.Progress.Reports)
	must.Eq(t, int64(4), stopped.Progress.Step)
	must.Eq(t, 120.0, stopped.AttainedGPUSeconds)
	must.Eq(t, stopped.Version, state(t, st, j.ID).Version)

	// And the end of a job.
	exec.onApply = nil
	k := submit(t, p, now, spec(t, "k", 2, 2))
	must.NoError(t, p.Round(ctx))
	exec.done["k"] = 0
	st.conflicts = 1
	must.NoError(t, p.Round(ctx))
	must.Eq(t, structs.JobComplete, state(t, st, k.ID).State)
}
