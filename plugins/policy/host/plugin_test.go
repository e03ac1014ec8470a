package host_test

import (
	"context"
	"errors"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/examples/largestfirst"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/shoenig/test/must"
)

// pluginDir returns a temporary plugin_dir holding the test binary as
// "misbehaving" (see TestMain) and the given shell scripts.
func pluginDir(t *testing.T, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	must.NoError(t, err)
	must.NoError(t, os.Symlink(self, filepath.Join(dir, "misbehaving")))
	for name, body := range scripts {
		must.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755))
	}
	return dir
}

func testLogger(t *testing.T) hclog.Logger {
	return hclog.New(&hclog.LoggerOptions{Name: t.Name(), Level: hclog.Warn, Output: hclog.DefaultOutput})
}

// TestExternal_LargestFirst builds the example plugin with go build and
// checks that, over gRPC, it plans exactly as it does in process.
func TestExternal_LargestFirst(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a plugin binary")
	}
	gobin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool on PATH")
	}
	dir := t.TempDir()
	build := exec.Command(gobin, "build", "-o", filepath.Join(dir, largestfirst.Name),
		"github.com/schedulearn/schedulearn/plugins/policy/examples/largestfirst/cmd/largest-first")
	out, err := build.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))

	reg := host.NewRegistry(dir, testLogger(t))
	names, err := reg.Names()
	must.NoError(t, err)
	want := append(slices.Collect(maps.Keys(host.Builtins())), largestfirst.Name)
	slices.Sort(want)
	must.Eq(t, want, names)

	inst, err := reg.Open(largestfirst.Name, nil)
	must.NoError(t, err)
	t.Cleanup(inst.Close)
	must.False(t, inst.Builtin())
	must.Eq(t, largestfirst.Name, inst.PluginInfo().Name)

	err = inst.SetConfig(map[string]string{"colour": "blue"})
	must.ErrorContains(t, err, `unknown config key "colour"`)
	must.ErrorContains(t, err, largestfirst.Name)

	local := largestfirst.New()
	for seed := range uint64(20) {
		s := randomSnapshot(rand.New(rand.NewPCG(seed, 11)))
		remote, err := inst.Plan(context.Background(), s)
		must.NoError(t, err)
		want, err := local.Plan(context.Background(), s)
		must.NoError(t, err)
		must.Eq(t, targets(s, want), targets(s, remote), must.Sprintf("seed %d", seed))
		must.Eq(t, want.Reasons, remote.Reasons)
	}
}

// TestExternal_LargeSnapshot sends the benchmark's snapshot (10,000 jobs,
// 1,000 nodes; several MiB of JSON) through a plugin and back.
func TestExternal_LargeSnapshot(t *testing.T) {
	reg := host.NewRegistry(pluginDir(t, nil), testLogger(t))
	inst, err := reg.Open("misbehaving", map[string]string{"mode": "ok"})
	must.NoError(t, err)
	t.Cleanup(inst.Close)

	s := benchSnapshot(1000, 10000)
	start := time.Now()
	remote, err := inst.Plan(context.Background(), s)
	must.NoError(t, err)
	t.Logf("one round over gRPC: %s", time.Since(start))
	want, err := builtin.NewElasticFIFO().Plan(context.Background(), s)
	must.NoError(t, err)
	must.Eq(t, targets(s, want), targets(s, remote))
}

