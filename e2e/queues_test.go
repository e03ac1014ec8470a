//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 16, must-show: team a (nominal 0, borrowing) holds the whole idle
// cluster (8 GPUs) with an elastic job (2-4 GPUs, priority 50) and two
// low-priority jobs (2 GPUs each, priority 10), real horovodrun under
// Elastic FIFO. Team b (nominal 6)
// submits a 6-GPU job: a's elastic job shrinks in place to its min (same
// launcher PID), a's low-priority jobs are stopped with SIGTERM, save a
// checkpoint in their grace period (the SDK's on_sigterm hook) and are
// requeued; b runs within a round plus the drain time (logged). When b
// ends, the stopped jobs start again and resume from their checkpoints'
// steps, not from 0; job status shows each preemption, who took the GPUs,
// and the step it resumed from.
func TestQueues_ReclaimShrinksStopsAndResumes(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	p, ckpt := startQueuesPlanner(t, h, dir)
	env := func(name string, extra map[string]string) map[string]string { return queueJobEnv(t, dir, name, extra) }
	gpus, attrs := queueGPUs, queueAttrs
	progress := func(name string) []progressRecord { return readProgress(t, filepath.Join(dir, name+".jsonl")) }

	// The low-priority jobs first (FIFO starts them), then the elastic
	// one, which grows into the rest. The low ones checkpoint only on
	// SIGTERM (CHECKPOINT_EVERY far beyond the run), so their resume
	// steps prove the hook saved.
	type lowJob struct{ name, launcher, id string }
	lows := []*lowJob{{name: "alow1", launcher: "horovod"}, {name: "alow2", launcher: "horovod"}}
	for _, l := range lows {
		l.id = p.submit(exampleSpec(t, dir, l.name, gpus(2, 2, 2), attrs("a", 10),
			env(l.name, map[string]string{"CHECKPOINT_DIR": filepath.Join(ckpt, l.name), "CHECKPOINT_EVERY": "100000"})))
		p.waitState(l.id, structs.JobRunning, 2*time.Minute)
	}
	elastic := p.submit(exampleSpec(t, dir, "aelastic", gpus(2, 4, 2), attrs("a", 50), env("aelastic", nil)))
	waitUntil(t, 3*time.Minute, func() error {
		if g := p.job(elastic).GPUs(); g != 4 {
			return errorf("a's elastic job holds %d GPUs, want 4 (the idle cluster)", g)
		}
		return nil
	})
	waitWorldSize(t, filepath.Join(dir, "aelastic.jsonl"), 4, 4*time.Minute)
	h.dumpTaskLogs(t, p.job(elastic).NomadJobID)
	pid := h.launcherPID(t, p.job(elastic).NomadJobID)
	for _, l := range lows {
		waitUntil(t, 3*time.Minute, func() error {
			if pr := p.job(l.id).Progress; pr == nil || pr.Step < 10 {
				return errorf("a's low-priority job %s has not reported step 10 yet", l.name)
			}
			return nil
		})
	}

	// Team b submits within its nominal quota.
	submitted := time.Now()
	b := p.submit(exampleSpec(t, dir, "b", gpus(6, 6, 2), attrs("b", 50), env("b", nil)))
	jb := p.waitState(b, structs.JobRunning, 3*time.Minute)
	waitWorldSize(t, filepath.Join(dir, "b.jsonl"), 6, 4*time.Minute)
	training := time.Since(submitted)

	// a's elastic job shrank in place to its min: same launcher.
	je := p.job(elastic)
	must.Eq(t, 2, je.GPUs())
	waitUntil(t, 3*time.Minute, func() error {
		recs := progress("aelastic")
		if last := recs[len(recs)-1]; last.WorldSize != 2 {
			return errorf("a's elastic job trains at world size %d, want 2", last.WorldSize)
		}
		return nil
	})
	must.Eq(t, pid, h.launcherPID(t, je.NomadJobID), must.Sprint("the elastic job's launcher was restarted"))

	// a's low-priority jobs were stopped and requeued, with who took their
	// GPUs; each reported its SIGTERM checkpoint.
	saved := map[string]int64{}
	for _, l := range lows {
		j := p.waitState(l.id, structs.JobQueued, time.Minute)
		must.Len(t, 1, j.Preemptions)
		pe := j.Preemptions[0]
		must.Eq(t, b, pe.Job)
		must.Eq(t, "b", pe.Queue)
		must.Eq(t, "a", pe.From)
		must.True(t, pe.Resumed.IsZero())
		waitUntil(t, time.Minute, func() error {
			pr := p.job(l.id).Progress
			if pr == nil || pr.CheckpointStep == 0 {
				return errorf("a's low-priority job %s reported no checkpoint", l.name)
			}
			saved[l.name] = pr.CheckpointStep
			return nil
		})
		recs := progress(l.name)
		last := recs[len(recs)-1].Step
		t.Logf("%s (%s): stopped at step %d (last reported %d), its SIGTERM checkpoint at step %d", l.name, l.launcher, last, pe.Step, saved[l.name])
		must.Between(t, int64(last-5), saved[l.name], int64(last+1))
		out, code := p.cli("job", "status", l.id)
		must.Zero(t, code, must.Sprint(out))
		must.StrContains(t, out, "Preemptions")
		must.StrContains(t, out, b)
		must.StrContains(t, out, "<requeued>")
	}

	// b ran within a round plus the drain time. One round stops a's low
	// jobs, shrinks a's elastic job (the drain: its Apply returns once the
	// drained workers are gone) and starts b; the round's records share
	// its start time, so the times come from the planner's log, written
	// as each change is applied.
	round := jb.Started.Sub(jb.Submitted)
	lines := logLines(t, p.log)
	stopped, shrunk, started := logTime(t, lines, "job="+lows[1].id+" change=stop"),
		logTime(t, lines, "job="+elastic+" change=shrink"), logTime(t, lines, "job="+b+" change=start")
	drain := shrunk.Sub(stopped)
	toStart := started.Sub(jb.Submitted)
	t.Logf("team b's job: started %.1fs after submission: the round began after %.1fs (round interval 1s), the drain of a's elastic job took %.1fs, the rest of the round %.1fs; training at world size 6 after %.1fs",
		toStart.Seconds(), round.Seconds(), drain.Seconds(), (toStart - round - drain).Seconds(), training.Seconds())
	// Within a round, told by the planner's numbered rounds rather than by
	// the clock (a loaded machine stretches every figure above): b's start
	// is logged after its submission and before the second round that
	// began after it.
	queued := lineIndex(t, lines, 0, "job="+b+" gpus_min")
	next := lineIndex(t, lines, queued+1, "round started")
	startedAt := lineIndex(t, lines, queued+1, "job="+b+" change=start")
	if after := lineIndexOr(lines, next+1, "round started", len(lines)); startedAt > after {
		t.Fatalf("b's job was started after the second round that followed its submission (log lines %d, %d, %d)", queued, after, startedAt)
	}

	// b ends: a's stopped jobs start again and resume from their checkpoints.
	touch(t, filepath.Join(dir, "b.stop"))
	p.waitState(b, structs.JobComplete, 3*time.Minute)
	for _, l := range lows {
		j := p.waitState(l.id, structs.JobRunning, 2*time.Minute)
		must.NotNil(t, j.Resume)
		must.Eq(t, saved[l.name], j.Resume.Step)
		must.Eq(t, saved[l.name], j.Preemptions[0].ResumedStep)
		first := firstRecordAfter(t, filepath.Join(dir, l.name+".jsonl"), j.Preemptions[0].Resumed, 3*time.Minute)
		t.Logf("%s (%s): resumed at step %d (checkpoint step %d)", l.name, l.launcher, first.Step, saved[l.name])
		must.Eq(t, int(saved[l.name])+1, first.Step, must.Sprint("the job did not resume from its checkpoint"))
		out, code := p.cli("job", "status", l.id)
		must.Zero(t, code, must.Sprint(out))
		must.StrContains(t, out, fmt.Sprintf("resumed from the checkpoint of step %d", saved[l.name]))
	}

	for _, name := range []string{"alow1", "alow2", "aelastic"} {
		touch(t, filepath.Join(dir, name+".stop"))
	}
	for _, id := range []string{lows[0].id, lows[1].id, elastic} {
		done := p.waitState(id, structs.JobComplete, 3*time.Minute)
		must.Eq(t, 0, *done.ExitCode)
	}
}

