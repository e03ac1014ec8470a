package planner

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Row 14 of issue 13: the Idempotency-Key is kept with the job in the
// store, so a retry finds the first job after the planner restarted (the
// embedded store closed and opened again), and retries racing each other
// make one job.
func TestSubmit_IdempotentAcrossRestart(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "planner.db")
	s, err := boltstore.Open(path)
	must.NoError(t, err)
	p, _, _, _ := newPlanner(t, "fifo", node("n1", 8))
	p.Store = s
	key := &structs.Idempotency{Key: "k-1", Digest: "d-1"}

	// Four retries at once: one job.
	var wg sync.WaitGroup
	ids := make([]string, 4)
	replays := make([]bool, 4)
	for i := range ids {
		wg.Go(func() {
			j, replayed, err := p.Submit(ctx, spec(t, "a", 2, 2), "src", key)
			must.NoError(t, err)
			ids[i], replays[i] = j.ID, replayed
		})
	}
	wg.Wait()
	jobs, err := s.ListJobs(ctx)
	must.NoError(t, err)
	must.Len(t, 1, jobs)
	fresh := 0
	for i := range ids {
		must.Eq(t, jobs[0].ID, ids[i])
		if !replays[i] {
			fresh++
		}
	}
	must.Eq(t, 1, fresh, must.Sprint("one submission made the job, the others were replays"))
	must.NoError(t, s.Close())

	s, err = boltstore.Open(path)
	must.NoError(t, err)
	t.Cleanup(func() { s.Close() })
	p.Store = s
	j, replayed, err := p.Submit(ctx, spec(t, "a", 2, 2), "src", key)
	must.NoError(t, err)
	must.True(t, replayed)
	must.Eq(t, jobs[0].ID, j.ID)

	_, _, err = p.Submit(ctx, spec(t, "a", 2, 2), "src", &structs.Idempotency{Key: "k-1", Digest: "other"})
	must.True(t, errors.Is(err, structs.ErrIdempotencyMismatch), must.Sprint(err))
	jobs, err = s.ListJobs(ctx)
	must.NoError(t, err)
	must.Len(t, 1, jobs)
}
