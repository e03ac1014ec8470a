package planner

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	policyplugin "github.com/schedulearn/schedulearn/plugins/policy/plugin"
)

// TestMain lets the test binary serve as an external policy plugin that
// crashes in Plan (SCHEDULEARN_TEST_POLICY=crash).
func TestMain(m *testing.M) {
	if os.Getenv("SCHEDULEARN_TEST_POLICY") == "crash" {
		policyplugin.Serve(crashing{})
		return
	}
	os.Exit(leakcheck.Main(m))
}

type crashing struct{}

func (crashing) PluginInfo() policy.Info           { return policy.Info{Name: "crashy", Version: "0"} }
func (crashing) SetConfig(map[string]string) error { return nil }
func (crashing) Plan(context.Context, *policy.Snapshot) (*policy.Plan, error) {
	os.Exit(3) // the plugin process dies mid-round
	return nil, nil
}

// A plugin that crashes while planning does not stop scheduling: the round
// is planned by the last good policy, and the failure is reported.
func TestPolicyHost_CrashFallsBackToLastGood(t *testing.T) {
	dir := t.TempDir()
	self, err := os.Executable()
	must.NoError(t, err)
	script := fmt.Sprintf("#!/bin/sh\nSCHEDULEARN_TEST_POLICY=crash exec %q \"$@\"\n", self)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "crashy"), []byte(script), 0o755))

	host, err := NewPolicyHost(host.Policies{Registry: host.NewRegistry(dir, nil)}, hclog.NewNullLogger(), "fifo", nil, 10*time.Second)
	must.NoError(t, err)
	t.Cleanup(host.Close)
	snap := &policy.Snapshot{Now: time.Now(),
		Nodes: []policy.Node{{ID: "n1", GPUs: 4}},
		Jobs:  []policy.Job{{ID: "a", Submitted: time.Now(), GPUs: policy.GPURequest{Min: 2, Max: 2, PerWorker: 1}}}}

	plan, err := host.Plan(context.Background(), snap)
	must.NoError(t, err)
	must.Eq(t, "fifo", plan.Policy)

	_, err = host.Set("crashy", nil)
	must.NoError(t, err)
	plan, err = host.Plan(context.Background(), snap)
	must.NotNil(t, plan, must.Sprint("no plan: scheduling stopped with the crashed plugin"))
	must.Eq(t, "fifo", plan.Policy)
	must.ErrorContains(t, err, "kept the last good policy fifo")
	must.ErrorContains(t, host.LastError(), "crashy")
	name, _ := host.Active()
	must.Eq(t, "crashy", name, must.Sprint("the operator's choice stays active; it is retried next round"))
}

// A fixed host plans with the policy it was given, for good: the
// simulator's host, one policy per run.
func TestPolicyHost_Fixed(t *testing.T) {
	h := NewFixedPolicyHost(builtin.NewFIFO(), hclog.NewNullLogger())
	name, _ := h.Active()
	must.Eq(t, builtin.FIFOName, name)
	names, err := h.Available()
	must.NoError(t, err)
	must.Eq(t, []string{builtin.FIFOName}, names)
	_, err = h.Set(builtin.TiresiasName, nil)
	must.ErrorContains(t, err, "one policy for good")

	snap := &policy.Snapshot{Nodes: []policy.Node{{ID: "n1", GPUs: 4}},
		Jobs: []policy.Job{{ID: "a", GPUs: policy.GPURequest{Min: 2, Max: 2, PerWorker: 1}}}}
	plan, err := h.Plan(context.Background(), snap)
	must.NoError(t, err)
	must.Eq(t, 2, plan.Target(&snap.Jobs[0]).Total())
	h.Close()

	// An Instance is hosted as it is.
	i, err := host.NewRegistry("", nil).Open(builtin.TiresiasName, nil)
	must.NoError(t, err)
	defer i.Close()
	name, _ = NewFixedPolicyHost(i, hclog.NewNullLogger()).Active()
	must.Eq(t, builtin.TiresiasName, name)
}
