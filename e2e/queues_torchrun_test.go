//go:build e2e

package e2e

import (
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 16, under torchrun: torchrun jobs run side by side on the lab's
// one host, each launcher hosting its c10d store on a Nomad dynamic port
// of its own (before, every torchrun job's store took 29400, so a second
// one could not listen and its workers were pointed at the first job's
// store);
// preemption keeps a torchrun job's work as it does a horovodrun job's.
// Team a (nominal 0, borrowing) runs two torchrun jobs of 2 GPUs, "tlow"
// (priority 10) and "tkeep" (priority 50); team b (nominal 6) submits a
// 6-GPU torchrun job. The reclaim stops tlow, the lowest priority, with
// SIGTERM: it saves a checkpoint in its grace period (the SDK's
// on_sigterm) and is requeued, while tkeep trains on beside b, its
// launcher untouched. When b ends, tlow starts again, beside tkeep, and
// resumes from its checkpoint's step, not from 0.
func TestQueues_TorchrunSideBySidePreemptedResumes(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	p, ckpt := startQueuesPlanner(t, h, dir)
	spec := func(name, queue string, priority int, gpus string, extra map[string]string) string {
		return exampleSpecLauncher(t, dir, name, "torchrun", gpus, queueAttrs(queue, priority), queueJobEnv(t, dir, name, extra))
	}
	progressFile := func(name string) string { return filepath.Join(dir, name+".jsonl") }

	// tlow checkpoints only on SIGTERM (CHECKPOINT_EVERY far beyond the
	// run), so its resume step proves the hook saved.
	low := p.submit(spec("tlow", "a", 10, queueGPUs(2, 2, 2),
		map[string]string{"CHECKPOINT_DIR": filepath.Join(ckpt, "tlow"), "CHECKPOINT_EVERY": "100000"}))
	h.dumpTaskLogs(t, "train-"+low)
	keep := p.submit(spec("tkeep", "a", 50, queueGPUs(2, 2, 2), nil))
	for _, id := range []string{low, keep} {
		p.waitState(id, structs.JobRunning, 3*time.Minute)
		waitUntil(t, 5*time.Minute, func() error {
			if pr := p.job(id).Progress; pr == nil || pr.Step < 10 {
				return errorf("torchrun job %s has not reported step 10 yet", id)
			}
			return nil
		})
	}
	// Both train at once, each with its own store.
	lowPort := h.rdzvPort(t, p.job(low).NomadJobID)
	keepPort := h.rdzvPort(t, p.job(keep).NomadJobID)
	t.Logf("c10d stores: tlow on port %d, tkeep on port %d", lowPort, keepPort)
	must.NotEq(t, lowPort, keepPort)
	for _, name := range []string{"tlow", "tkeep"} {
		recs := readProgress(t, progressFile(name))
		must.Eq(t, 2, recs[len(recs)-1].WorldSize, must.Sprintf("%s's world size", name))
	}
	keepPID := h.launcherPID(t, p.job(keep).NomadJobID)

	// Team b submits within its nominal quota: 2 GPUs must come back.
	b := p.submit(spec("b", "b", 50, queueGPUs(6, 6, 2), nil))
	jb := p.waitState(b, structs.JobRunning, 3*time.Minute)
	waitWorldSize(t, progressFile("b"), 6, 5*time.Minute)

	// tlow was stopped and requeued, with who took its GPUs, and reported
	// the checkpoint it saved on SIGTERM.
	j := p.waitState(low, structs.JobQueued, time.Minute)
	must.Len(t, 1, j.Preemptions)
	pe := j.Preemptions[0]
	must.Eq(t, b, pe.Job)
	must.Eq(t, "b", pe.Queue)
	must.Eq(t, "a", pe.From)
	var saved int64
	waitUntil(t, time.Minute, func() error {
		pr := p.job(low).Progress
		if pr == nil || pr.CheckpointStep == 0 {
			return errorf("tlow reported no checkpoint")
		}
		saved = pr.CheckpointStep
		return nil
	})
	recs := readProgress(t, progressFile("tlow"))
	last := recs[len(recs)-1].Step
	t.Logf("tlow: stopped at step %d, its SIGTERM checkpoint at step %d", last, saved)
	// It trained 10 steps before b came and saved no other checkpoint.
	must.GreaterEq(t, 10, saved)
	// (SIGTERM may come after a step and before its progress record.)
	must.LessEq(t, int64(last)+1, saved, must.Sprint("a checkpoint of a step never trained"))

	// tkeep was left alone: no preemption, the same launcher, and it
	// trained on at world size 2 after b started.
	jk := p.job(keep)
	must.Eq(t, structs.JobRunning, jk.State)
	must.SliceEmpty(t, jk.Preemptions)
	must.Eq(t, keepPID, h.launcherPID(t, jk.NomadJobID), must.Sprint("tkeep's launcher was restarted"))
	after := firstRecordAfter(t, progressFile("tkeep"), jb.Started, 3*time.Minute)
	must.Eq(t, 2, after.WorldSize)

	// b ends: tlow starts again beside tkeep, on a store of its own, and
	// resumes from its checkpoint.
	touch(t, filepath.Join(dir, "b.stop"))
	p.waitState(b, structs.JobComplete, 3*time.Minute)
	j = p.waitState(low, structs.JobRunning, 3*time.Minute)
	must.NotNil(t, j.Resume)
	must.Eq(t, saved, j.Resume.Step)
	must.Eq(t, saved, j.Preemptions[0].ResumedStep)
	first := firstRecordAfter(t, progressFile("tlow"), j.Preemptions[0].Resumed, 5*time.Minute)
	t.Logf("tlow: resumed at step %d (checkpoint step %d)", first.Step, saved)
	must.Eq(t, int(saved)+1, first.Step, must.Sprint("tlow did not resume from its checkpoint"))
	resumedPort := h.rdzvPort(t, j.NomadJobID)
	t.Logf("c10d stores after the resume: tlow on port %d, tkeep on port %d", resumedPort, keepPort)
	must.NotEq(t, keepPort, resumedPort)
	must.Eq(t, keepPID, h.launcherPID(t, jk.NomadJobID))
	out, code := p.cli("job", "status", low)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, fmt.Sprintf("resumed from the checkpoint of step %d", saved))

	for _, name := range []string{"tlow", "tkeep"} {
		touch(t, filepath.Join(dir, name+".stop"))
	}
	for _, id := range []string{low, keep} {
		done := p.waitState(id, structs.JobComplete, 3*time.Minute)
		must.Eq(t, 0, *done.ExitCode)
	}
}

