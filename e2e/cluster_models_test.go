//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 29: a move between GPU models in the real system. On the 3-host
// lab (node1 one V100, node2 and node3 one A100 each) under a policy that
// moves jobs onto A100s (e2e/testdata/mover, an external plugin, as a
// heterogeneity-aware policy would for a job faster there): a job started
// on the V100 while the A100s are taken is moved when they free up: its
// run is stopped (its SIGTERM checkpoint saved and reported), it waits
// until that run has ended, and it starts on the A100 it was moved to
// (held for it meanwhile) from the checkpoint:
// its steps go on from there, not from 0. Its record, job status and
// events show both models and why it moved.
func TestClusterLab_MoveBetweenModels(t *testing.T) {
	root := testlab.Root(t)
	plugins := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(plugins, "mover"), "./e2e/testdata/mover")
	build.Dir = root
	out, err := build.CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))

	cl := startClusterLabWith(t, "mover", fmt.Sprintf("plugin_dir = %q\n", plugins), []lab.NodeSpec{
		{Name: "node1", Pool: "v100", GPU: lab.GPUSpec{Count: 1, Model: "Tesla V100-SXM2-16GB", MemoryMiB: 16384}},
		{Name: "node2", Pool: "a100", GPU: lab.GPUSpec{Count: 1}},
		{Name: "node3", Pool: "a100", GPU: lab.GPUSpec{Count: 1}},
	})
	dir := cl.dir
	p := cl.planner(t)

	// A blocker takes both A100s; the job starts on the V100.
	bProgress, bStop := filepath.Join(dir, "blocker.jsonl"), filepath.Join(dir, "blocker.stop")
	blocker := p.submit(cl.spec(t, "blocker", "a100", gpuRange(2, 2), bProgress, bStop))
	p.waitState(blocker, structs.JobRunning, 2*time.Minute)
	progress, stop := filepath.Join(dir, "fast.jsonl"), filepath.Join(dir, "fast.stop")
	t.Cleanup(func() { _ = os.WriteFile(stop, nil, 0o644) })
	// It checkpoints only on SIGTERM (CHECKPOINT_EVERY far beyond the
	// run), so the step it resumes from proves the move's stop saved.
	fast := p.submit(exampleSpec(t, dir, "fast", gpuRange(1, 1), "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.2", "PROGRESS_FILE": progress, "STOP_FILE": stop, "CHECKPOINT_EVERY": "100000"}))
	j := p.waitState(fast, structs.JobRunning, 2*time.Minute)
	must.Eq(t, map[string]int{"node1": 1}, cl.hostsOf(j))
	must.Eq(t, "Tesla V100-SXM2-16GB", j.GPUModel)
	waitUntil(t, 3*time.Minute, func() error {
		if pr := p.job(fast).Progress; pr == nil || pr.Step < 10 {
			return fmt.Errorf("fast has not reported step 10 yet")
		}
		return nil
	})

	// The A100s free up: the policy moves it.
	touch(t, bStop)
	p.waitState(blocker, structs.JobComplete, 3*time.Minute)
	var moved *structs.Job
	waitUntil(t, 4*time.Minute, func() error {
		j := p.job(fast)
		if j.State != structs.JobRunning || !strings.Contains(j.GPUModel, "A100") {
			return fmt.Errorf("fast is %s on %q (moving: %+v)", j.State, j.GPUModel, j.Moving)
		}
		moved = j
		return nil
	})
	hosts := cl.hostsOf(moved)
	must.MapLen(t, 1, hosts)
	must.MapNotContainsKey(t, hosts, "node1")
	must.Nil(t, moved.Moving)
	must.NotNil(t, moved.Resume, must.Sprint("started again without a checkpoint"))
	must.Greater(t, 9, moved.Resume.Step, must.Sprint("resumed from the checkpoint its stop saved"))
	must.SliceLen(t, 2, moved.Models)
	must.Eq(t, "Tesla V100-SXM2-16GB", moved.Models[0].Model)
	must.False(t, moved.Models[0].Until.IsZero())
	must.Eq(t, moved.GPUModel, moved.Models[1].Model)
	var events []string
	for _, e := range moved.Events {
		if e.Type == "gpu-model" {
			events = append(events, e.Message)
		}
	}
	must.SliceLen(t, 2, events, must.Sprintf("%q", events))
	must.StrHasPrefix(t, "moving from Tesla V100-SXM2-16GB to "+moved.GPUModel+": moved to the A100s", events[0])
	must.Eq(t, "moved from Tesla V100-SXM2-16GB to "+moved.GPUModel+": moved to the A100s, which have room for it", events[1])
	// It started on the A100 the move held for it, not where the policy
	// would place it again.
	must.Eq(t, "mover", moved.History[len(moved.History)-1].Policy)

	// Its steps go on from the checkpoint: the new run's first step (the
	// first record after its start on the A100) follows the resume step,
	// not 0.
	startedAt := moved.History[len(moved.History)-1].Time
	waitUntil(t, 3*time.Minute, func() error {
		for _, r := range readProgress(t, progress) {
			if r.Time < float64(startedAt.UnixNano())/1e9 {
				continue
			}
			if r.Step < int(moved.Resume.Step) || r.Step > int(moved.Resume.Step)+1 {
				return fmt.Errorf("the new run began at step %d, the checkpoint is of step %d", r.Step, moved.Resume.Step)
			}
			return nil
		}
		return fmt.Errorf("no record of the new run yet")
	})

	out2, code := p.cli("job", "status", fast)
	must.Zero(t, code, must.Sprint(out2))
	must.StrContains(t, out2, "GPU model    = "+moved.GPUModel)
	must.StrContains(t, out2, "GPU Models\n")
	must.StrContains(t, out2, "moved from Tesla V100-SXM2-16GB to "+moved.GPUModel)

	touch(t, stop)
	done := p.waitState(fast, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
}
