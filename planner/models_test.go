package planner

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/assess"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// typedNode is node of GPU model model.
func typedNode(id, model string, gpus int) policy.Node {
	n := node(id, gpus)
	n.GPUModel = model
	return n
}

// On a cluster of two GPU models each job runs on one: the actuator is
// told the model (it pins the workers to it), the record carries it and
// its model history, and a job that runs again on another model after a
// requeue says so in an event, with the start's reason.
func TestRound_GPUModels(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 4), typedNode("v100", "V100", 2))
	var mu sync.Mutex
	told := map[string]string{} // job name -> the model Apply saw
	exec.onApply = func(j *structs.Job) {
		mu.Lock()
		defer mu.Unlock()
		told[j.Spec.Name] = j.GPUModel
	}
	exec.infra = map[string]string{}
	p.Retries = 3
	big := submit(t, p, now, spec(t, "big", 4, 4))
	small := submit(t, p, now, spec(t, "small", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"big:4", "small:2"}, exec.take())
	must.Eq(t, map[string]string{"big": "A100", "small": "V100"}, told)
	s := state(t, st, small.ID)
	must.Eq(t, "V100", s.GPUModel)
	must.Eq(t, "V100", s.History[0].Model)
	must.Eq(t, []structs.ModelRun{{Model: "V100", Since: *now, Reason: s.History[0].Reason}}, s.Models)
	must.Eq(t, "A100", state(t, st, big.ID).GPUModel)

	// big ends; small's run is ended by the cluster (its node lost) and
	// it is requeued: it starts again in the same round, on the A100s,
	// the most room.
	exec.done["big"], exec.done["small"], exec.infra["small"] = 0, 1, "node lost"
	started := *now
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	delete(exec.done, "small")
	delete(exec.infra, "small")
	s = state(t, st, small.ID)
	must.Eq(t, structs.JobRunning, s.State)
	must.Eq(t, "A100", s.GPUModel)
	must.Eq(t, "A100", told["small"])
	must.SliceLen(t, 2, s.Models)
	must.Eq(t, structs.ModelRun{Model: "V100", Since: started, Until: started.Add(time.Minute), Reason: s.Models[0].Reason}, s.Models[0])
	must.Eq(t, "A100", s.Models[1].Model)
	must.True(t, s.Models[1].Until.IsZero())
	var moved []string
	for _, e := range s.Events {
		if e.Type == EventModel {
			moved = append(moved, e.Message)
		}
	}
	must.Eq(t, []string{"moved from V100 to A100: " + s.History[len(s.History)-1].Reason}, moved)
	must.StrContains(t, moved[0], "started with 2 GPUs")

	// Its end closes the run; the record keeps the history.
	exec.done["small"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	s = state(t, st, small.ID)
	must.Eq(t, structs.JobComplete, s.State)
	must.Eq(t, "", s.GPUModel)
	must.Eq(t, *now, s.Models[1].Until)
}

