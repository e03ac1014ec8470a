package planner

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// watch is the health watch of the tests: the config's defaults.
var watch = HealthWatch{StalledAfter: 30 * time.Second, DegradedAfter: 30 * time.Second, ActAfter: 2 * time.Minute}

// How a running job's health is judged from its record alone.
func TestHealthWatch_Judge(t *testing.T) {
	t0 := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	reports := func(ws int, times ...int) *structs.Progress {
		pr := &structs.Progress{WorldSize: ws, Step: int64(len(times))}
		for i, s := range times {
			pr.History = append(pr.History, structs.ProgressReport{Time: at(s), Step: int64(i + 1), WorldSize: ws})
			pr.Updated, pr.Reports = at(s), int64(i+1)
		}
		return pr
	}
	job := func(gpus int, pr *structs.Progress, events ...structs.Event) *structs.Job {
		return &structs.Job{State: structs.JobRunning, Allocation: map[string]int{"n1": gpus},
			History: []structs.GPUChange{{Time: t0, GPUs: gpus}}, Progress: pr, Events: events}
	}
	unplaced := structs.Event{Time: at(10), Type: EventUnplaced, Message: "Nomad has not placed 1 of 2 workers on node n1"}
	cases := []struct {
		name     string
		job      *structs.Job
		now      int
		watching int
		state    structs.HealthState
		since    int
		reason   string
	}{
		{"never reported", job(4, nil), 3600, 0, structs.HealthOK, 0, ""},
		{"reports on time", job(4, reports(4, 5, 10, 15, 20)), 49, 0, structs.HealthOK, 0, ""},
		{"no report past the bound", job(4, reports(4, 5, 10, 15, 20)), 51, 0, structs.HealthStalled, 50,
			"no progress report for more than 30s (the last at step 4)"},
		{"a new leader waits for the reports", job(4, reports(4, 5)), 100, 90, structs.HealthOK, 0, ""},
		{"an epoch reporter within 3 gaps", job(4, reports(4, 300, 600, 900)), 900 + 899, 0, structs.HealthOK, 0, ""},
		{"an epoch reporter past 3 gaps", job(4, reports(4, 300, 600, 900)), 900 + 901, 0, structs.HealthStalled, 1800,
			"no progress report for more than 15m0s (the last at step 3)"},
		{"world size below the GPUs in the grace", job(4, reports(3, 5, 10, 20)), 29, 0, structs.HealthOK, 0, ""},
		{"world size below the GPUs past the grace", job(4, reports(3, 5, 10, 20)), 31, 0, structs.HealthDegraded, 30,
			"trains at world size 3 on 4 GPUs"},
		{"unplaced in the grace", job(4, nil, unplaced), 39, 0, structs.HealthOK, 0, ""},
		{"unplaced past the grace", job(4, nil, unplaced), 41, 0, structs.HealthDegraded, 40, unplaced.Message},
		{"unplaced since before a change", &structs.Job{State: structs.JobRunning, Allocation: map[string]int{"n1": 2},
			History: []structs.GPUChange{{Time: t0, GPUs: 4}, {Time: at(60), GPUs: 2}}, Events: []structs.Event{unplaced}},
			89, 0, structs.HealthOK, 0, ""},
		{"placed again", job(4, nil, unplaced, structs.Event{Time: at(20), Type: EventPlaced}), 100, 0, structs.HealthOK, 0, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			v := watch.judge(tc.job, at(tc.now), at(tc.watching))
			must.Eq(t, tc.state, v.health.State)
			must.Eq(t, tc.reason, v.health.Reason)
			if tc.state != structs.HealthOK {
				must.Eq(t, at(tc.since), v.health.Since)
			}
		})
	}
}

// watched is a planner with the health watch on, 3 retries, and jobs
// resuming from /ckpt; it publishes to the broker it returns.
func watched(t *testing.T, nodes ...policy.Node) (*Planner, *memStore, *fakeActuator, *time.Time, *events.Broker) {
	p, st, exec, now := newPlanner(t, "fifo", nodes...)
	w := watch
	p.Watch, p.Retries, p.CheckpointDirs = &w, 3, []string{"/ckpt"}
	br := events.New(256, *now)
	p.Events = br
	return p, st, exec, now, br
}

