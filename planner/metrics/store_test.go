package metrics_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/metrics"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// The timed store keeps the store's shared listing (store.SharedLister):
// the planner's round lists the active jobs through it, and where the
// wrapper hid it each round copied every active record (most of a round
// at 20,000 queued jobs). The records it lists are the store's own, and
// the listing is timed as list_active_jobs.
func TestStore_KeepsSharedListing(t *testing.T) {
	ctx := context.Background()
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"))
	must.NoError(t, err)
	t.Cleanup(func() { bolt.Close() })
	for name, s := range map[string]store.Store{"bolt": bolt, "memory": store.NewMemory()} {
		t.Run(name, func(t *testing.T) {
			r := metrics.New(apitest.NewBackend())
			wrapped := r.Store(s)
			sl, ok := wrapped.(store.SharedLister)
			must.True(t, ok, must.Sprint("the timed store hides the shared listing"))
			must.NoError(t, wrapped.CreateJob(ctx, &structs.Job{ID: "j1", State: structs.JobQueued}))
			got, err := sl.ListActiveJobsShared(ctx)
			must.NoError(t, err)
			want, err := s.(store.SharedLister).ListActiveJobsShared(ctx)
			must.NoError(t, err)
			must.Len(t, 1, got)
			must.True(t, got[0] == want[0], must.Sprint("a shared listing hands out the store's own record"))

			fams := scrape(t, r.Handler())
			m := find(fams[metrics.Namespace+"_"+metrics.NameStoreDuration], map[string]string{"op": "list_active_jobs"})
			must.NotNil(t, m)
			must.Eq(t, uint64(1), m.GetHistogram().GetSampleCount())
		})
	}
	_, ok := metrics.New(apitest.NewBackend()).Store(storeStub{}).(store.SharedLister)
	must.False(t, ok, must.Sprint("a store that cannot share its records does not claim to"))
}
