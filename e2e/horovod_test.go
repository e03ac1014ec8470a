//go:build e2e

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// The example job runs the real horovodrun in elastic mode: two workers
// are discovered through Consul, started through their agents by the ssh
// shim, train with world size 2, and the job completes.
func TestHorovod_TrainsWithTwoWorkers(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	job := h.trainJob(t, "hvd-basic", trainOpts{workers: 2, steps: 30, stepSleep: "0.05", progress: progress})
	h.dumpTaskLogs(t, *job.ID)
	register(t, h.nomad, job)

	h.waitGroupStatus(t, *job.ID, "launcher", nomadapi.AllocClientStatusComplete, 1, 5*time.Minute)
	recs := readProgress(t, progress)
	must.SliceNotEmpty(t, recs)
	must.Eq(t, 30, recs[len(recs)-1].Step)
	must.Eq(t, []int{2}, worldSizes(recs))
	// Training over, the launcher tells the agents; the workers complete.
	h.waitGroupStatus(t, *job.ID, "worker", nomadapi.AllocClientStatusComplete, 2, time.Minute)
}

// runningJob starts the example job with a stop file and waits until it
// trains with the given number of workers.
func (h *horovodLab) runningJob(t *testing.T, id string, workers int, launcher string) (job *nomadapi.Job, progress, stop string) {
	t.Helper()
	dir := t.TempDir()
	progress, stop = filepath.Join(dir, "progress.jsonl"), filepath.Join(dir, "stop")
	job = h.trainJob(t, id, trainOpts{workers: workers, steps: 100000, stepSleep: "0.1", progress: progress, launcher: launcher,
		env: map[string]string{"STOP_FILE": stop, "CHECKPOINT": filepath.Join(dir, "checkpoint.pt")}})
	h.dumpTaskLogs(t, id)
	register(t, h.nomad, job)
	waitWorldSize(t, progress, workers*1, 5*time.Minute)
	return job, progress, stop
}

// stopTraining ends training at its next commit and waits for the job to
// complete.
func (h *horovodLab) stopTraining(t *testing.T, job, stop string) {
	t.Helper()
	must.NoError(t, os.WriteFile(stop, nil, 0o644))
	h.waitGroupStatus(t, job, "launcher", nomadapi.AllocClientStatusComplete, 1, 3*time.Minute)
	h.waitGroupStatus(t, job, "worker", nomadapi.AllocClientStatusRunning, 0, 2*time.Minute)
}

// assertMonotonic checks that rank 0's step counter never went back.
func assertMonotonic(t *testing.T, recs []progressRecord) {
	t.Helper()
	for i := 1; i < len(recs); i++ {
		must.True(t, recs[i].Step >= recs[i-1].Step,
			must.Sprintf("step went back from %d to %d (record %d)", recs[i-1].Step, recs[i].Step, i))
	}
}

// A running job grows from 2 to 3 workers and shrinks to 1 in place,
// the way the planner resizes jobs (drain.Client.Resize): the launcher
// process stays the same, the
// step counter never goes back, the world size goes 2 -> 3 -> 1, and the
// job ends successfully.
func TestHorovod_GrowAndShrinkInPlace(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	job, progress, stop := h.runningJob(t, "hvd-rescale", 2, "")
	id := *job.ID
	pid := h.launcherPID(t, id)
	ctx := context.Background()

	start := time.Now()
	added, err := grow(ctx, h.nomad, id, "worker", 1)
	must.NoError(t, err)
	must.Len(t, 1, added)
	grown := waitWorldSize(t, progress, 3, 5*time.Minute)
	t.Logf("grow: world size 3 at step %d, %.1fs after the grow started", grown.Step, time.Since(start).Seconds())
	must.Eq(t, pid, h.launcherPID(t, id))

	start = time.Now()
	removed, err := shrink(ctx, h.nomad, id, "worker", 2)
	must.NoError(t, err)
	must.Len(t, 2, removed)
	must.SliceContains(t, removed, added[0], must.Sprint("the newest worker has the highest index"))
	shrunk := waitWorldSize(t, progress, 1, 5*time.Minute)
	t.Logf("shrink: world size 1 at step %d, %.1fs after the shrink started", shrunk.Step, time.Since(start).Seconds())
	must.Eq(t, pid, h.launcherPID(t, id))

	// The drained workers stopped cleanly, not as failures.
	for _, a := range h.groupAllocs(t, id, "worker") {
		if a.ID == removed[0] || a.ID == removed[1] {
			must.Eq(t, nomadapi.AllocDesiredStatusStop, a.DesiredStatus)
			must.NotEq(t, nomadapi.AllocClientStatusFailed, a.ClientStatus)
		}
	}

	h.stopTraining(t, id, stop)
	recs := readProgress(t, progress)
	assertMonotonic(t, recs)
	must.Eq(t, []int{2, 3, 1}, worldSizes(recs))
}

