package metrics

import (
	"context"
	"time"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// storeOps are the operations the store wrapper times (the op label).
var storeOps = []string{"create_job", "update_job", "delete_job", "get_job", "job_by_idempotency_key", "list_jobs", "list_active_jobs", "list_jobs_named", "list_jobs_page", "get_policy", "put_policy"}

// Store returns s with every operation's latency recorded in r. Where s
// lists the active jobs without copying them (store.SharedLister), so
// does the store it returns: the planner's round asks for it, and without
// it copies every active record each round (at 20,000 queued jobs, most
// of the round).
func (r *Recorder) Store(s store.Store) store.Store {
	t := &timedStore{s: s, r: r}
	if sl, ok := s.(store.SharedLister); ok {
		return &timedSharedStore{timedStore: t, sl: sl}
	}
	return t
}

type timedStore struct {
	s store.Store
	r *Recorder
}

// timedSharedStore is a timedStore of a store.SharedLister.
type timedSharedStore struct {
	*timedStore
	sl store.SharedLister
}

var _ store.SharedLister = (*timedSharedStore)(nil)

// ListActiveJobsShared is timed as list_active_jobs, the listing it
// stands for.
func (t *timedSharedStore) ListActiveJobsShared(ctx context.Context) ([]*structs.Job, error) {
	defer t.r.storeOp("list_active_jobs", time.Now())
	return t.sl.ListActiveJobsShared(ctx)
}

func (t *timedStore) CreateJob(ctx context.Context, j *structs.Job) error {
	defer t.r.storeOp("create_job", time.Now())
	return t.s.CreateJob(ctx, j)
}

func (t *timedStore) UpdateJob(ctx context.Context, j *structs.Job) error {
	defer t.r.storeOp("update_job", time.Now())
	return t.s.UpdateJob(ctx, j)
}

func (t *timedStore) DeleteJob(ctx context.Context, id string, version uint64) error {
	defer t.r.storeOp("delete_job", time.Now())
	return t.s.DeleteJob(ctx, id, version)
}

func (t *timedStore) GetJob(ctx context.Context, id string) (*structs.Job, error) {
	defer t.r.storeOp("get_job", time.Now())
	return t.s.GetJob(ctx, id)
}

func (t *timedStore) JobByIdempotencyKey(ctx context.Context, key string) (*structs.Job, error) {
	defer t.r.storeOp("job_by_idempotency_key", time.Now())
	return t.s.JobByIdempotencyKey(ctx, key)
}

func (t *timedStore) ListJobs(ctx context.Context) ([]*structs.Job, error) {
	defer t.r.storeOp("list_jobs", time.Now())
	return t.s.ListJobs(ctx)
}

func (t *timedStore) ListActiveJobs(ctx context.Context) ([]*structs.Job, error) {
	defer t.r.storeOp("list_active_jobs", time.Now())
	return t.s.ListActiveJobs(ctx)
}

func (t *timedStore) ListJobsNamed(ctx context.Context, name string) ([]*structs.Job, error) {
	defer t.r.storeOp("list_jobs_named", time.Now())
	return t.s.ListJobsNamed(ctx, name)
}

func (t *timedStore) ListJobsPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	defer t.r.storeOp("list_jobs_page", time.Now())
	return t.s.ListJobsPage(ctx, q)
}

func (t *timedStore) GetPolicy(ctx context.Context) (*structs.PolicyState, error) {
	defer t.r.storeOp("get_policy", time.Now())
	return t.s.GetPolicy(ctx)
}

func (t *timedStore) PutPolicy(ctx context.Context, p *structs.PolicyState) error {
	defer t.r.storeOp("put_policy", time.Now())
	return t.s.PutPolicy(ctx, p)
}

func (t *timedStore) Close() error { return t.s.Close() }