// logLines is the planner's log at path, a line each.
func logLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	return strings.Split(string(b), "\n")
}

// lineIndex is the index of the first of lines from from on that contains
// s; the test fails without one.
func lineIndex(t *testing.T, lines []string, from int, s string) int {
	t.Helper()
	i := lineIndexOr(lines, from, s, -1)
	if i < 0 {
		t.Fatalf("no line with %q in the planner's log after line %d", s, from)
	}
	return i
}

// lineIndexOr is lineIndex, or def without such a line.
func lineIndexOr(lines []string, from int, s string, def int) int {
	for i := from; i < len(lines); i++ {
		if strings.Contains(lines[i], s) {
			return i
		}
	}
	return def
}

// logTime is the time of the first of the planner's log lines that
// contains s.
func logTime(t *testing.T, lines []string, s string) time.Time {
	t.Helper()
	line := lines[lineIndex(t, lines, 0, s)]
	ts, _, _ := strings.Cut(line, " ")
	at, err := time.Parse("2006-01-02T15:04:05.000Z07:00", ts)
	must.NoError(t, err, must.Sprintf("planner log line %q", line))
	return at
}

// startQueuesPlanner starts a planner under Elastic FIFO with queue a
// (nominal 0: it only borrows) and queue b (nominal 6), whose checkpoint
// dir (the jobs' checkpoints go under it) is ckpt; with
// E2E_KEEP_PLANNER_LOG set, a failed test's planner log is kept there.
func startQueuesPlanner(t *testing.T, h *horovodLab, dir string) (p *plannerProc, ckpt string) {
	t.Helper()
	ckpt = filepath.Join(dir, "ckpt")
	must.NoError(t, os.MkdirAll(ckpt, 0o755))
	p = startPlanner(t, h.lab, filepath.Join(dir, "data"), fmt.Sprintf(`
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
	t.Cleanup(func() {
		if keep := os.Getenv("E2E_KEEP_PLANNER_LOG"); keep != "" && t.Failed() {
			if b, err := os.ReadFile(p.log); err == nil {
				_ = os.WriteFile(keep, b, 0o644)
			}
		}
	})
	return p, ckpt
}

// queueJobEnv is the environment of the queue tests' example jobs: long
// runs at 0.2s a step that report to dir/name.jsonl and stop when
// dir/name.stop exists, with the worktree's SDK (schedulearn.resume,
// whatever the venv holds), and extra.
func queueJobEnv(t *testing.T, dir, name string, extra map[string]string) map[string]string {
	sdk := filepath.Join(testlab.Root(t), "sdk", "python", "src")
	e := map[string]string{"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.2", "PYTHONPATH": sdk,
		"PROGRESS_FILE": filepath.Join(dir, name+".jsonl"), "STOP_FILE": filepath.Join(dir, name+".stop")}
	for k, v := range extra {
		e[k] = v
	}
	return e
}

// queueGPUs is a jobspec's gpus block.
func queueGPUs(min, max, per int) string {
	return fmt.Sprintf("gpus {\n    min        = %d\n    max        = %d\n    per_worker = %d\n  }", min, max, per)
}

// queueAttrs are a jobspec's queue and priority.
func queueAttrs(queue string, priority int) string {
	return fmt.Sprintf("  queue    = %q\n  priority = %d", queue, priority)
}
