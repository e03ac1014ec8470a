package store_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/storetest"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func TestMemory_Conformance(t *testing.T) {
	storetest.Run(t, storetest.Harness{
		Open: func(t *testing.T) store.Store {
			s := store.NewMemory()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		// A reopened memory store is a new handle on the same data: the
		// old handle is closed, the records stay, as a restarted planner
		// would find them in a persistent store.
		Reopen: func(t *testing.T, s store.Store) store.Store {
			must.NoError(t, s.Close())
			return store.ReopenMemory(s.(*store.Memory))
		},
	})
}

// BenchmarkMemory_Lists reads what a simulated round and a submission read
// in a store of the whole Philly trace's size (82,000 jobs), 200 of them
// active: ListActiveJobs and ListJobsNamed cost the jobs they return, not
// the jobs stored (ListJobs for comparison).
func BenchmarkMemory_Lists(b *testing.B) {
	const n, live = 82_000, 200
	s := store.NewMemory()
	ctx := context.Background()
	for i := range n {
		j := storetest.NewJob(fmt.Sprintf("job-%06d", i), storetest.T0.Add(time.Duration(i)*time.Second))
		j.Spec.Name = j.ID
		if i < n-live {
			j.State = structs.JobComplete
		}
		must.NoError(b, s.CreateJob(ctx, j))
	}
	cases := []struct {
		name string
		list func() ([]*structs.Job, error)
		want int
	}{
		{"active", func() ([]*structs.Job, error) { return s.ListActiveJobs(ctx) }, live},
		{"named", func() ([]*structs.Job, error) { return s.ListJobsNamed(ctx, "job-000001") }, 1},
		{"all", func() ([]*structs.Job, error) { return s.ListJobs(ctx) }, n},
	}
	for _, tc := range cases {
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				jobs, err := tc.list()
				if err != nil || len(jobs) != tc.want {
					b.Fatalf("listed %d jobs: %v", len(jobs), err)
				}
			}
		})
	}
}
