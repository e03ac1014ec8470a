package planner

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// queueSpec is a jobspec in queue q with a priority and min..max GPUs.
func queueSpec(t *testing.T, name, q string, priority, min, max int) *jobspec.Spec {
	t.Helper()
	src := fmt.Sprintf("training %q {\n  command  = \"python3\"\n  queue    = %q\n  priority = %d\n  gpus {\n    min = %d\n    max = %d\n  }\n}\n",
		name, q, priority, min, max)
	s, diags := jobspec.Parse([]byte(src), name+".hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return s
}

func mustTree(t *testing.T, defs ...quota.Def) *quota.Tree {
	t.Helper()
	tree, err := quota.New(defs)
	must.NoError(t, err)
	return tree
}

// A job naming a queue the planner lacks, a parent queue, or more GPUs
// than its queue may ever hold is refused at submission with the
// jobspec's queue attribute as the place, and nothing is stored.
func TestSubmit_QueueRefusals(t *testing.T) {
	cases := []struct {
		name, queue string
		min         int
		want        error
		msg         string
	}{
		{"unknown queue", "audio", 1, quota.ErrUnknownQueue, `j.hcl:3:3: error: Queue refuses the job: queue "audio" does not exist; the planner's queues for jobs are vision, nlp.`},
		{"parent queue", "ml", 1, quota.ErrParentQueue, `j.hcl:3:3: error: Queue refuses the job: queue "ml" holds queues (vision, nlp), not jobs`},
		{"over the limit", "nlp", 6, quota.ErrOverLimit, `j.hcl:3:3: error: Queue refuses the job: job j needs at least 6 GPUs but queue "nlp" may never hold more than 4 of those it may use (nominal 2, borrowing limit 2; inside ml)`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p, st, _, now := newPlanner(t, "elastic-fifo", node("n1", 8))
			p.SetQueues(mustTree(t,
				quota.Def{Name: "ml", Nominal: quota.Amount{"": 8}},
				quota.Def{Name: "vision", Parent: "ml", Nominal: quota.Amount{"": 6}},
				quota.Def{Name: "nlp", Parent: "ml", Nominal: quota.Amount{"": 2}, BorrowingLimit: quota.Amount{"": 2}}))
			*now = now.Add(time.Second)
			_, _, err := p.Submit(context.Background(), queueSpec(t, "j", tc.queue, 50, tc.min, tc.min), "", nil)
			must.ErrorIs(t, err, tc.want)
			var in *api.InputError
			must.True(t, errors.As(err, &in))
			must.StrContains(t, hcldiag.Format(in.Diags), tc.msg)
			jobs, err := st.ListJobs(context.Background())
			must.NoError(t, err)
			must.SliceEmpty(t, jobs)
		})
	}
}

