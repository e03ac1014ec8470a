package planner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// N3 of issue 28: finished job records were never deleted. The retention
// keeps the finished jobs that ended last (max_finished) and younger than
// max_age; it deletes no queued or running job, however old, nor a
// finished one with delivery work left, nor one written since it was
// listed.
func TestN3_RetentionDeletesOnlyFinishedJobs(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8))
	long := now.Add(-30 * 24 * time.Hour)
	put := func(id string, state structs.JobState, ended time.Time, edit func(*structs.Job)) {
		j := &structs.Job{ID: id, Spec: *spec(t, id, 1, 1), State: state, Submitted: long, Finished: ended}
		if edit != nil {
			edit(j)
		}
		must.NoError(t, st.CreateJob(ctx, j))
	}
	put("queued-old", structs.JobQueued, time.Time{}, nil)
	put("running-old", structs.JobRunning, time.Time{}, nil)
	put("expired", structs.JobComplete, now.Add(-48*time.Hour), nil)
	put("expired-no-end-time", structs.JobStopped, time.Time{}, nil) // ended before records had Finished: by its submission
	for i := range 5 {
		put(fmt.Sprintf("recent-%d", i), structs.JobFailed, now.Add(-time.Duration(i+1)*time.Hour), nil)
	}
	put("recent-delivering", structs.JobComplete, now.Add(-10*time.Hour), func(j *structs.Job) {
		j.Deliveries = []structs.Delivery{{Tier: structs.TierGoal, State: structs.DeliveryDone, Webhook: structs.WebhookPending}}
	})

	n, err := p.CollectFinished(ctx, Retention{MaxFinished: 3, MaxAge: 24 * time.Hour})
	must.NoError(t, err)
	must.Eq(t, 4, n) // expired, expired-no-end-time, recent-3, recent-4
	must.Eq(t, []string{"queued-old", "recent-0", "recent-1", "recent-2", "recent-delivering", "running-old"}, storedIDs(t, st))

	// Nothing left to delete; off, nothing is.
	n, err = p.CollectFinished(ctx, Retention{MaxFinished: 3, MaxAge: 24 * time.Hour})
	must.NoError(t, err)
	must.Eq(t, 0, n)
	n, err = p.CollectFinished(ctx, Retention{})
	must.NoError(t, err)
	must.Eq(t, 0, n)

	// A record written between the list and the delete is left for the
	// next collection.
	st.conflicts = 0
	racing := &raceOnDelete{memStore: st, id: "recent-2"}
	p.Store = racing
	n, err = p.CollectFinished(ctx, Retention{MaxFinished: 1})
	must.NoError(t, err)
	must.Eq(t, 1, n) // recent-1; recent-2 was written meanwhile
	must.Eq(t, []string{"queued-old", "recent-0", "recent-2", "recent-delivering", "running-old"}, storedIDs(t, st))
}

// raceOnDelete writes job id again just before its first DeleteJob, as
// another writer would.
type raceOnDelete struct {
	*memStore
	id   string
	done bool
}

func (s *raceOnDelete) DeleteJob(ctx context.Context, id string, version uint64) error {
	if id == s.id && !s.done {
		s.done = true
		j, err := s.GetJob(ctx, id)
		if err != nil {
			return err
		}
		if err := s.UpdateJob(ctx, j); err != nil {
			return err
		}
	}
	return s.memStore.DeleteJob(ctx, id, version)
}

func storedIDs(t *testing.T, st *memStore) []string {
	t.Helper()
	jobs, err := st.ListJobs(context.Background())
	must.NoError(t, err)
	ids := make([]string, len(jobs))
	for i, j := range jobs {
		ids[i] = j.ID
	}
	slices.Sort(ids)
	return ids
}