// The planner keeps a job's speed per GPU model: reports are stamped with
// the model the job runs on, its outlook keeps each model's speed per GPU
// across runs, and the policies see its goodput by model
// (policy.Job.ByModel): measured where it ran, estimated for a job of the
// same application from what that job showed between the models, and
// missing (to explore) for a job of another application. A cluster of one
// model has no ByModel.
func TestRound_SpeedByModel(t *testing.T) {
	ctx := context.Background()
	nodes := []policy.Node{typedNode("a100", "A100", 4), typedNode("v100", "V100", 2)}
	p, st, exec, now := newPlanner(t, "fifo", nodes...)
	exec.infra = map[string]string{}
	p.Retries = 3
	report := func(id string, sps float64) {
		t.Helper()
		*now = now.Add(10 * time.Second)
		must.NoError(t, p.ReportProgress(ctx, id, []structs.ProgressReport{{Step: 1, SamplesPerSec: f64(sps), WorldSize: 2}}))
	}
	submit(t, p, now, spec(t, "filler", 4, 4))
	first := submit(t, p, now, spec(t, "resnet", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, "V100", state(t, st, first.ID).GPUModel)
	for range 3 {
		report(first.ID, 200)
	}
	rec := state(t, st, first.ID)
	must.Eq(t, "V100", rec.Progress.History[0].GPUModel, must.Sprint("stamped by the planner"))
	must.Eq(t, 100.0, rec.Outlook.Rates["V100"].PerGPU, must.Sprint("2 GPUs at 200 samples/s, linear while the table is unknown"))

	// It runs again on the A100s, three times as fast.
	exec.done["filler"], exec.done["resnet"], exec.infra["resnet"] = 0, 1, "node lost"
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	delete(exec.done, "resnet")
	delete(exec.infra, "resnet")
	must.Eq(t, "A100", state(t, st, first.ID).GPUModel)
	for range 3 {
		report(first.ID, 600)
	}
	rec = state(t, st, first.ID)
	must.Eq(t, 100.0, rec.Outlook.Rates["V100"].PerGPU, must.Sprint("kept from its run on V100"))
	must.Eq(t, 300.0, rec.Outlook.Rates["A100"].PerGPU)

	// A second resnet and a bert, each measured on V100 only (queued:
	// their outlooks as a run on V100 left them).
	second := submit(t, p, now, spec(t, "resnet", 2, 2))
	bert := submit(t, p, now, spec(t, "bert", 2, 2))
	for id, perGPU := range map[string]float64{second.ID: 60, bert.ID: 40} {
		j := state(t, st, id).Clone()
		j.Outlook = &structs.Outlook{Rates: map[string]structs.ModelRate{"V100": {PerGPU: perGPU, Measured: 2, Reports: 1, Updated: *now}}}
		must.NoError(t, p.Store.UpdateJob(ctx, j))
	}
	live, err := st.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	snap := p.snapshot(*now, nodes, live, false)
	views := map[string]policy.Job{}
	for _, j := range snap.Jobs {
		views[j.ID] = j
	}
	must.Eq(t, map[string][]float64{"V100": {100, 200}, "A100": {300, 600}}, views[first.ID].ByModel)
	must.Eq(t, map[string][]float64{"V100": {60, 120}, "A100": {180, 360}}, views[second.ID].ByModel,
		must.Sprint("A100 estimated: its V100 speed times the 3x the first resnet showed"))
	must.Eq(t, map[string][]float64{"V100": {40, 80}}, views[bert.ID].ByModel, must.Sprint("no bert has run on A100: left to explore"))

	one := p.snapshot(*now, nodes[:1], live, false)
	for _, j := range one.Jobs {
		must.Nil(t, j.ByModel, must.Sprint("one model: no choice to make"))
	}
}

// A job's outlook keeps at most structs.MaxOutlookModels models, the most
// recently measured; only the model it runs on counts as measured now.
func TestModelRates_Bounded(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 10, 0, 0, 0, time.UTC)
	var o *structs.Outlook
	for i := range structs.MaxOutlookModels + 3 {
		m := fmt.Sprintf("M%02d", i)
		o = &structs.Outlook{Rates: modelRates(o, map[string]assess.Rate{m: {PerGPU: float64(i + 1), Measured: 1, N: 1}}, m, t0.Add(time.Duration(i)*time.Minute))}
	}
	must.MapLen(t, structs.MaxOutlookModels, o.Rates)
	must.MapNotContainsKey(t, o.Rates, "M00")
	must.MapContainsKey(t, o.Rates, fmt.Sprintf("M%02d", structs.MaxOutlookModels+2))
	// Re-measured while running on another model: the old time stays.
	got := modelRates(o, map[string]assess.Rate{"M05": {PerGPU: 9, Measured: 2, N: 4}}, "M10", t0.Add(time.Hour))
	must.Eq(t, structs.ModelRate{PerGPU: 9, Measured: 2, Reports: 4, Updated: t0.Add(5 * time.Minute)}, got["M05"])
}