func TestExternal_Failures(t *testing.T) {
	s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 8, 0)},
		Jobs: []policy.Job{queued("a", 1, 2, 4, 2)}}
	dir := pluginDir(t, map[string]string{
		"exits-at-start":   "echo broken >&2; exit 3",
		"never-handshakes": "exec sleep 30",
	})
	reg := host.NewRegistry(dir, testLogger(t),
		host.WithStartTimeout(time.Second), host.WithCallTimeout(500*time.Millisecond))

	t.Run("crash during plan, then relaunch", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", map[string]string{"mode": "crash", "marker": filepath.Join(t.TempDir(), "crashed")})
		must.NoError(t, err)
		defer inst.Close()
		_, err = inst.Plan(context.Background(), s)
		must.ErrorIs(t, err, host.ErrPluginExited)
		must.ErrorContains(t, err, "policy plugin misbehaving")
		// The next round launches it again, with its configuration.
		p, err := inst.Plan(context.Background(), s)
		must.NoError(t, err)
		must.Eq(t, A{"n1": 4}, p.Allocations["a"])
	})
	t.Run("hang past the context deadline", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", map[string]string{"mode": "hang"})
		must.NoError(t, err)
		defer inst.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		start := time.Now()
		_, err = inst.Plan(ctx, s)
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.ErrorContains(t, err, "policy plugin misbehaving")
		must.Less(t, 5*time.Second, time.Since(start))
	})
	t.Run("hang past the call timeout", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", map[string]string{"mode": "hang"})
		must.NoError(t, err)
		defer inst.Close()
		_, err = inst.Plan(context.Background(), s)
		must.ErrorIs(t, err, context.DeadlineExceeded)
		must.ErrorContains(t, err, "misbehaving")
	})
	t.Run("policy error", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", map[string]string{"mode": "error"})
		must.NoError(t, err)
		defer inst.Close()
		_, err = inst.Plan(context.Background(), s)
		must.ErrorContains(t, err, "boom")
		must.ErrorContains(t, err, "misbehaving")
	})
	t.Run("invalid plan is rejected", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", map[string]string{"mode": "invalid"})
		must.NoError(t, err)
		defer inst.Close()
		_, err = inst.Plan(context.Background(), s)
		must.ErrorContains(t, err, "policy misbehaving returned an invalid plan")
		v := policy.Violations(err)
		must.SliceNotEmpty(t, v)
		must.Eq(t, policy.RuleGangSize, v[len(v)-1].Rule)
	})
	t.Run("bad config", func(t *testing.T) {
		_, err := reg.Open("misbehaving", map[string]string{"colour": "blue"})
		must.ErrorContains(t, err, "failed to configure policy misbehaving: policy plugin misbehaving")
		must.ErrorContains(t, err, "unknown key colour")
	})
	t.Run("exits at start", func(t *testing.T) {
		_, err := reg.Open("exits-at-start", nil)
		must.ErrorContains(t, err, "failed to launch policy plugin exits-at-start")
	})
	t.Run("never handshakes", func(t *testing.T) {
		start := time.Now()
		_, err := reg.Open("never-handshakes", nil)
		must.ErrorContains(t, err, "failed to launch policy plugin never-handshakes")
		must.Less(t, 10*time.Second, time.Since(start))
	})
	t.Run("closed", func(t *testing.T) {
		inst, err := reg.Open("misbehaving", nil)
		must.NoError(t, err)
		inst.Close()
		_, err = inst.Plan(context.Background(), s)
		must.ErrorContains(t, err, "policy misbehaving is closed")
	})
}

func TestRegistry_Open(t *testing.T) {
	dir := pluginDir(t, nil)
	must.NoError(t, os.WriteFile(filepath.Join(dir, "not-executable"), nil, 0o644))
	must.NoError(t, os.WriteFile(filepath.Join(dir, builtin.FIFOName), []byte("#!/bin/sh\nexit 1\n"), 0o755))
	reg := host.NewRegistry(dir, nil)

	names, err := reg.Names()
	must.NoError(t, err)
	must.Eq(t, []string{"edf", "elastic-fifo", "fifo", "goodput", "goodput-hetero", "goodput-jct", "goodput-unaware", "misbehaving", "qoe", "round-robin", "tiresias"}, names)

	cases := []struct {
		name, policy string
		config       map[string]string
		err          string
	}{
		{name: "builtin wins over a file of its name", policy: builtin.FIFOName},
		{name: "builtin with config", policy: builtin.ElasticFIFOName, config: map[string]string{"resize_cooldown": "1m"}},
		{name: "builtin with bad config", policy: builtin.RoundRobinName, config: map[string]string{"x": "y"},
			err: "failed to configure policy round-robin"},
		{name: "unknown", policy: "nope", err: `failed to open policy "nope": not a builtin (edf, elastic-fifo, fifo, goodput, goodput-hetero, goodput-jct, goodput-unaware, qoe, round-robin, tiresias) nor a plugin`},
		{name: "not executable", policy: "not-executable", err: "is not an executable file"},
		{name: "path traversal", policy: "../misbehaving", err: "not a valid policy name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			inst, err := reg.Open(tc.policy, tc.config)
			if tc.err != "" {
				must.ErrorContains(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			defer inst.Close()
			must.True(t, inst.Builtin())
			must.Eq(t, tc.policy, inst.Name())
			s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0)}, Jobs: []policy.Job{queued("a", 1, 2, 2, 2)}}
			p, err := inst.Plan(context.Background(), s)
			must.NoError(t, err)
			must.Eq(t, A{"n1": 2}, p.Allocations["a"])
		})
	}

	_, err = host.NewRegistry("", nil).Open("misbehaving", nil)
	must.ErrorContains(t, err, "no plugin_dir is set")
	must.False(t, errors.Is(err, host.ErrPluginExited))
}
