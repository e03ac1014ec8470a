//go:build e2e

package e2e

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// The chaos checker's steps invariant, on made-up progress (no agents): a
// drop past the last commit is fine right after a checkpoint a run was
// told to resume from or the planner held for the job (new workers of a
// launcher that lived ask it; issue 27), not older than the newest one
// held before; a start over from step 1 after a checkpoint was held, or a
// drop to a step no checkpoint holds, is a violation.
func TestChaosCheckSteps(t *testing.T) {
	t0 := time.Now().Add(-time.Hour)
	// steps are records from..to, one a second from at.
	steps := func(from, to int, at time.Time) []progressRecord {
		var out []progressRecord
		for s := from; s <= to; s++ {
			out = append(out, progressRecord{Step: s, Time: float64(at.Add(time.Duration(s-from)*time.Second).UnixNano()) / 1e9})
		}
		return out
	}
	run := func(parts ...[]progressRecord) []progressRecord {
		var out []progressRecord
		for _, p := range parts {
			out = append(out, p...)
		}
		return out
	}
	held := func(step int64, after time.Duration) chaosCheckpoint {
		return chaosCheckpoint{seen: t0.Add(after), step: step}
	}
	resumedEvent := []structs.Event{{Type: "resumed", Message: "resumed from the checkpoint of step 40 (/ckpt/j/model-step00000040.pt)"}}
	later := t0.Add(2 * time.Minute) // the drop, well after the checkpoints were seen

	for _, tc := range []struct {
		name   string
		recs   []progressRecord
		cps    []chaosCheckpoint
		events []structs.Event
		ok     bool
	}{
		{name: "steady", recs: steps(1, 50, t0), ok: true},
		{name: "a reset to the last commit", recs: run(steps(1, 23, t0), steps(21, 30, t0.Add(30*time.Second))), ok: true},
		{name: "a start over before any checkpoint", recs: run(steps(1, 30, t0), steps(1, 10, later)), ok: true},
		{name: "new workers after a checkpoint the planner held", recs: run(steps(1, 50, t0), steps(41, 60, later)),
			cps: []chaosCheckpoint{held(20, 20*time.Second), held(40, 40*time.Second)}, ok: true},
		{name: "a run the planner told to resume", recs: run(steps(1, 50, t0), steps(41, 60, later)),
			events: resumedEvent, ok: true},
		{name: "a start over from step 1 after a checkpoint was held", recs: run(steps(1, 50, t0), steps(1, 10, later)),
			cps: []chaosCheckpoint{held(40, 40*time.Second)}},
		{name: "a start over from step 1 after a run resumed from one", recs: run(steps(1, 50, t0), steps(1, 10, later)),
			events: resumedEvent, cps: []chaosCheckpoint{held(40, 40*time.Second)}},
		{name: "back to a checkpoint older than the newest held", recs: run(steps(1, 90, t0), steps(41, 60, later)),
			cps: []chaosCheckpoint{held(40, 40*time.Second), held(80, 80*time.Second)}},
		{name: "back to a step no checkpoint holds", recs: run(steps(1, 50, t0), steps(33, 60, later)),
			cps: []chaosCheckpoint{held(40, 40*time.Second)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &chaosChecker{r: &chaosRun{t: t}, reported: map[string]bool{},
				checkpoints: map[string][]chaosCheckpoint{"j": tc.cps}}
			c.checkSteps(&structs.Job{ID: "j", Events: tc.events}, tc.recs)
			if tc.ok {
				must.SliceEmpty(t, c.violations)
				return
			}
			must.Len(t, 1, c.violations)
			must.Eq(t, "steps", c.violations[0].invariant)
		})
	}
}
