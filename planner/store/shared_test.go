package store

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// sharedStore is a store that lists its active records without copies.
type sharedStore interface {
	Store
	SharedLister
}

// sharedStores are the stores that implement SharedLister, each opened
// afresh; reopen closes one and opens its data again (a new cache).
var sharedStores = []struct {
	name   string
	open   func(t *testing.T) sharedStore
	reopen func(t *testing.T, s sharedStore) sharedStore
}{
	{"memory", func(*testing.T) sharedStore { return NewMemory() }, nil},
	{"bolt", func(t *testing.T) sharedStore { return openBolt(t, filepath.Join(t.TempDir(), "state.db")) },
		func(t *testing.T, s sharedStore) sharedStore {
			path := s.(*Bolt).Path()
			must.NoError(t, s.Close())
			return openBolt(t, path)
		}},
}

// The shared list hands out the store's own records, which no write
// changes: a write stores a new record, which the next list returns.
func TestShared_ListIsNeverChanged(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			ctx := context.Background()
			j := newJob("a", t0)
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
			must.ErrorIs(t, s.UpdateJob(ctx, stale), ErrConflict)
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
		})
	}
}

// The active index is what a scan of every job finds, in the same order,
// whatever the writes (ties of submission time included); and, for a store
// with a file, what a new handle on the file lists.
func TestShared_ActiveIndexMatchesAScan(t *testing.T) {
	for _, st := range sharedStores {
		t.Run(st.name, func(t *testing.T) {
			s := st.open(t)
			ctx := context.Background()
			r := rand.New(rand.NewPCG(1, 2))
			states := []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed, structs.JobStopped}
			var ids []string
			ops := 1000
			if st.reopen != nil {
				ops = 300 // each write syncs the file
			}
			listed := func() []string {
				shared, err := s.ListActiveJobsShared(ctx)
				must.NoError(t, err)
				return jobIDs(shared)
			}
			for op := range ops {
				if len(ids) == 0 || r.IntN(3) == 0 {
					j := newJob(fmt.Sprintf("j%d", op), t0.Add(time.Duration(r.IntN(5))*time.Second))
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
			if st.reopen != nil {
				before := listed()
				s = st.reopen(t, s)
				must.Eq(t, before, listed(), must.Sprint("a new handle lists what the cache did"))
			}
		})
	}
}

// jobIDs are the IDs of jobs, in their order.
func jobIDs(jobs []*structs.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}