// rdzvPort is the port Nomad gave the running launcher of the torchrun
// job's Nomad job for its c10d store (the group's "rdzv" port), once the
// launcher's log says its store listens there.
func (h *horovodLab) rdzvPort(t *testing.T, job string) int {
	t.Helper()
	var alloc *nomadapi.Allocation
	waitUntil(t, 2*time.Minute, func() error {
		for _, a := range h.groupAllocs(t, job, "launcher") {
			if a.ClientStatus == nomadapi.AllocClientStatusRunning {
				full, _, err := h.nomad.Allocations().Info(a.ID, nil)
				alloc = full
				return err
			}
		}
		return errorf("%s has no running launcher", job)
	})
	port := 0
	for _, pm := range alloc.AllocatedResources.Shared.Ports {
		if pm.Label == "rdzv" {
			port = pm.Value
		}
	}
	must.Positive(t, port, must.Sprintf("%s's launcher has no rdzv port", job))
	want := fmt.Sprintf("c10d store listening on port %d\n", port)
	waitUntil(t, 2*time.Minute, func() error {
		r, err := h.nomad.AllocFS().Cat(alloc, "alloc/logs/launcher.stdout.0", nil)
		if err != nil {
			return err
		}
		defer r.Close()
		b, err := io.ReadAll(r)
		if err != nil {
			return err
		}
		if !strings.Contains(string(b), want) {
			return errorf("%s's launcher has not logged %q", job, strings.TrimSpace(want))
		}
		return nil
	})
	return port
}

// firstRecordAfter waits for the first progress record at path written
// after at, and returns it.
func firstRecordAfter(t *testing.T, path string, at time.Time, timeout time.Duration) progressRecord {
	t.Helper()
	after := float64(at.UnixNano()) / 1e9
	var first progressRecord
	waitUntil(t, timeout, func() error {
		for _, r := range readProgress(t, path) {
			if r.Time > after {
				first = r
				return nil
			}
		}
		return errorf("%s: no progress since %s", filepath.Base(path), at.Format(time.RFC3339Nano))
	})
	return first
}
