package store

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

func memoryHarness() harness {
	return harness{
		open: func(t *testing.T) Store {
			s := NewMemory()
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		// A reopened memory store is a new handle on the same data: the
		// old handle is closed, the records stay, as a restarted planner
		// would find them in a persistent store.
		reopen: func(t *testing.T, s Store) Store {
			m := s.(*Memory)
			must.NoError(t, s.Close())
			return &Memory{db: m.db}
		},
	}
}

func TestMemory_Conformance(t *testing.T) {
	runConformance(t, memoryHarness())
}

// BenchmarkMemory_Lists reads what a simulated round and a submission read
// in a store of the whole Philly trace's size (82,000 jobs), 200 of them
// active: ListActiveJobs and ListJobsNamed cost the jobs they return, not
// the jobs stored (ListJobs for comparison).
func BenchmarkMemory_Lists(b *testing.B) {
	const n, live = 82_000, 200
	s := NewMemory()
	ctx := context.Background()
	for i := range n {
		j := newJob(fmt.Sprintf("job-%06d", i), t0.Add(time.Duration(i)*time.Second))
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