// What jobs of an application showed between models is the median over
// the jobs measured on both, each job once (its latest), at most
// maxPriorJobs of them; applications beyond maxPriorNames are forgotten,
// the least recently reported first; a job on one model teaches nothing.
func TestModelPriors(t *testing.T) {
	var p modelPriors
	rates := func(v, a float64) map[string]structs.ModelRate {
		return map[string]structs.ModelRate{"V100": {PerGPU: v}, "A100": {PerGPU: a}}
	}
	p.observe("resnet", "j1", rates(100, 300))
	p.observe("resnet", "j1", rates(100, 250)) // j1 again: its latest only
	p.observe("resnet", "j2", rates(100, 200))
	p.observe("resnet", "j3", rates(100, 400))
	p.observe("bert", "j4", map[string]structs.ModelRate{"V100": {PerGPU: 1}})
	r := p.ratios()
	must.Eq(t, 2.5, r[priorKey{"resnet", "V100", "A100"}])
	must.Eq(t, 0.4, r[priorKey{"resnet", "A100", "V100"}])
	must.MapNotContainsKey(t, r, priorKey{"bert", "V100", "A100"})
	for i := range 2 * maxPriorJobs {
		p.observe("resnet", fmt.Sprint("k", i), rates(100, 1000))
	}
	must.Eq(t, 10.0, p.ratios()[priorKey{"resnet", "V100", "A100"}], must.Sprint("only the last jobs count"))
	for i := range maxPriorNames {
		p.observe(fmt.Sprint("app", i), "x", rates(1, 2))
	}
	must.MapLen(t, maxPriorNames, p.names)
	must.MapNotContainsKey(t, p.names, "resnet", must.Sprint("the least recently reported application forgotten"))
}

// mover is a test policy that moves running jobs from V100s to free A100s
// (a heterogeneity-aware policy's decision) and starts queued ones on the
// A100s, else anywhere.
type mover struct{}

func (mover) PluginInfo() policy.Info           { return policy.Info{Name: "mover"} }
func (mover) SetConfig(map[string]string) error { return nil }
func (mover) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, err
	}
	for j, job := range c.Jobs() {
		jj := int32(j)
		switch {
		case c.Held(jj) > 0 && c.ModelOf(jj) == "V100" && c.ModelRoom(jj, "A100") == 0:
			held := c.Held(jj)
			h := c.Preempt(jj)
			if c.GrowOn(jj, held, "A100") {
				c.Note(job.ID, "3x faster on A100")
			} else {
				c.Restore(jj, h)
			}
		case c.Held(jj) == 0:
			if !c.GrowOn(jj, job.GPUs.Min, "A100") {
				c.Grow(jj, job.GPUs.Min)
			}
		}
	}
	return c.Plan("mover"), nil
}

