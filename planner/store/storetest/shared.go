package storetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// sharedStore is a store that lists its active records without copies.
type sharedStore interface {
	store.Store
	store.SharedLister
}

// openShared opens a store of h that implements SharedLister, and skips
// the test where h's stores do not (Consul: every planner writes it, so
// none keeps records to share).
func openShared(t *testing.T, h Harness) sharedStore {
	s, ok := h.Open(t).(sharedStore)
	if !ok {
		t.Skip("the store lists no shared records (store.SharedLister)")
	}
	return s
}

// The shared list hands out the store's own records, which no write
// changes: a write stores a new record, which the next list returns.
func testSharedListIsNeverChanged(t *testing.T, h Harness) {
	s := openShared(t, h)
	ctx := context.Background()
	j := NewJob("a", T0)
	must.NoError(t, s.CreateJob(ctx, j))
	listed, err := s.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	must.Len(t, 1, listed)
	want := listed[0].Clone()
	want.Spec = listed[0].Spec.Clone()

	j.State, j.Allocation = structs.JobRunning, map[string]int{"n1": 2}
	must.NoError(t, s.UpdateJob(ctx, j))
	must.Eq(t, want, listed[0])
	again, err := s.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	must.Eq(t, j, again[0])
	j.Allocation["n1"] = 4 // the caller's record is not the store's
	must.Eq(t, 2, again[0].Allocation["n1"])
	j.Allocation["n1"] = 2

	stale := j.Clone()
	stale.Version--
	stale.State = structs.JobFailed
	must.ErrorIs(t, s.UpdateJob(ctx, stale), store.ErrConflict)
	again, err = s.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	must.Eq(t, j, again[0], must.Sprint("a refused write changes nothing"))

	j.State = structs.JobComplete
	must.NoError(t, s.UpdateJob(ctx, j))
	again, err = s.ListActiveJobsShared(ctx)
	must.NoError(t, err)
	must.SliceEmpty(t, again)
	must.NoError(t, s.Close())
	_, err = s.ListActiveJobsShared(ctx)
	must.Error(t, err)
}

// The active index is what a scan of every job finds, in the same order,
// whatever the writes (ties of submission time included); and what a new
// handle on the same data lists.
func testSharedIndexMatchesAScan(t *testing.T, h Harness) {
	s := openShared(t, h)
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	states := []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed, structs.JobStopped}
	var ids []string
	ops := 1000
	if h.SyncedWrites {
		ops = 300
	}
	listed := func() []string {
		shared, err := s.ListActiveJobsShared(ctx)
		must.NoError(t, err)
		return JobIDs(shared)
	}
	for op := range ops {
		if len(ids) == 0 || r.IntN(3) == 0 {
			j := NewJob(fmt.Sprintf("j%d", op), T0.Add(time.Duration(r.IntN(5))*time.Second))
			j.State = states[r.IntN(len(states))]
			must.NoError(t, s.CreateJob(ctx, j))
			ids = append(ids, j.ID)
		} else {
			j, err := s.GetJob(ctx, ids[r.IntN(len(ids))])
			must.NoError(t, err)
			j.State = states[r.IntN(len(states))]
			must.NoError(t, s.UpdateJob(ctx, j))
		}
		all, err := s.ListJobs(ctx)
		must.NoError(t, err)
		var want []string
		for _, j := range all {
			if j.State == structs.JobQueued || j.State == structs.JobRunning {
				want = append(want, j.ID)
			}
		}
		must.Eq(t, want, listed(), must.Sprintf("after op %d", op))
	}
	before := listed()
	s = h.Reopen(t, s).(sharedStore)
	must.Eq(t, before, listed(), must.Sprint("a new handle lists what the cache did"))
}

// JobIDs are the IDs of jobs, in their order.
func JobIDs(jobs []*structs.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