// Team a borrows the whole idle cluster; team b submits within its
// nominal quota: a's elastic job shrinks in place (not stopped) and b's
// job starts in the same round, under FIFO, a policy that never resizes
// or preempts a running job itself. b's jobs, while they wait behind a
// full queue, say so in words with their places in the queue.
func TestRound_ReclaimShrinksBorrowerInPlace(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t,
		quota.Def{Name: "a", Nominal: quota.Amount{"": 4}},
		quota.Def{Name: "b", Nominal: quota.Amount{"": 4}, BorrowingLimit: quota.Amount{"": 0}}))

	a1 := submit(t, p, now, queueSpec(t, "a1", "a", 50, 2, 8))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, 8, state(t, st, a1.ID).GPUs(), must.Sprint("a borrows b's idle quota"))
	exec.take()

	b1 := submit(t, p, now, queueSpec(t, "b1", "b", 50, 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a1:4", "b1:4"}, exec.take(), must.Sprint("a1 shrinks in place, then b1 starts"))
	ja := state(t, st, a1.ID)
	must.Eq(t, structs.JobRunning, ja.State)
	must.StrContains(t, ja.History[len(ja.History)-1].Reason, "shrunk in place: queue b takes back GPUs it lent")
	jb := state(t, st, b1.ID)
	must.Eq(t, 4, jb.GPUs())
	must.StrContains(t, jb.History[0].Reason, "within queue b's nominal quota")

	// b is at its nominal quota and may not borrow: its next jobs wait,
	// saying why and where they stand.
	b2 := submit(t, p, now, queueSpec(t, "b2", "b", 50, 2, 2))
	b3 := submit(t, p, now, queueSpec(t, "b3", "b", 90, 2, 2))
	must.NoError(t, p.Round(ctx))
	waits := p.Waits()
	must.Eq(t, "needs 2 GPUs; queue b at 4 of 4 GPUs; may borrow 0 more; 2nd of 2 waiting in queue b", waits[b2.ID].String())
	must.Eq(t, structs.Wait{Cause: structs.WaitQuota, Reason: "needs 2 GPUs; queue b at 4 of 4 GPUs; may borrow 0 more",
		Queue: "b", Position: 1, Of: 2}, waits[b3.ID], must.Sprint("priority first within a queue"))
}

// QueueStatus reports each queue's quota and what its jobs hold now.
func TestQueueStatus(t *testing.T) {
	ctx := context.Background()
	p, _, _, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t,
		quota.Def{Name: "ml", Nominal: quota.Amount{"": 8}},
		quota.Def{Name: "a", Parent: "ml", Nominal: quota.Amount{"": 2}, BorrowingLimit: quota.Amount{"": 4}},
		quota.Def{Name: "b", Parent: "ml", Nominal: quota.Amount{"": 6}, LendingLimit: quota.Amount{"": 0}}))
	submit(t, p, now, queueSpec(t, "a1", "a", 50, 2, 8))
	submit(t, p, now, queueSpec(t, "b1", "b", 50, 8, 8))
	must.NoError(t, p.Round(ctx))
	qs, err := p.QueueStatus(ctx, 0)
	must.NoError(t, err)
	must.Len(t, 3, qs)
	six, two, four, eight, zero := 6, 2, 4, 8, 0
	must.Eq(t, structs.QueueStatus{Name: "ml", Children: []string{"a", "b"}, Weight: 1, Running: 1, Waiting: 1,
		GPUs: []structs.QueueGPUs{{Nominal: &eight, Used: 2}}}, qs[0])
	must.Eq(t, structs.QueueStatus{Name: "a", Parent: "ml", Weight: 1, Running: 1,
		GPUs: []structs.QueueGPUs{{Nominal: &two, BorrowingLimit: &four, Used: 2}}}, qs[1],
		must.Sprint("a may not borrow b's 6 guarded GPUs: it holds its nominal 2"))
	must.Eq(t, structs.QueueStatus{Name: "b", Parent: "ml", Weight: 1, Waiting: 1,
		GPUs: []structs.QueueGPUs{{Nominal: &six, LendingLimit: &zero}}}, qs[2])
}

// With a window, each queue reports the GPU-hours its jobs held within
// it, from their GPU histories (a stopped job's up to its stop; one
// holding GPUs since before the window, for the whole window), a parent
// its children's; without one, none.
func TestQueueStatus_Window(t *testing.T) {
	ctx := context.Background()
	p, _, _, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t,
		quota.Def{Name: "ml", Nominal: quota.Amount{"": 8}},
		quota.Def{Name: "a", Parent: "ml", Nominal: quota.Amount{"": 2}},
		quota.Def{Name: "b", Parent: "ml", Nominal: quota.Amount{"": 6}},
		quota.Def{Name: "c", Nominal: quota.Amount{"": 0}}))
	submit(t, p, now, queueSpec(t, "a1", "a", 50, 2, 2))
	b1 := submit(t, p, now, queueSpec(t, "b1", "b", 50, 6, 6))
	must.NoError(t, p.Round(ctx))
	*now = now.Add(2 * time.Hour)
	_, err := p.Stop(ctx, b1.ID)
	must.NoError(t, err)
	*now = now.Add(time.Hour)

	hours := func(window time.Duration) map[string]float64 {
		qs, err := p.QueueStatus(ctx, window)
		must.NoError(t, err)
		out := map[string]float64{}
		for _, q := range qs {
			must.NotNil(t, q.Window, must.Sprintf("queue %s", q.Name))
			must.Eq(t, *now, q.Window.Until)
			must.Eq(t, now.Add(-window), q.Window.Since)
			out[q.Name] = math.Round(q.Window.GPUHours*1000) / 1000
		}
		return out
	}
	must.Eq(t, map[string]float64{"ml": 6, "a": 3, "b": 3, "c": 0}, hours(90*time.Minute),
		must.Sprint("a: 2 GPUs for 1.5 h; b: 6 GPUs for the half hour before its stop"))
	must.Eq(t, map[string]float64{"ml": 18, "a": 6, "b": 12, "c": 0}, hours(24*time.Hour),
		must.Sprint("a: 2 GPUs for 3 h; b: 6 GPUs for 2 h"))
	must.Eq(t, map[string]float64{"ml": 1, "a": 1, "b": 0, "c": 0}, hours(30*time.Minute),
		must.Sprint("a: 2 GPUs since before the window; b ended before it (QueueStatus reads only the jobs that held GPUs in the window)"))

	qs, err := p.QueueStatus(ctx, 0)
	must.NoError(t, err)
	for _, q := range qs {
		must.Nil(t, q.Window)
	}
}