// A policy that moves a running job to GPUs of another model gets a move
// in the real system: the run is stopped (SIGTERM: the training commits
// its checkpoint), the job waits, held from the policy, until that run
// has ended, and then starts on the new model from the checkpoint it
// reported; events say why and when. A run that does not end within
// MoveHold is not waited for longer.
func TestRound_MoveBetweenModels(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 2), typedNode("v100", "V100", 2))
	p.Policies = NewFixedPolicyHost(mover{}, p.Logger)
	ckpts := t.TempDir()
	p.CheckpointDirs = []string{ckpts}
	var mu sync.Mutex
	type told struct {
		model  string
		resume *structs.Resume
	}
	var applied []told
	exec.onApply = func(j *structs.Job) {
		mu.Lock()
		defer mu.Unlock()
		if j.Spec.Name == "m" {
			applied = append(applied, told{j.GPUModel, j.Resume})
		}
	}
	submit(t, p, now, spec(t, "blocker", 2, 2))
	m := submit(t, p, now, spec(t, "m", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"blocker:2", "m:2"}, exec.take())
	must.Eq(t, "V100", state(t, st, m.ID).GPUModel)
	ckpt := ckpts + "/m-50.pt"
	must.NoError(t, p.ReportProgress(ctx, m.ID, []structs.ProgressReport{{Step: 50, Checkpoint: ckpt}}))

	// The A100s free up: the policy moves m. Its run is stopped, and it
	// is queued, moving.
	exec.done["blocker"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"m:0"}, exec.take())
	rec := state(t, st, m.ID)
	must.Eq(t, structs.JobQueued, rec.State)
	must.Eq(t, &structs.Move{From: "V100", To: "A100", Since: *now, Reason: "3x faster on A100", Target: map[string]int{"a100": 2}, Policy: "mover"}, rec.Moving)
	must.Eq(t, "moving from V100 to A100: 3x faster on A100", rec.History[len(rec.History)-1].Reason)
	must.Eq(t, *now, rec.Models[0].Until)

	// Its run has not ended: it is held, and the A100s with it: a job
	// submitted meanwhile, which the policy would put on them, gets the
	// V100s m left.
	intruder := submit(t, p, now, spec(t, "intruder", 2, 2))
	*now = now.Add(10 * time.Second)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"intruder:2"}, exec.take())
	must.Eq(t, "V100", state(t, st, intruder.ID).GPUModel)
	must.Eq(t, structs.JobQueued, state(t, st, m.ID).State)
	// It reports the checkpoint its SIGTERM saved; then its run ends.
	saved := ckpts + "/m-64.pt"
	must.NoError(t, p.ReportProgress(ctx, m.ID, []structs.ProgressReport{{Step: 64, Checkpoint: saved}}))
	exec.done["m"] = 0
	*now = now.Add(10 * time.Second)
	must.NoError(t, p.Round(ctx))
	delete(exec.done, "m")
	must.Eq(t, []string{"m:2"}, exec.take())
	rec = state(t, st, m.ID)
	must.Eq(t, structs.JobRunning, rec.State)
	must.Nil(t, rec.Moving)
	must.Eq(t, "A100", rec.GPUModel)
	must.Eq(t, map[string]int{"a100": 2}, rec.Allocation)
	must.Eq(t, told{"A100", &structs.Resume{Checkpoint: saved, Step: 64}}, applied[len(applied)-1],
		must.Sprint("started on the A100s from the checkpoint its stop saved"))
	var moves []string
	for _, e := range rec.Events {
		if e.Type == EventModel {
			moves = append(moves, e.Message)
		}
	}
	must.Eq(t, []string{
		"moving from V100 to A100: 3x faster on A100; stopped with a checkpoint, it starts again from it once its run has ended",
		"moved from V100 to A100: 3x faster on A100",
	}, moves)
	must.Eq(t, "moved from V100 to A100: 3x faster on A100", rec.History[len(rec.History)-1].Reason)
	must.Eq(t, "mover", rec.History[len(rec.History)-1].Policy, must.Sprint("started where the policy moved it, not placed again"))
	must.SliceLen(t, 2, rec.Models)
	must.Eq(t, "moved from V100 to A100: 3x faster on A100", rec.Models[1].Reason, must.Sprint("the run on A100 says why"))

	// A run that never says it ended is waited for MoveHold at most.
	j := state(t, st, m.ID).Clone()
	must.NoError(t, p.Store.UpdateJob(ctx, func() *structs.Job {
		j.State, j.Allocation = structs.JobQueued, nil
		j.AddChange(structs.GPUChange{Time: *now, GPUs: 0})
		j.Moving = &structs.Move{From: "A100", To: "V100", Since: *now}
		return j
	}()))
	exec.done["blocker"] = 0
	held, ended := p.holdMove(ctx, state(t, st, m.ID), now.Add(MoveHold-time.Second))
	must.True(t, held)
	must.False(t, ended)
	held, ended = p.holdMove(ctx, state(t, st, m.ID), now.Add(MoveHold))
	must.False(t, held)
	must.False(t, ended)

	// Once the hold is over, a job whose target is gone (here: none was
	// recorded) is no longer held and waits for the policy, which places
	// it again.
	*now = now.Add(MoveHold)
	must.NoError(t, p.Round(ctx))
	rec = state(t, st, m.ID)
	must.True(t, slices.ContainsFunc(rec.Events, func(e structs.Event) bool {
		return e.Message == "its run on A100 has not ended within 2m0s, but it was moved to no GPUs: it waits to be placed again"
	}), must.Sprint(rec.Events))
	must.Eq(t, []string{"m:2"}, exec.take(), must.Sprint("the policy placed it again"))
}

