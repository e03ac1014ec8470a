package sim_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

// t0 is the wall-clock time of second 0 in the hand-made runs.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// sharedTraces is where the real traces are in the project's workspace;
// tests that need them skip without them.
const sharedTraces = "../../shared/traces"

func needTraces(t testing.TB) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(sharedTraces, "README.md")); err != nil {
		t.Skipf("the shared traces are not at %s", sharedTraces)
	}
}

// config is a small cluster with 60 s rounds, 30 s restarts, no Gantt.
func config(nodes, gpus int) sim.Config {
	c := sim.DefaultConfig()
	c.Nodes, c.GPUsPerNode = nodes, gpus
	return c
}

// rigid is a rigid job of duration seconds on gpus GPUs, submitted at sec.
func rigid(id string, sec, duration float64, gpus int) sim.JobSpec {
	return sim.JobSpec{ID: id, Submit: sec, GPUs: policy.GPURequest{Min: gpus, Max: gpus, PerWorker: 1},
		Model: &sim.Rigid{Duration: duration, GPUs: gpus}, Kind: "rigid"}
}

// run simulates specs with the builtin name.
func run(t testing.TB, cfg sim.Config, name string, specs ...sim.JobSpec) *sim.Result {
	t.Helper()
	r, err := sim.Run(context.Background(), cfg, t0, specs, host.Builtins()[name]())
	must.NoError(t, err)
	return r
}

// writeFile writes a file under a temporary folder and returns its path.
func writeFile(t *testing.T, name string, lines ...string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	writeFileAt(t, path, lines...)
	return path
}

// writeFileAt writes lines to path, making its folder.
func writeFileAt(t *testing.T, path string, lines ...string) {
	t.Helper()
	must.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	must.NoError(t, os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644))
}

// script is a policy that gives each job the allocation its table says
// from the given round on (1-based), and reports the rounds it saw.
type script struct {
	steps  map[int]map[string]policy.Allocation
	rounds int
	seen   []float64 // seconds of each round
}

func (p *script) PluginInfo() policy.Info           { return policy.Info{Name: "script"} }
func (p *script) SetConfig(map[string]string) error { return nil }
func (p *script) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p.rounds++
	p.seen = append(p.seen, s.Now.Sub(t0).Seconds())
	plan := &policy.Plan{Policy: "script", Allocations: map[string]policy.Allocation{}}
	for id, a := range p.steps[p.rounds] {
		for _, j := range s.Jobs {
			if j.ID == id {
				plan.Allocations[id] = a
			}
		}
	}
	if err := policy.Validate(s, plan); err != nil {
		return nil, fmt.Errorf("script round %d: %w", p.rounds, err)
	}
	return plan, nil
}
