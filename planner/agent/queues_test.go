package agent

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
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