// A job stopped by its user while it moves between models is stopped and
// moves no more: its record, and so job status and the dashboard, no
// longer say it moves (they did, forever); the GPUs held for it go to the
// next job, as an ended job's do.
func TestStop_MovingJob(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 2), typedNode("v100", "V100", 2))
	p.Policies = NewFixedPolicyHost(mover{}, p.Logger)
	m := moveM(t, p, exec, now)
	must.Eq(t, []string{"m:0"}, exec.take())
	must.NotNil(t, state(t, st, m.ID).Moving, must.Sprint("m moves to the A100s"))

	_, err := p.Stop(ctx, m.ID)
	must.NoError(t, err)
	rec := state(t, st, m.ID)
	must.Eq(t, structs.JobStopped, rec.State)
	must.Nil(t, rec.Moving)

	next := submit(t, p, now, spec(t, "next", 2, 2))
	*now = now.Add(10 * time.Second)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"next:2"}, exec.take())
	must.Eq(t, "A100", state(t, st, next.ID).GPUModel, must.Sprint("the A100s held for m are free"))
}

// The GPUs held for a moving job count against its queue, not as work
// from outside the planner: a job of the same queue submitted while it
// waits does not start beyond the queue's limit (it would have gone on
// the GPUs the move left, and the queue held twice its limit once the
// move started).
func TestRound_HeldMoveCountsAgainstItsQueue(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 2), typedNode("v100", "V100", 2))
	p.Policies = NewFixedPolicyHost(mover{}, p.Logger)
	p.SetQueues(mustTree(t,
		quota.Def{Name: "a", Nominal: quota.Amount{"": 2}, BorrowingLimit: quota.Amount{"": 0}},
		quota.Def{Name: "b", Nominal: quota.Amount{"": 2}, BorrowingLimit: quota.Amount{"": 0}}))
	submit(t, p, now, queueSpec(t, "blocker", "b", 50, 2, 2))
	m := submit(t, p, now, queueSpec(t, "m", "a", 50, 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"blocker:2", "m:2"}, exec.take())
	exec.done["blocker"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"m:0"}, exec.take())
	must.NotNil(t, state(t, st, m.ID).Moving)
	qs, err := p.QueueStatus(ctx, 0)
	must.NoError(t, err)
	must.Eq(t, "a", qs[0].Name)
	must.Eq(t, 2, qs[0].GPUs[0].Used, must.Sprint("queue list counts the held A100s as queue a's"))
	must.Eq(t, 0, qs[1].GPUs[0].Used)

	intruder := submit(t, p, now, queueSpec(t, "intruder", "a", 50, 2, 2))
	*now = now.Add(10 * time.Second)
	must.NoError(t, p.Round(ctx))
	must.SliceEmpty(t, exec.take(), must.Sprint("queue a is at its limit with m's held GPUs"))
	must.Eq(t, structs.JobQueued, state(t, st, intruder.ID).State)

	exec.done["m"] = 0
	*now = now.Add(10 * time.Second)
	must.NoError(t, p.Round(ctx))
	delete(exec.done, "m")
	must.Eq(t, []string{"m:2"}, exec.take())
	must.Eq(t, "A100", state(t, st, m.ID).GPUModel)
}

