package planner

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A job the plan starts while a launcher of its previous run still runs
// (the actuator's ErrRunEnding) stays queued, without a round error or a
// failed start; its events say once what it waits for; it starts at the
// first round after that launcher has gone.
func TestRound_StartWaitsForThePreviousRunsLauncher(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	exec.ending = map[string]string{"a": "launcher allocation 1a2b3c4d on node2 is running"}
	a := submit(t, p, now, spec(t, "a", 2, 2))

	for range 3 {
		must.NoError(t, p.Round(ctx))
		j := state(t, st, a.ID)
		must.Eq(t, structs.JobQueued, j.State)
		must.Zero(t, j.GPUs())
	}
	must.SliceEmpty(t, exec.take(), must.Sprint("nothing is started"))
	var waiting []string
	for _, e := range state(t, st, a.ID).Events {
		if e.Type == EventWaiting {
			waiting = append(waiting, e.Message)
		}
	}
	must.Eq(t, []string{"not started yet: a launcher of the job's previous run has not stopped yet (launcher allocation 1a2b3c4d on node2 is running)"}, waiting)

	delete(exec.ending, "a")
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:2"}, exec.take())
	must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
}
