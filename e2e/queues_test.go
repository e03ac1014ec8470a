//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 16, must-show: team a (nominal 0, borrowing) holds the whole idle
// cluster (8 GPUs) with an elastic job (2-6 GPUs, priority 50) and a
// low-priority job (2 GPUs, priority 10), real horovodrun under Elastic
// FIFO. Team b (nominal 6) submits a 6-GPU job: a's elastic job shrinks in
// place to its min (same launcher PID), a's low-priority job is stopped
// with SIGTERM, saves a checkpoint in its grace period (the SDK's
// on_sigterm hook) and is requeued; b runs within a round plus the drain
// time (logged). When b ends, the stopped job starts again and resumes from
// its checkpoint's step, not from 0; job status shows the preemption, who
// took the GPUs, and the step it resumed from.
func TestQueues_ReclaimShrinksStopsAndResumes(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	must.NoError(t, os.MkdirAll(ckpt, 0o755))
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), fmt.Sprintf(`
checkpoint_dirs = [%q]
policy {
  name = "elastic-fifo"
}
queue "a" {
  nominal = 0
}
queue "b" {
  nominal = 6
}
`, ckpt))
	// The worktree's SDK (schedulearn.resume), whatever the venv holds.
	sdk := filepath.Join(testlab.Root(t), "sdk", "python", "src")
	env := func(name string, extra map[string]string) map[string]string {
		e := map[string]string{"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.2", "PYTHONPATH": sdk,
			"PROGRESS_FILE": filepath.Join(dir, name+".jsonl"), "STOP_FILE": filepath.Join(dir, name+".stop")}
		for k, v := range extra {
			e[k] = v
		}
		return e
	}
	gpus := func(min, max, per int) string {
		return fmt.Sprintf("gpus {\n    min        = %d\n    max        = %d\n    per_worker = %d\n  }", min, max, per)
	}
	attrs := func(queue string, priority int) string {
		return fmt.Sprintf("  queue    = %q\n  priority = %d", queue, priority)
	}

	// The low-priority job first (FIFO starts it), then the elastic one,
	// which grows into the rest. The low one checkpoints only on SIGTERM
	// (CHECKPOINT_EVERY far beyond the run), so its resume step proves
	// the hook saved.
	low := p.submit(exampleSpec(t, dir, "alow", gpus(2, 2, 2), attrs("a", 10),
		env("alow", map[string]string{"CHECKPOINT_DIR": filepath.Join(ckpt, "alow"), "CHECKPOINT_EVERY": "100000"})))
	p.waitState(low, structs.JobRunning, 2*time.Minute)
	elastic := p.submit(exampleSpec(t, dir, "aelastic", gpus(2, 6, 2), attrs("a", 50), env("aelastic", nil)))
	waitUntil(t, 3*time.Minute, func() error {
		if g := p.job(elastic).GPUs(); g != 6 {
			return errorf("a's elastic job holds %d GPUs, want 6 (the idle cluster)", g)
		}
		return nil
	})
	waitWorldSize(t, filepath.Join(dir, "aelastic.jsonl"), 6, 4*time.Minute)
	waitWorldSize(t, filepath.Join(dir, "alow.jsonl"), 2, 3*time.Minute)
	pid := h.launcherPID(t, p.job(elastic).NomadJobID)
	waitUntil(t, 2*time.Minute, func() error {
		if pr := p.job(low).Progress; pr == nil || pr.Step < 10 {
			return errorf("a's low-priority job has not reported step 10 yet")
		}
		return nil
	})

	// Team b submits within its nominal quota.
	submitted := time.Now()
	b := p.submit(exampleSpec(t, dir, "b", gpus(6, 6, 2), attrs("b", 50), env("b", nil)))
	p.waitState(b, structs.JobRunning, time.Minute)
	running := time.Since(submitted)
	waitWorldSize(t, filepath.Join(dir, "b.jsonl"), 6, 4*time.Minute)
	training := time.Since(submitted)
	t.Logf("team b's job: running in the planner %.1fs after submission (round interval 1s), training (first step at world size 6) after %.1fs (drain and start included)",
		running.Seconds(), training.Seconds())
	must.Less(t, 10*time.Second, running, must.Sprint("b's job did not start within a round or two"))

	// a's elastic job shrank in place to its min: same launcher.
	must.Eq(t, 2, p.job(elastic).GPUs())
	waitUntil(t, 3*time.Minute, func() error {
		recs := readProgress(t, filepath.Join(dir, "aelastic.jsonl"))
		if last := recs[len(recs)-1]; last.WorldSize != 2 {
			return errorf("a's elastic job trains at world size %d, want 2", last.WorldSize)
		}
		return nil
	})
	must.Eq(t, pid, h.launcherPID(t, p.job(elastic).NomadJobID), must.Sprint("the elastic job's launcher was restarted"))

	// a's low-priority job was stopped and requeued, with who took its
	// GPUs; its SIGTERM checkpoint was reported.
	j := p.waitState(low, structs.JobQueued, time.Minute)
	must.Len(t, 1, j.Preemptions)
	pe := j.Preemptions[0]
	must.Eq(t, b, pe.Job)
	must.Eq(t, "b", pe.Queue)
	must.Eq(t, "a", pe.From)
	must.True(t, pe.Resumed.IsZero())
	var saved int64
	waitUntil(t, time.Minute, func() error {
		pr := p.job(low).Progress
		if pr == nil || pr.CheckpointStep == 0 {
			return errorf("a's low-priority job reported no checkpoint")
		}
		saved = pr.CheckpointStep
		return nil
	})
	before := readProgress(t, filepath.Join(dir, "alow.jsonl"))
	last := before[len(before)-1].Step
	t.Logf("a's low-priority job: stopped at step %d (reported %d), its SIGTERM checkpoint at step %d", last, pe.Step, saved)
	must.Between(t, int64(last-5), saved, int64(last+1))
	out, code := p.cli("job", "status", low)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, "Preemptions")
	must.StrContains(t, out, b)
	must.StrContains(t, out, "<requeued>")

	// b ends: a's stopped job starts again and resumes from the checkpoint.
	touch(t, filepath.Join(dir, "b.stop"))
	p.waitState(b, structs.JobComplete, 3*time.Minute)
	j = p.waitState(low, structs.JobRunning, 2*time.Minute)
	must.NotNil(t, j.Resume)
	must.Eq(t, saved, j.Resume.Step)
	must.Eq(t, saved, j.Preemptions[0].ResumedStep)
	resumedAt := float64(j.Preemptions[0].Resumed.UnixNano()) / 1e9
	var first progressRecord
	waitUntil(t, 3*time.Minute, func() error {
		for _, r := range readProgress(t, filepath.Join(dir, "alow.jsonl")) {
			if r.Time > resumedAt {
				first = r
				return nil
			}
		}
		return errorf("a's low-priority job has not trained since it started again")
	})
	t.Logf("a's low-priority job resumed at step %d (checkpoint step %d)", first.Step, saved)
	must.Eq(t, int(saved)+1, first.Step, must.Sprint("the job did not resume from its checkpoint"))
	out, code = p.cli("job", "status", low)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, fmt.Sprintf("resumed from the checkpoint of step %d", saved))

	for _, name := range []string{"alow", "aelastic"} {
		touch(t, filepath.Join(dir, name+".stop"))
	}
	for _, id := range []string{low, elastic} {
		done := p.waitState(id, structs.JobComplete, 3*time.Minute)
		must.Eq(t, 0, *done.ExitCode)
	}
}