// A move is recorded before the run is stopped. A record that cannot be
// written leaves the run alone (the run was stopped first, and its end
// then taken for the job's: it ended complete); a stop that fails puts
// the record back as it was, with an event that says so. Either way the
// next round moves it.
func TestRound_MoveRecordedBeforeTheStop(t *testing.T) {
	for _, tc := range failedStops(func(j *structs.Job) bool { return j.Moving != nil }, "failed to record the move") {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 2), typedNode("v100", "V100", 2))
			p.Policies = NewFixedPolicyHost(mover{}, p.Logger)
			submit(t, p, now, spec(t, "blocker", 2, 2))
			m := submit(t, p, now, spec(t, "m", 2, 2))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"blocker:2", "m:2"}, exec.take())
			before := state(t, st, m.ID)

			exec.done["blocker"] = 0
			tc.fail(st, exec, m)
			*now = now.Add(time.Minute)
			must.ErrorContains(t, p.Round(ctx), tc.err)
			st.refuse = nil
			must.SliceEmpty(t, exec.take(), must.Sprint("m's run was stopped"))
			rec := state(t, st, m.ID)
			must.Eq(t, structs.JobRunning, rec.State)
			must.Eq(t, before.Allocation, rec.Allocation)
			must.Nil(t, rec.Moving)
			must.Eq(t, "V100", rec.GPUModel)
			must.Eq(t, before.History, rec.History)
			must.Eq(t, before.Models, rec.Models)
			must.Eq(t, before.AttainedGPUSeconds, rec.AttainedGPUSeconds)
			if tc.name == "the stop fails" {
				last := rec.Events[len(rec.Events)-1]
				must.Eq(t, EventModel, last.Type)
				must.StrContains(t, last.Message, "not moved from V100 to A100: failed to stop job")
				must.StrContains(t, last.Message, "it runs on as it was")
			}

			*now = now.Add(10 * time.Second)
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"m:0"}, exec.take(), must.Sprint("the next round moves it"))
			must.NotNil(t, state(t, st, m.ID).Moving)
		})
	}
}

// A move whose run on the old model has ended by the end of the round
// that stopped it (the simulator's runs end at once) starts on the new
// model in that round, on the GPUs the plan moved it to, as a change of
// the plan would: the move costs the restart, not a round more.
func TestRound_MoveEndedAtOnce(t *testing.T) {
	st, exec, m := moveEndingAtOnce(t, nil, nil)
	exec.mu.Lock()
	delete(exec.done, "m")
	exec.mu.Unlock()
	must.Eq(t, []string{"m:0", "m:2"}, exec.take(), must.Sprint("stopped and started on the A100s in one round"))
	rec := state(t, st, m.ID)
	must.Eq(t, structs.JobRunning, rec.State)
	must.Nil(t, rec.Moving)
	must.Eq(t, map[string]int{"a100": 2}, rec.Allocation)
	must.Eq(t, "moved from V100 to A100: 3x faster on A100", rec.History[len(rec.History)-1].Reason)
}

// A moved job whose start on its new model waits for its old launcher to
// stop (ErrRunEnding) is no failed change in the metrics, as in the round:
// nothing was started, and it waits to be placed again.
func TestStartMove_WaitingForTheLauncherIsNoFailedChange(t *testing.T) {
	metrics := &countingMetrics{changes: map[policy.ChangeKind]int{}}
	st, exec, m := moveEndingAtOnce(t, metrics, map[string]string{"m": "launcher allocation 9f8e7d6c on v100 is running"})
	must.Eq(t, []string{"m:0"}, exec.take(), must.Sprint("stopped, not started"))
	rec := state(t, st, m.ID)
	must.Eq(t, structs.JobQueued, rec.State)
	must.True(t, rec.Moving.Stopped)
	must.StrContains(t, rec.Events[len(rec.Events)-1].Message, "(launcher allocation 9f8e7d6c on v100 is running): it waits to be placed again")
	metrics.mu.Lock()
	defer metrics.mu.Unlock()
	must.Zero(t, metrics.failedChanges)
}

// A job moving between GPU models starts, once its run on the old model
// has ended, on the GPUs it was moved to, in the round that sees the run
// end; where those are taken meanwhile (here by work from outside the
// planner: the node reserves them), it waits for the policy instead.
func TestStartMove_TargetTaken(t *testing.T) {
	nodes := []policy.Node{typedNode("a", "A100", 4), typedNode("b", "V100", 2)}
	live := []*structs.Job{{ID: "o", Allocation: map[string]int{"a": 2}}}
	must.Eq(t, "", targetMiss(policy.Allocation{"a": 2}, "A100", nodes, live))
	must.Eq(t, "node a has 1 of the 2 GPUs it was moved to free", targetMiss(policy.Allocation{"a": 2}, "A100", func() []policy.Node {
		n := slices.Clone(nodes)
		n[0].Reserved = 1
		return n
	}(), live))
	must.Eq(t, "node b's GPUs are no longer A100", targetMiss(policy.Allocation{"b": 2}, "A100", nodes, nil))
	must.Eq(t, "node c is gone", targetMiss(policy.Allocation{"c": 1}, "A100", nodes, nil))
	must.Eq(t, "it was moved to no GPUs", targetMiss(nil, "A100", nodes, nil))
}