// round advances the clock by d and runs a round.
func round(t *testing.T, p *Planner, now *time.Time, d time.Duration) {
	t.Helper()
	*now = now.Add(d)
	must.NoError(t, p.Round(context.Background()))
}

// eventsOf is job id's events of the given types, "type: message".
func eventsOf(t *testing.T, st *memStore, id string, types ...string) []string {
	t.Helper()
	var out []string
	for _, e := range state(t, st, id).Events {
		for _, ty := range types {
			if e.Type == ty {
				out = append(out, e.Type+": "+e.Message)
			}
		}
	}
	return out
}

// Issue 27: a job that stops reporting is marked stalled within the bound
// (its record, an event, the stream), healthy again when it reports, and
// stopped and requeued from its checkpoint when it stays stalled for
// ActAfter, which counts against its retries.
func TestRound_StalledMarkedThenRequeued(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now, br := watched(t, node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 2, 2))
	round(t, p, now, 0)
	must.Eq(t, []string{"a:2"}, exec.take())
	*now = now.Add(5 * time.Second)
	must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 10, Checkpoint: "/ckpt/a/10.pt"}}))

	round(t, p, now, 25*time.Second) // 25 s without a report
	must.Nil(t, state(t, st, a.ID).Health)
	round(t, p, now, 10*time.Second) // 35 s
	j := state(t, st, a.ID)
	must.NotNil(t, j.Health)
	must.Eq(t, structs.HealthStalled, j.Health.State)
	must.Eq(t, "no progress report for more than 30s (the last at step 10)", j.Health.Reason)
	round(t, p, now, 5*time.Second) // said once
	must.Eq(t, []string{"stalled: stalled: no progress report for more than 30s (the last at step 10); the planner acts if it lasts 2m0s"},
		eventsOf(t, st, a.ID, structs.EventStalled))

	must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 20}}))
	round(t, p, now, time.Second)
	must.Nil(t, state(t, st, a.ID).Health)
	must.Eq(t, []string{"healthy: trains again on the GPUs it holds"}, eventsOf(t, st, a.ID, structs.EventHealthy))

	for range 15 { // 150 s without a report: stalled from 30 s, acted on at 150 s
		round(t, p, now, 10*time.Second)
	}
	must.Eq(t, []string{"a:0", "a:2"}, exec.take(), must.Sprint("stopped, then started again"))
	j = state(t, st, a.ID)
	must.Eq(t, structs.JobRunning, j.State)
	must.Eq(t, 1, j.Retries)
	must.Eq(t, &structs.Resume{Checkpoint: "/ckpt/a/10.pt", Step: 10}, j.Resume)
	requeued := eventsOf(t, st, a.ID, structs.EventRequeued)
	must.Len(t, 1, requeued)
	must.StrHasPrefix(t, "requeued: requeued (stalled, try 2 of 4): stalled for 2m0s: no progress report", requeued[0])

	evs, _, _, _ := br.Since(0, 256)
	var types []string
	for _, e := range evs {
		if e.Job == a.ID {
			types = append(types, e.Type)
		}
	}
	must.Eq(t, []string{structs.StreamJobSubmitted, structs.StreamJobStarted, structs.StreamJobHealth, structs.StreamJobHealth,
		structs.StreamJobHealth, structs.StreamJobRequeued, structs.StreamJobStarted, structs.StreamJobNote}, types)
}

// A job that never reported is not judged stalled: its script may not
// use the SDK.
func TestRound_SilentJobNotStalled(t *testing.T) {
	p, st, exec, now, _ := watched(t, node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 2, 2))
	for range 60 {
		round(t, p, now, 10*time.Second)
	}
	must.Eq(t, []string{"a:2"}, exec.take())
	must.Nil(t, state(t, st, a.ID).Health)
}

