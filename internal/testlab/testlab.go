// Package testlab starts real Nomad and Consul agents for tests: built from
// the pinned versions (make tools), on free loopback ports, with temporary
// data directories. Their logs are printed when a test fails, and the agents
// and everything they started are always stopped.
package testlab

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

var (
	buildOnce sync.Once
	buildOut  []byte
	buildErr  error

	consulOnce     sync.Once
	consulBuildOut []byte
	consulBuildErr error
)

// Root returns the repository root.
func Root(t testing.TB) string {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatalf("failed to get working dir: %v", err)
	}
	root, err := lab.FindRoot(wd)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// Build runs `make tools build` once per test binary, so the agents, the
// CLI and the plugins are current; make does nothing when they are.
func Build(t testing.TB) {
	t.Helper()
	buildOnce.Do(func() {
		cmd := exec.Command("make", "--no-print-directory", "tools", "build")
		cmd.Dir = Root(t)
		buildOut, buildErr = cmd.CombinedOutput()
	})
	if buildErr != nil {
		t.Fatalf("failed to build what the lab needs: %v\n%s", buildErr, buildOut)
	}
}

// Config is a lab config for one test: the default lab, on free ports, its
// state in the test's temporary directory.
func Config(t testing.TB) lab.Config {
	t.Helper()
	Build(t)
	cfg := lab.DefaultConfig(Root(t))
	ports, err := lab.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Ports = ports
	cfg.StateDir = filepath.Join(t.TempDir(), "lab")
	return cfg
}

// Start starts a lab with cfg (from Config, perhaps changed) and stops it
// when the test ends, printing the agents' logs if the test failed.
func Start(t testing.TB, cfg lab.Config) *lab.Lab {
	t.Helper()
	l, err := lab.Start(context.Background(), cfg)
	if err != nil {
		t.Fatalf("failed to start the lab: %v", err)
	}
	t.Cleanup(func() {
		DumpLog(t, "consul", l.Logs("consul"))
		if !cfg.ConsulOnly {
			DumpLog(t, "nomad", l.Logs("nomad"))
		}
		if err := l.Stop(); err != nil {
			t.Errorf("failed to stop the lab: %v", err)
		}
	})
	return l
}

// StartConsul starts a Consul dev agent alone (no Nomad), on free ports with
// its state in the test's temporary directory, and stops it when the test
// ends. It builds only the pinned Consul (once per test binary; make does
// nothing when it is current), not the CLI or the plugins.
func StartConsul(t testing.TB) *lab.Lab {
	t.Helper()
	return startConsul(t, false)
}

// StartConsulACL is StartConsul with Consul's ACLs on (default deny),
// bootstrapped with a management token (Lab.ACL) that Lab.ConsulClient
// uses; Lab.ConsulPolicy makes tokens with less.
func StartConsulACL(t testing.TB) *lab.Lab {
	t.Helper()
	return startConsul(t, true)
}

func startConsul(t testing.TB, acl bool) *lab.Lab {
	t.Helper()
	cfg := lab.DefaultConfig(Root(t))
	consulOnce.Do(func() {
		cmd := exec.Command("make", "--no-print-directory", cfg.ConsulBin)
		cmd.Dir = Root(t)
		consulBuildOut, consulBuildErr = cmd.CombinedOutput()
	})
	if consulBuildErr != nil {
		t.Fatalf("failed to build consul: %v\n%s", consulBuildErr, consulBuildOut)
	}
	ports, err := lab.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	cfg.Ports = ports
	cfg.StateDir = filepath.Join(t.TempDir(), "lab")
	cfg.ConsulOnly = true
	cfg.ACL = acl
	return Start(t, cfg)
}

// MultiHostConfig is a multi-host lab config for one test: the given nodes,
// the horovod driver with .cache/venv/bin, its state in the test's
// temporary directory. It skips the test where the machine cannot make
// network namespaces (not root, no iproute2); CI and the lab machines can.
func MultiHostConfig(t testing.TB, nodes []lab.NodeSpec) lab.MultiHostConfig {
	t.Helper()
	if err := lab.CheckNetns(); err != nil {
		t.Skipf("cannot run a multi-host lab here: %v", err)
	}
	Build(t)
	cfg := lab.DefaultMultiHostConfig(Root(t), 0)
	cfg.Nodes = nodes
	cfg.StateDir = filepath.Join(t.TempDir(), "lab")
	// The clients' warm interpreters carry the run's leak mark, as every
	// process the test starts does (their environment is only what the
	// config gives them).
	cfg.StandbyEnv = map[string]string{leakcheck.EnvName: leakcheck.Mark()}
	return cfg
}

// StartMultiHost starts a multi-host lab with cfg and stops it when the test
// ends, printing every host's agent logs if the test failed.
func StartMultiHost(t testing.TB, cfg lab.MultiHostConfig) *lab.MultiHost {
	t.Helper()
	c, err := lab.StartMultiHost(context.Background(), cfg)
	if err != nil {
		t.Fatalf("failed to start the lab: %v", err)
	}
	t.Cleanup(func() {
		for _, h := range c.Hosts {
			DumpLog(t, h.Name+"-consul", c.Logs(h, "consul"))
			DumpLog(t, h.Name+"-nomad", c.Logs(h, "nomad"))
		}
		if err := c.Stop(); err != nil {
			t.Errorf("failed to stop the lab: %v", err)
		}
	})
	return c
}
