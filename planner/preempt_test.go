package planner

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
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

// A job stopped by the user is no preemption: not in its record, nor in
// the metrics' changes (a stop there counts as a preemption).
func TestStop_NoPreemptionRecorded(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	metrics := &countingMetrics{changes: map[policy.ChangeKind]int{}}
	p.Metrics = metrics
	j := submit(t, p, now, queueSpec(t, "a1", "default", 50, 4, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()
	_, err := p.Stop(ctx, j.ID)
	must.NoError(t, err)
	must.Eq(t, []string{"a1:0"}, exec.take())
	must.SliceEmpty(t, state(t, st, j.ID).Preemptions)
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	must.Zero(t, metrics.changes[policy.Stop])
	must.Eq(t, 1, metrics.changes[policy.Start])
}

// A preemption is recorded before the run is stopped, as a move between
// models is (TestRound_MoveRecordedBeforeTheStop): a record that cannot be
// written leaves the run alone (before, the run was stopped first, and its
// end was then taken for the job's: a chaos run saw exit 1); a stop that
// fails puts the record back as it was (no preemption, its history as
// before), with an event that says so. Either way b1, which was to take
// its GPUs, waits for the next round (else the records would hold 12 of
// the node's 8 GPUs, and every round's snapshot be refused); the next
// round preempts a2 and starts b1.
func TestRound_PreemptionRecordedBeforeTheStop(t *testing.T) {
	for _, tc := range failedStops(func(j *structs.Job) bool { return j.State == structs.JobQueued }, "its run goes on") {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", typedNode("n1", "A100", 8))
			p.SetQueues(mustTree(t, quota.Def{Name: "a", Nominal: quota.Amount{"": 4}}, quota.Def{Name: "b", Nominal: quota.Amount{"": 4}}))
			submit(t, p, now, queueSpec(t, "a1", "a", 90, 4, 4))
			a2 := submit(t, p, now, queueSpec(t, "a2", "a", 10, 4, 4))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a1:4", "a2:4"}, exec.take())
			before := state(t, st, a2.ID)

			b1 := submit(t, p, now, queueSpec(t, "b1", "b", 50, 4, 4))
			tc.fail(st, exec, a2)
			err := p.Round(ctx)
			must.ErrorContains(t, err, tc.err)
			must.ErrorContains(t, err, "start of job "+b1.ID+" waits for the next round: a change that was to free GPUs on node n1 failed (4 GPUs there are still held)")
			st.refuse = nil
			must.SliceEmpty(t, exec.take(), must.Sprint("a2's run was stopped, or b1 started beside it"))
			must.Eq(t, structs.JobQueued, state(t, st, b1.ID).State)
			j := state(t, st, a2.ID)
			must.Eq(t, structs.JobRunning, j.State)
			must.Eq(t, before.Allocation, j.Allocation)
			must.SliceEmpty(t, j.Preemptions)
			must.Eq(t, before.History, j.History)
			must.Eq(t, before.Models, j.Models)
			must.Eq(t, "A100", j.GPUModel)
			must.Eq(t, before.AttainedGPUSeconds, j.AttainedGPUSeconds)
			if tc.name == "the stop fails" {
				last := j.Events[len(j.Events)-1]
				must.Eq(t, "stop", last.Type)
				must.StrContains(t, last.Message, "not stopped: failed to stop job "+a2.ID+": nomad said no; it runs on as it was")
			}

			*now = now.Add(10 * time.Second)
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a2:0", "b1:4"}, exec.take(), must.Sprint("the next round preempts a2 and starts b1"))
			must.Eq(t, structs.JobQueued, state(t, st, a2.ID).State)
			must.Len(t, 1, state(t, st, a2.ID).Preemptions)
		})
	}
}

// A stop whose answer was lost though it took effect (tried again, the
// Nomad job is stopped already) is a stop: the preemption stands, and its
// record is not put back to running (whose ended run reap would then take
// for the job's end).
func TestRound_StopTriedAgainOnce(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t, quota.Def{Name: "a", Nominal: quota.Amount{"": 4}}, quota.Def{Name: "b", Nominal: quota.Amount{"": 4}}))
	submit(t, p, now, queueSpec(t, "a1", "a", 90, 4, 4))
	a2 := submit(t, p, now, queueSpec(t, "a2", "a", 10, 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a1:4", "a2:4"}, exec.take())
	submit(t, p, now, queueSpec(t, "b1", "b", 50, 4, 4))
	exec.failTimes = map[string]int{"a2": 1}
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a2:0", "b1:4"}, exec.take())
	j := state(t, st, a2.ID)
	must.Eq(t, structs.JobQueued, j.State)
	must.Len(t, 1, j.Preemptions)
}