// Issue 27: a job whose reported world size stays below its GPUs, or
// that Nomad has not placed in full, is degraded, and after ActAfter is
// shrunk to what it trains on when it is elastic and that is at least its
// min, else requeued.
func TestRound_DegradedShrunkOrRequeued(t *testing.T) {
	cases := []struct {
		name     string
		min, max int
		world    int            // reported world size; 0: none
		unplaced map[string]int // Outcome.UnplacedGPUs
		applied  []string
		gpus     int
		requeued bool
	}{
		{"elastic at world size 3 of 4", 2, 4, 3, nil, []string{"a:3"}, 3, false},
		{"elastic below its min", 4, 6, 3, nil, []string{"a:0", "a:6"}, 6, true},
		{"rigid at world size 3 of 4", 4, 4, 3, nil, []string{"a:0", "a:4"}, 4, true},
		{"elastic with workers unplaced", 2, 4, 0, map[string]int{"n2": 2}, []string{"a:2"}, 2, false},
		{"rigid with workers unplaced", 4, 4, 0, map[string]int{"n2": 2}, []string{"a:0", "a:4"}, 4, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now, _ := watched(t, node("n1", 2), node("n2", 2), node("n3", 2))
			a := submit(t, p, now, spec(t, "a", tc.min, tc.max))
			round(t, p, now, 0)
			exec.take()
			if tc.unplaced != nil {
				exec.mu.Lock()
				exec.unplaced = map[string]string{"a": "Nomad has not placed 2 of 2 workers on node n2"}
				exec.unplacedGPUs = map[string]map[string]int{"a": tc.unplaced}
				exec.mu.Unlock()
			}
			report := func() {
				if tc.world > 0 {
					must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 1, WorldSize: tc.world}}))
				}
			}
			for range 5 { // 50 s: degraded
				round(t, p, now, 10*time.Second)
				report()
			}
			must.Eq(t, structs.HealthDegraded, structs.HealthOf(state(t, st, a.ID)))
			must.SliceEmpty(t, exec.take())
			for range 11 { // 160 s: acted on
				round(t, p, now, 10*time.Second)
				report()
				if tc.unplaced != nil && len(exec.applied) > 0 {
					exec.mu.Lock()
					exec.unplaced, exec.unplacedGPUs = nil, nil // Nomad runs what is left
					exec.mu.Unlock()
				}
			}
			must.Eq(t, tc.applied, exec.take())
			j := state(t, st, a.ID)
			must.Eq(t, structs.JobRunning, j.State)
			must.Eq(t, tc.gpus, j.GPUs())
			if tc.requeued {
				must.Eq(t, 1, j.Retries)
				must.Len(t, 1, eventsOf(t, st, a.ID, structs.EventRequeued))
				return
			}
			must.Eq(t, 0, j.Retries)
			shrinks := eventsOf(t, st, a.ID, string(policy.Shrink))
			must.Len(t, 1, shrinks)
			must.StrContains(t, shrinks[0], "(health watch: degraded for 2m0s: ")
		})
	}
}

// A stalled job whose retries are spent fails, saying so, and leaves the
// round's jobs: nothing starts it again.
func TestRound_StalledRetriesSpent(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now, _ := watched(t, node("n1", 4))
	p.Retries = 0
	a := submit(t, p, now, spec(t, "a", 2, 2))
	b := submit(t, p, now, spec(t, "b", 4, 4)) // waits for a's GPUs
	round(t, p, now, 0)
	must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 10}}))
	for range 16 {
		round(t, p, now, 10*time.Second)
	}
	must.Eq(t, []string{"a:2", "a:0", "b:4"}, exec.take())
	j := state(t, st, a.ID)
	must.Eq(t, structs.JobFailed, j.State)
	must.Eq(t, -1, *j.ExitCode)
	must.Nil(t, j.Health)
	failed := eventsOf(t, st, a.ID, string(structs.JobFailed))
	must.Len(t, 1, failed)
	must.StrContains(t, failed[0], "failed (stalled): stalled for 2m0s: no progress report for more than 30s")
	must.StrContains(t, failed[0], "the planner's 0 retries of it are spent")
	must.Eq(t, structs.JobRunning, state(t, st, b.ID).State)
}
