package agent

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// The config's queues reach the planner at start, and again on reload,
// unless the reload would leave a live job without its queue: then the
// reload fails, saying so, and the queues stay.
func TestQueues_StartAndReload(t *testing.T) {
	dir := t.TempDir()
	parse := func(src string) *config.Config {
		t.Helper()
		cfg, diags := config.Parse([]byte("data_dir = \""+filepath.Join(dir, "data")+"\"\n"+src), "planner.hcl")
		must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
		return cfg
	}
	a, err := New(parse("queue \"vision\" {\n  nominal = 4\n}\nqueue \"nlp\" {\n  nominal = 4\n}\n"), hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() {
		a.planner.Policies.Close()
		must.NoError(t, a.store.Close())
	})
	must.Eq(t, []string{"vision", "nlp"}, a.planner.Queues().Leaves())

	spec, diags := jobspec.Parse([]byte("training \"j\" {\n  command = \"python3\"\n  queue = \"nlp\"\n  gpus = 1\n}\n"), "j.hcl", time.Now())
	must.False(t, diags.HasErrors())
	must.NoError(t, a.store.CreateJob(context.Background(), &structs.Job{ID: "j-1", Spec: *spec, State: structs.JobQueued, Submitted: time.Now()}))

	err = a.Reload(parse("queue \"vision\" {\n  nominal = 8\n}\n"))
	must.ErrorIs(t, err, structs.ErrOrphanedJobs)
	must.StrContains(t, err.Error(), "j-1 (queue nlp)")
	must.Eq(t, []string{"vision", "nlp"}, a.planner.Queues().Leaves())

	must.NoError(t, a.Reload(parse("queue \"vision\" {\n  nominal = 2\n}\nqueue \"nlp\" {\n  nominal = 6\n}\nqueue \"audio\" {\n}\n")))
	must.Eq(t, []string{"vision", "nlp", "audio"}, a.planner.Queues().Leaves())
}

type oneNode struct{}

func (oneNode) Nodes(context.Context) ([]policy.Node, error) {
	return []policy.Node{{ID: "n1", Name: "n1", GPUModel: "A100", GPUs: 8}}, nil
}

// PUT /v1/queues's backend: the request's queue blocks become the
// leader's queues, parsed as the config's are (errors at the request's
// file:line:col), refused with ErrConflict, naming the jobs, where a live
// job would lose its queue; a standby refuses; the config file's queues
// apply again at the next reload.
func TestQueues_SetThroughAPI(t *testing.T) {
	dir := t.TempDir()
	cfg, diags := config.Parse([]byte("data_dir = \""+filepath.Join(dir, "data")+"\"\nqueue \"nlp\" {\n  nominal = 4\n}\n"), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
	a, err := New(cfg, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() {
		a.planner.Policies.Close()
		must.NoError(t, a.store.Close())
	})
	a.planner.Cluster = oneNode{}
	b := &backend{a: a}
	ctx := context.Background()

	_, err = b.SetQueues(ctx, "queue \"vision\" {\n}\n", "request.hcl")
	must.ErrorIs(t, err, api.ErrUnavailable, must.Sprint("a standby's queues are not the rounds'"))
	a.mu.Lock()
	a.leading = true
	a.mu.Unlock()

	spec, diags := jobspec.Parse([]byte("training \"j\" {\n  command = \"python3\"\n  queue = \"nlp\"\n  gpus = 1\n}\n"), "j.hcl", time.Now())
	must.False(t, diags.HasErrors())
	must.NoError(t, a.store.CreateJob(ctx, &structs.Job{ID: "j-1", Spec: *spec, State: structs.JobQueued, Submitted: time.Now()}))

	_, err = b.SetQueues(ctx, "queue \"nlp\" {\n  nominal = -1\n}\n", "request.hcl")
	var in *structs.InputError
	must.True(t, errors.As(err, &in))
	must.StrContains(t, err.Error(), "request.hcl:2:13: error: Invalid nominal")
	must.Eq(t, []string{"nlp"}, a.planner.Queues().Leaves())

	_, err = b.SetQueues(ctx, "queue \"vision\" {\n  nominal = 8\n}\n", "request.hcl")
	must.ErrorIs(t, err, api.ErrConflict)
	must.ErrorIs(t, err, structs.ErrOrphanedJobs)
	must.StrContains(t, err.Error(), "j-1 (queue nlp)")
	must.Eq(t, []string{"nlp"}, a.planner.Queues().Leaves(), must.Sprint("the previous queues stay"))

	qs, err := b.SetQueues(ctx, "queue \"nlp\" {\n  nominal = 2\n}\nqueue \"vision\" {\n  nominal = 6\n  weight = 2\n}\n", "request.hcl")
	must.NoError(t, err)
	must.Eq(t, []string{"nlp", "vision"}, a.planner.Queues().Leaves())
	must.Len(t, 2, qs)
	must.Eq(t, 2.0, qs[1].Weight)
	must.Eq(t, 6, *qs[1].GPUs[0].Nominal)

	// The config file's queues again at reload.
	must.NoError(t, a.Reload(cfg))
	must.Eq(t, []string{"nlp"}, a.planner.Queues().Leaves())
}