// The queues change without a restart, unless a live job would lose its
// queue: then the change is refused, saying which jobs, and the old queues
// stay.
func TestReplaceQueues(t *testing.T) {
	ctx := context.Background()
	p, _, exec, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t, quota.Def{Name: "a", Nominal: quota.Amount{"": 4}}, quota.Def{Name: "b", Nominal: quota.Amount{"": 4}}))
	a1 := submit(t, p, now, queueSpec(t, "a1", "a", 50, 2, 2))
	must.NoError(t, p.Round(ctx))

	err := p.ReplaceQueues(ctx, mustTree(t, quota.Def{Name: "b", Nominal: quota.Amount{"": 8}}))
	must.ErrorIs(t, err, structs.ErrOrphanedJobs)
	must.StrContains(t, err.Error(), a1.ID+" (queue a)")
	must.True(t, p.Queues().HoldsJobs("a"), must.Sprint("the old queues stay"))

	err = p.ReplaceQueues(ctx, mustTree(t, quota.Def{Name: "t"}, quota.Def{Name: "a", Parent: "t", Nominal: quota.Amount{"": 8}}))
	must.NoError(t, err, must.Sprint("a keeps its jobs inside a new parent"))
	must.Eq(t, []string{"a"}, p.Queues().Leaves())

	exec.done["a1"] = 0
	must.NoError(t, p.Round(ctx))
	must.NoError(t, p.ReplaceQueues(ctx, mustTree(t, quota.Def{Name: "b", Nominal: quota.Amount{"": 8}})), must.Sprint("a's job has ended"))
}

// A borrower's job that cannot shrink is stopped for a queue below its
// nominal quota: requeued, not failed, with who took its GPUs and why;
// it starts again when the GPUs come back.
func TestRound_ReclaimStopsAndRequeues(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	p.SetQueues(mustTree(t, quota.Def{Name: "a", Nominal: quota.Amount{"": 4}}, quota.Def{Name: "b", Nominal: quota.Amount{"": 4}}))
	a1 := submit(t, p, now, queueSpec(t, "a1", "a", 90, 4, 4))
	a2 := submit(t, p, now, queueSpec(t, "a2", "a", 10, 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a1:4", "a2:4"}, exec.take())

	b1 := submit(t, p, now, queueSpec(t, "b1", "b", 50, 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a2:0", "b1:4"}, exec.take(), must.Sprint("the lower-priority borrower is stopped"))
	j := state(t, st, a2.ID)
	must.Eq(t, structs.JobQueued, j.State)
	must.StrContains(t, j.History[len(j.History)-1].Reason, "preempted (requeued): queue b takes back GPUs it lent: job "+b1.ID)
	must.Eq(t, structs.JobRunning, state(t, st, a1.ID).State)

	exec.done["b1"] = 0
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a2:4"}, exec.take(), must.Sprint("a borrows again once b is idle"))
}