// The GPUs held for a moving job are reserved on its target nodes, never
// more than are free there (what the jobs hold and what the node reserves
// already), so the snapshot stays consistent; the nodes themselves are not
// written.
func TestHoldTargets(t *testing.T) {
	nodes := []policy.Node{typedNode("a", "A100", 4), typedNode("b", "A100", 4), typedNode("c", "V100", 2)}
	nodes[0].Reserved = 1
	moving := &structs.Job{ID: "m", Moving: &structs.Move{Target: map[string]int{"a": 2, "b": 2, "gone": 2}}}
	other := &structs.Job{ID: "o", Allocation: map[string]int{"a": 2, "c": 2}}
	got, held := holdTargets(nodes, []*structs.Job{moving}, []*structs.Job{other})
	must.Eq(t, []int{2, 2, 0}, []int{got[0].Reserved, got[1].Reserved, got[2].Reserved}, must.Sprint("a: 1 free of 4 (1 reserved, 2 held)"))
	must.Eq(t, 1, nodes[0].Reserved)
	must.Eq(t, 0, nodes[1].Reserved)
	must.Eq(t, []quota.Held{{Queue: quota.DefaultQueue, GPUs: policy.Allocation{"a": 1, "b": 2}}}, held, must.Sprint("what it reserved, for the job's queue"))
	s := snapshot(time.Now(), got, []*structs.Job{{ID: "o", State: structs.JobRunning, Allocation: other.Allocation, Spec: *spec(t, "o", 4, 4)}})
	_, err := place.NewBoard(s)
	must.NoError(t, err, must.Sprint("a consistent snapshot"))

	// Two jobs wanting more than a node has left take it in turn.
	second := &structs.Job{ID: "n", Spec: jobspec.Spec{Queue: "q"}, Moving: &structs.Move{Target: map[string]int{"b": 3}}}
	got, held = holdTargets(nodes, []*structs.Job{moving, second}, []*structs.Job{other})
	must.Eq(t, 4, got[1].Reserved, must.Sprint("b's 4: 2 for m, the 2 left for n"))
	must.Eq(t, []quota.Held{{Queue: quota.DefaultQueue, GPUs: policy.Allocation{"a": 1, "b": 2}}, {Queue: "q", GPUs: policy.Allocation{"b": 2}}}, held)

	got, held = holdTargets(nodes, nil, []*structs.Job{other})
	must.Eq(t, nodes, got)
	must.Nil(t, held)
}

// A model with a step-time fit of its own is read on its own curve; one
// measured at a single count, and an estimate, on the job's table.
func TestByModel_OwnFit(t *testing.T) {
	half := 0.5
	j := &structs.Job{Spec: *spec(t, "resnet", 1, 3), Outlook: &structs.Outlook{Rates: map[string]structs.ModelRate{
		"A100": {PerGPU: 300, Serial: &half}, "V100": {PerGPU: 100}}}}
	got := byModel(j, []string{"A100", "T4", "V100"}, 3, map[priorKey]float64{{"resnet", "V100", "T4"}: 0.5})
	must.Eq(t, map[string][]float64{"A100": {300, 400, 450}, "V100": {100, 200, 300}, "T4": {50, 100, 150}}, got)
	must.Nil(t, byModel(j, []string{"A100"}, 3, nil), must.Sprint("one model: none"))
	must.Nil(t, byModel(&structs.Job{Spec: j.Spec}, []string{"A100", "V100"}, 3, nil), must.Sprint("nothing measured: none"))
}

