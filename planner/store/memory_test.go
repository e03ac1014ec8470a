package store

import (
	"context"
	"fmt"
	"math/rand/v2"
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

// The shared list hands out the store's own records, which no write
// changes: a write stores a new record, which the next list returns.
func TestMemory_SharedListIsNeverChanged(t *testing.T) {
	s := NewMemory()
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
// whatever the writes (ties of submission time included).
func TestMemory_ActiveIndexMatchesAScan(t *testing.T) {
	s := NewMemory()
	ctx := context.Background()
	r := rand.New(rand.NewPCG(1, 2))
	states := []structs.JobState{structs.JobQueued, structs.JobRunning, structs.JobComplete, structs.JobFailed, structs.JobStopped}
	var ids []string
	for op := range 1000 {
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
		shared, err := s.ListActiveJobsShared(ctx)
		must.NoError(t, err)
		var got []string
		for _, j := range shared {
			got = append(got, j.ID)
		}
		must.Eq(t, want, got, must.Sprintf("after op %d", op))
	}
}
