package command

import (
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/config"
)

// A lab planner's config is Terraform's with the run's data dir,
// deliveries, token and checkpoint_dirs (every host's Nomad allocations,
// each job delivering from its own only: nomad_alloc_dirs), and parses as a planner config: a job the cluster ended resumes from the
// checkpoint its script wrote in its allocation.
func TestClusterPlannerConfig(t *testing.T) {
	rendered := "bind_addr = \"10.213.1.2:4680\"\n"
	src := clusterPlannerConfig(rendered, "/run/lab/node1/planner", "/state/deliveries", "secret",
		[]string{"/tmp/slc-1/node1/nomad/alloc", "/tmp/slc-1/node2/nomad/alloc"})
	cfg, diags := config.Parse([]byte(src), "planner.hcl")
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, "/run/lab/node1/planner", cfg.DataDir)
	must.Eq(t, "/state/deliveries", cfg.DeliveryDir)
	must.Eq(t, "secret", cfg.Token)
	must.Eq(t, []string{"/tmp/slc-1/node1/nomad/alloc", "/tmp/slc-1/node2/nomad/alloc"}, cfg.CheckpointDirs)
	// N1 of issue 28: they are Nomad allocation trees, so each job
	// delivers only from its own allocations.
	must.Eq(t, []string{"/tmp/slc-1/node1/nomad/alloc", "/tmp/slc-1/node2/nomad/alloc"}, cfg.NomadAllocDirs)
}
