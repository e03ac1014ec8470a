package metrics_test

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func mustSpec(t *testing.T) *jobspec.Spec {
	t.Helper()
	s, diags := jobspec.Parse([]byte("training \"a\" {\n command = \"python3\"\n gpus = 4\n}\n"), "a.hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return s
}

// storeStub answers every call with nothing.
type storeStub struct{}

var _ store.Store = storeStub{}

func (storeStub) CreateJob(context.Context, *structs.Job) error        { return nil }
func (storeStub) UpdateJob(context.Context, *structs.Job) error        { return nil }
func (storeStub) DeleteJob(context.Context, string, uint64) error      { return nil }
func (storeStub) GetJob(context.Context, string) (*structs.Job, error) { return nil, store.ErrNotFound }
func (storeStub) ListJobs(context.Context) ([]*structs.Job, error)     { return nil, nil }
func (storeStub) ListActiveJobs(context.Context) ([]*structs.Job, error) {
	return nil, nil
}
func (storeStub) ListJobsNamed(context.Context, string) ([]*structs.Job, error) {
	return nil, nil
}
func (storeStub) ListJobsPage(context.Context, structs.JobQuery) (*structs.JobPage, error) {
	return &structs.JobPage{}, nil
}
func (storeStub) JobByIdempotencyKey(context.Context, string) (*structs.Job, error) {
	return nil, store.ErrNotFound
}
func (storeStub) GetPolicy(context.Context) (*structs.PolicyState, error) {
	return nil, store.ErrNotFound
}
func (storeStub) PutPolicy(context.Context, *structs.PolicyState) error { return nil }
func (storeStub) Close() error                                          { return nil }