// moveEndingAtOnce runs moveM where m's run ends as it is stopped, and
// the actuator's starts wait for the launchers ending names from then on.
// The planner reports to metrics where it is set. It returns the
// planner's store and actuator, and m's record as submitted.
func moveEndingAtOnce(t *testing.T, metrics Metrics, ending map[string]string) (*memStore, *fakeActuator, *structs.Job) {
	t.Helper()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 2), typedNode("v100", "V100", 2))
	p.Policies = NewFixedPolicyHost(mover{}, p.Logger)
	if metrics != nil {
		p.Metrics = metrics
	}
	applies := 0
	exec.onApply = func(j *structs.Job) {
		if j.Spec.Name == "m" {
			applies++
		}
		if j.Spec.Name == "m" && applies == 2 { // the stop of the move
			exec.mu.Lock()
			exec.done["m"] = 0 // its run ends as it is stopped
			exec.ending = ending
			exec.mu.Unlock()
		}
	}
	return st, exec, moveM(t, p, exec, now)
}

// moveM runs two rounds of p under the mover policy on one node of two
// A100s and one of two V100s: the first starts blocker on the A100s and m
// on the V100s; blocker ends; the second moves m to the A100s. It returns
// m's record as submitted.
func moveM(t *testing.T, p *Planner, exec *fakeActuator, now *time.Time) *structs.Job {
	t.Helper()
	ctx := context.Background()
	submit(t, p, now, spec(t, "blocker", 2, 2))
	m := submit(t, p, now, spec(t, "m", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"blocker:2", "m:2"}, exec.take())
	exec.mu.Lock()
	exec.done["blocker"] = 0
	exec.mu.Unlock()
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	return m
}

// planned is a test policy whose plan gives each job named in it (by the
// name its ID starts with) the allocation it names.
type planned struct{ plan *map[string]policy.Allocation }

func (planned) PluginInfo() policy.Info           { return policy.Info{Name: "planned"} }
func (planned) SetConfig(map[string]string) error { return nil }
func (p planned) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	out := &policy.Plan{Allocations: map[string]policy.Allocation{}, Policy: "planned"}
	for _, j := range s.Jobs {
		for name, a := range *p.plan {
			if strings.HasPrefix(j.ID, name+"-") {
				out.Allocations[j.ID] = a
			}
		}
	}
	return out, nil
}

// A move between models goes before the grows and starts of its round,
// whatever its totals (2 -> 3 GPUs here, a grow by them): when its stop
// fails, the job that was to grow onto the V100s it leaves waits for the
// next round. Before, g grew first, and the records then held 6 of the
// node's 4 V100s: every later round's snapshot was refused.
func TestRound_FailedMoveKeepsItsGPUsFromTheRound(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 4), typedNode("v100", "V100", 4))
	plan := map[string]policy.Allocation{"g": {"v100": 2}, "m": {"v100": 2}}
	p.Policies = NewFixedPolicyHost(planned{&plan}, p.Logger)
	g := submit(t, p, now, spec(t, "g", 2, 4))
	m := submit(t, p, now, spec(t, "m", 2, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"g:2", "m:2"}, exec.take())

	plan = map[string]policy.Allocation{"g": {"v100": 4}, "m": {"a100": 3}}
	exec.failTimes = map[string]int{"m": 2} // the stop and its retry
	*now = now.Add(time.Minute)
	err := p.Round(ctx)
	must.ErrorContains(t, err, "failed to stop job "+m.ID+" to move it from V100 to A100")
	must.ErrorContains(t, err, "grow of job "+g.ID+" waits for the next round: a change that was to free GPUs on node v100 failed (2 GPUs there are still held)")
	must.SliceEmpty(t, exec.take())
	must.Eq(t, map[string]int{"v100": 2}, state(t, st, g.ID).Allocation)
	must.Eq(t, map[string]int{"v100": 2}, state(t, st, m.ID).Allocation)
	must.Eq(t, structs.JobRunning, state(t, st, m.ID).State)

	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx), must.Sprint("the next round plans from what is held"))
	must.Eq(t, []string{"m:0", "g:4"}, exec.take())
}
