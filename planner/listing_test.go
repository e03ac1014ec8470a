package planner

import (
	"context"
	"errors"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// listAllFails is a store that refuses to list every job ever stored.
type listAllFails struct{ *memStore }

func (listAllFails) ListJobs(context.Context) ([]*structs.Job, error) {
	return nil, errors.New("listed every job ever stored")
}

// A round reads only the active jobs (queued and running), and a
// submission with a deadline only the earlier jobs of its name, so neither
// costs time in every job ever submitted (the simulator replays 82,000).
func TestRound_ReadsOnlyActiveJobs(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	p.Store = listAllFails{st}
	a := submit(t, p, now, spec(t, "a", 4, 4))
	b := submit(t, p, now, spec(t, "b", 4, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:4"}, exec.take())

	exec.done["a"] = 0
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"b:4"}, exec.take())
	must.Eq(t, structs.JobComplete, state(t, st, a.ID).State)
	must.Eq(t, structs.JobRunning, state(t, st, b.ID).State)

	d := submit(t, p, now, deadlineSpec(t, "d", "1h", *now))
	must.Eq(t, "admission", state(t, st, d.ID).Events[1].Type)
}

// The round reads the in-memory store's records without copies, so it
// must copy one before anything changes it: an actuator that writes into
// the job it is given (as the Nomad actuator sets NomadJobID) and then
// fails leaves the stored record as it was.
func TestRound_DoesNotChangeSharedRecords(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	before := state(t, st, a.ID)
	exec.fail["a"] = true
	exec.onApply = func(j *structs.Job) {
		j.NomadJobID = "train-" + j.ID
		j.State = structs.JobRunning
		j.Events = nil
	}
	must.Error(t, p.Round(ctx))
	must.Eq(t, before, state(t, st, a.ID))
	shared, err := st.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	must.Eq(t, before, shared[0])

	// The next round applies it, on a copy, and records it.
	exec.onApply = nil
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:4"}, exec.take())
	must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
	must.Eq(t, before, shared[0], must.Sprint("a listed record stays what it was"))
}
