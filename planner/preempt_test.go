package planner

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 16: a job that reclaim stops records the preemption (when, which
// job of which queue took its GPUs, why, and its step), and when it
// starts again it is told to resume from the last checkpoint it reported,
// when that lies in the planner's checkpoint_dirs; otherwise it starts
// over, and its record says so.
func TestRound_PreemptionRecordedAndResumed(t *testing.T) {
	cases := []struct {
		name       string
		checkpoint string
		want       *structs.Resume
		event      string
	}{
		{"checkpoint in checkpoint_dirs", "/ckpt/a2/model-step00000040.pt",
			&structs.Resume{Checkpoint: "/ckpt/a2/model-step00000040.pt", Step: 40}, "resumed from the checkpoint of step 40"},
		{"checkpoint elsewhere", "/etc/a2/model-step00000040.pt", nil, "restarted from step 0"},
		{"path escaping the root", "/ckpt/../etc/model.pt", nil, "restarted from step 0"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
			p.CheckpointDirs = []string{"/ckpt"}
			p.SetQueues(mustTree(t, quota.Def{Name: "a", Nominal: quota.Amount{"": 4}}, quota.Def{Name: "b", Nominal: quota.Amount{"": 4}}))
			submit(t, p, now, queueSpec(t, "a1", "a", 90, 4, 4))
			a2 := submit(t, p, now, queueSpec(t, "a2", "a", 10, 4, 4))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a1:4", "a2:4"}, exec.take())
			must.NoError(t, p.ReportProgress(ctx, a2.ID, []structs.ProgressReport{
				{Step: 40, Checkpoint: tc.checkpoint}, {Step: 43}}))

			b1 := submit(t, p, now, queueSpec(t, "b1", "b", 50, 4, 4))
			stopped := *now
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a2:0", "b1:4"}, exec.take())
			j := state(t, st, a2.ID)
			must.Eq(t, structs.JobQueued, j.State)
			must.Len(t, 1, j.Preemptions)
			pe := j.Preemptions[0]
			must.Eq(t, stopped, pe.Time)
			must.Eq(t, b1.ID, pe.Job)
			must.Eq(t, "b", pe.Queue)
			must.Eq(t, "a", pe.From)
			must.Eq(t, int64(43), pe.Step)
			must.StrContains(t, pe.Reason, "queue b takes back GPUs it lent")
			must.True(t, pe.Resumed.IsZero())
			must.Eq(t, "preempted", j.Events[len(j.Events)-1].Type)
			must.StrContains(t, j.Events[len(j.Events)-1].Message, "job "+b1.ID+" of queue b took its GPUs")

			var told *structs.Resume
			exec.onApply = func(j *structs.Job) {
				if j.ID == a2.ID {
					told = j.Resume
				}
			}
			exec.done["b1"] = 0
			*now = now.Add(time.Minute)
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a2:4"}, exec.take())
			must.Eq(t, tc.want, told, must.Sprint("what the actuator was told to resume from"))
			j = state(t, st, a2.ID)
			must.Eq(t, structs.JobRunning, j.State)
			must.Eq(t, tc.want, j.Resume)
			must.Eq(t, *now, j.Preemptions[0].Resumed)
			if tc.want != nil {
				must.Eq(t, tc.want.Step, j.Preemptions[0].ResumedStep)
			} else {
				must.Eq(t, 0, j.Preemptions[0].ResumedStep)
			}
			must.StrContains(t, j.Events[len(j.Events)-1].Message, tc.event)
		})
	}
}

// A job stopped by the user is no preemption.
func TestStop_NoPreemptionRecorded(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	j := submit(t, p, now, queueSpec(t, "a1", "default", 50, 4, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()
	_, err := p.Stop(ctx, j.ID)
	must.NoError(t, err)
	must.SliceEmpty(t, state(t, st, j.ID).Preemptions)
}