// A Nomad client restart while training runs does not restart training:
// the driver recovers the launcher (same PID), training goes on, and the
// job completes.
func TestHorovod_ClientRestartKeepsTraining(t *testing.T) {
	cfg := horovodConfig(t)
	cfg.PersistentNomad = true
	h := startHorovodLab(t, cfg)
	job, progress, stop := h.runningJob(t, "hvd-restart", 2, "")
	id := *job.ID
	pid := h.launcherPID(t, id)
	launcherAlloc := h.groupAllocs(t, id, "launcher")[0].ID
	before := readProgress(t, progress)

	must.NoError(t, h.lab.RestartNomad(context.Background()))
	h.waitDriverHealthy(t)
	waitUntil(t, 3*time.Minute, func() error {
		recs := readProgress(t, progress)
		if recs[len(recs)-1].Step < before[len(before)-1].Step+20 {
			return errorf("training at step %d, waiting for %d", recs[len(recs)-1].Step, before[len(before)-1].Step+20)
		}
		return nil
	})
	must.Eq(t, pid, h.launcherPID(t, id))
	a, _, err := h.nomad.Allocations().Info(launcherAlloc, nil)
	must.NoError(t, err)
	must.Eq(t, nomadapi.AllocClientStatusRunning, a.ClientStatus)
	must.Eq(t, uint64(0), a.TaskStates["launcher"].Restarts)

	h.stopTraining(t, id, stop)
	recs := readProgress(t, progress)
	assertMonotonic(t, recs)
	must.Eq(t, []int{2}, worldSizes(recs))
}

// A worker allocation stopped without the drain (a failure to Horovod):
// training goes on with the others, and the job completes.
func TestHorovod_WorkerStoppedTrainingContinues(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	job, progress, stop := h.runningJob(t, "hvd-workerstop", 2, "")
	id := *job.ID
	workers := h.waitGroupStatus(t, id, "worker", nomadapi.AllocClientStatusRunning, 2, time.Minute)
	victim, _, err := h.nomad.Allocations().Info(workers[1].ID, nil)
	must.NoError(t, err)
	at := readProgress(t, progress)
	stoppedAt := at[len(at)-1].Step

	_, err = h.nomad.Allocations().Stop(victim, nil)
	must.NoError(t, err)
	waitUntil(t, 3*time.Minute, func() error {
		recs := readProgress(t, progress)
		last := recs[len(recs)-1]
		if last.Step < stoppedAt+20 {
			return errorf("training at step %d (world size %d), waiting for %d", last.Step, last.WorldSize, stoppedAt+20)
		}
		return nil
	})
	launcher := h.groupAllocs(t, id, "launcher")[0]
	must.Eq(t, nomadapi.AllocClientStatusRunning, launcher.ClientStatus)
	h.stopTraining(t, id, stop)
}

// A failing training command fails the launcher task with horovodrun's
// exit code, and the task events quote the end of its stderr.
func TestHorovod_FailingTrainingFailsTask(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	progress := filepath.Join(t.TempDir(), "progress.jsonl")
	job := h.trainJob(t, "hvd-fail", trainOpts{workers: 1, steps: 100, stepSleep: "0.05", progress: progress,
		env: map[string]string{"FAIL_AT_STEP": "5"}})
	h.dumpTaskLogs(t, *job.ID)
	register(t, h.nomad, job)

	failed := h.waitGroupStatus(t, *job.ID, "launcher", nomadapi.AllocClientStatusFailed, 1, 5*time.Minute)
	a, _, err := h.nomad.Allocations().Info(failed[0].ID, nil)
	must.NoError(t, err)
	var terminated *nomadapi.TaskEvent
	var driverMsg string
	for _, e := range a.TaskStates["launcher"].Events {
		if e.Type == nomadapi.TaskTerminated {
			terminated = e
		}
		if strings.HasPrefix(e.DisplayMessage, "Task failed:") {
			driverMsg = e.DisplayMessage
		}
	}
	must.NotNil(t, terminated, must.Sprintf("events:%s", taskEvents(a)))
	must.NotEq(t, 0, terminated.ExitCode)
	must.StrContains(t, driverMsg, "exit code 1", must.Sprintf("events:%s", taskEvents(a)))
	// The training's own message, as horovodrun relayed it, and horovodrun's.
	must.StrContains(t, driverMsg, "training failed: loss diverged at step 5")
	must.StrContains(t, driverMsg, "Exit code: 3")
	t.Logf("failure event: %s", driverMsg)
	_, _, err = h.nomad.Jobs().Deregister(*job.ID, true, nil)
	must.NoError(t, err)
}
