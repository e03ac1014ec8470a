package planner

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Issue 27: a run the cluster ended (Outcome.Infrastructure) is requeued
// and resumes from its last checkpoint, up to the planner's retry bound,
// past which the job fails saying so; a run the script ended (any other
// exit) ends the job as failed at once.
func TestRound_InfrastructureRequeuesScriptFails(t *testing.T) {
	const infra = "launcher exited 75: worker host lost"
	cases := []struct {
		name    string
		code    int
		infra   string
		retries int // the planner's bound
		tries   int // ends of the run before the last one checked
		state   structs.JobState
		event   string
	}{
		{"script failure ends the job", 1, "", 3, 0, structs.JobFailed, "launcher exited"},
		{"infrastructure requeues", 75, infra, 3, 0, structs.JobRunning,
			"requeued (infrastructure, try 2 of 4): " + infra},
		{"third retry requeues", 75, infra, 3, 2, structs.JobRunning,
			"requeued (infrastructure, try 4 of 4): " + infra},
		{"retries spent fail the job", 75, infra, 3, 3, structs.JobFailed,
			"failed (infrastructure): " + infra + "; the planner's 3 retries of it are spent"},
		{"no retries", 75, infra, 0, 0, structs.JobFailed, "the planner's 0 retries of it are spent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
			p.Retries = tc.retries
			p.CheckpointDirs = []string{"/ckpt"}
			metrics := &countingMetrics{changes: map[policy.ChangeKind]int{}}
			p.Metrics = metrics
			exec.infra = map[string]string{"a": tc.infra}
			a := submit(t, p, now, spec(t, "a", 2, 2))
			must.NoError(t, p.Round(ctx))
			must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 40, Checkpoint: "/ckpt/a/40.pt"}}))
			end := func() {
				exec.done["a"] = tc.code
				*now = now.Add(time.Minute)
				must.NoError(t, p.Round(ctx)) // ended; requeued and started again, or ended
				delete(exec.done, "a")
			}
			for range tc.tries {
				end()
				must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
			}
			var told *structs.Resume
			exec.onApply = func(j *structs.Job) { told = j.Resume }
			exec.take()
			end()

			j := state(t, st, a.ID)
			must.Eq(t, tc.state, j.State)
			last := j.Events[len(j.Events)-1]
			if tc.state == structs.JobRunning {
				// Requeued, then started again in the same round, told to
				// resume from the checkpoint.
				must.Eq(t, []string{"a:2"}, exec.take())
				want := &structs.Resume{Checkpoint: "/ckpt/a/40.pt", Step: 40}
				must.Eq(t, want, told)
				must.Eq(t, want, j.Resume)
				must.Eq(t, tc.tries+1, j.Retries)
				must.Eq(t, "resumed", last.Type)
				requeued := j.Events[len(j.Events)-3] // requeued, start, resumed
				must.Eq(t, structs.EventRequeued, requeued.Type)
				must.Eq(t, tc.event, requeued.Message)
				must.Eq(t, tc.tries+1, metrics.requeues[structs.RequeueInfrastructure])
				must.Nil(t, j.ExitCode)
				return
			}
			must.SliceEmpty(t, exec.take(), must.Sprint("an ended job is not started again"))
			must.StrContains(t, last.Message, tc.event)
			must.Eq(t, tc.code, *j.ExitCode)
			must.Eq(t, tc.tries, j.Retries)
			must.MapEmpty(t, j.Allocation)
			must.Eq(t, tc.tries, metrics.requeues[structs.RequeueInfrastructure])
		})
	}
}
