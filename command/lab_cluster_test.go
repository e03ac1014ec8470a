package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/planner/config"
)

// A lab planner's config is Terraform's with the run's data dir,
// deliveries, tokens (the read token too, as the one-host lab's, issue 28)
// and checkpoint_dirs (every host's Nomad allocations, each job delivering
// from its own only: nomad_alloc_dirs), and parses as a planner config: a
// job's model is delivered, and a job the cluster ended resumes from the
// checkpoint its script wrote in its allocation.
func TestClusterPlannerConfig(t *testing.T) {
	rendered := "bind_addr = \"10.213.1.2:4680\"\n"
	dirs := []string{"/tmp/slc-1/node1/nomad/alloc", "/tmp/slc-1/node2/nomad/alloc"}
	src := clusterPlannerConfig(rendered, "/run/lab/node1/planner", "/state/deliveries", labTokens{write: "secret", read: "reader"}, dirs)
	cfg, diags := config.Parse([]byte(src), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, "/run/lab/node1/planner", cfg.DataDir)
	must.Eq(t, "/state/deliveries", cfg.DeliveryDir)
	must.Eq(t, "secret", cfg.Token)
	must.Eq(t, "reader", cfg.ReadToken)
	must.Eq(t, dirs, cfg.CheckpointDirs)
	// N1 of issue 28: they are Nomad allocation trees, so each job
	// delivers only from its own allocations.
	must.Eq(t, dirs, cfg.NomadAllocDirs)

	// The e2e tests' planners (StartClusterPlanners) have no read token.
	cfg, diags = config.Parse([]byte(clusterPlannerConfig(rendered, "/d", "/e", labTokens{write: "secret"}, dirs)), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, "", cfg.ReadToken)
}

// The multi-host lab prints both tokens and the dashboard, through the
// proxy, as the one-host lab prints its own (issue 28: its write token
// alone, and no dashboard line).
func TestClusterReady_TokensAndDashboard(t *testing.T) {
	cl := &lab.MultiHost{NomadAddr: "http://10.213.1.2:4646", ConsulAddr: "10.213.1.2:8500",
		Hosts: []*lab.Host{{Name: "node1", Address: "10.213.1.2", Pool: "a", Servers: true, Planner: true}}}
	run := &labPlanners{tokens: labTokens{write: "w0", read: "r0"}, proxy: "http://10.213.1.1:4680",
		planners: []ClusterPlanner{{Host: "node1", Addr: "http://10.213.1.2:4680"}}}
	out := clusterReady(cl, "/src", run, []int{42})
	for _, want := range []string{
		"    Tokens:     w0 (writes and reads), r0 (reads only)\n",
		"    Dashboard:  http://10.213.1.1:4680/ui/   (metrics: http://10.213.1.1:4680/v1/metrics",
		"    export SCHEDULEARN_ADDR=http://10.213.1.1:4680 SCHEDULEARN_TOKEN=w0   # read only: SCHEDULEARN_TOKEN=r0\n",
		"http://10.213.1.2:4680     node1    pid 42       leading",
	} {
		must.StrContains(t, out, want)
	}
	// The one-host lab's lines are the same.
	must.StrContains(t, out, labAccess(run.proxy, run.tokens))
}
