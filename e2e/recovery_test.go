//go:build e2e

package e2e

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// A rigid job (min = max = 2) whose worker is killed recovers without a
// human: Nomad replaces the worker (a new allocation, a new port, a new
// host name that horovodrun has not blacklisted), horovodrun, which cannot
// go on below min_np, takes it in, and training goes on from its last
// commit at world size 2 until it completes.
func TestRecovery_RigidJobWorkerKilledRecovers(t *testing.T) {
	h, p, id, j, progress, stop := startRecoveryJob(t, horovodConfig(t), "rigid", "gpus = 2")
	waitWorldSize(t, progress, 2, 3*time.Minute)
	// Past a few commits, so that the kill loses work to recover.
	var at progressRecord
	waitUntil(t, 2*time.Minute, func() error {
		recs := readProgress(t, progress)
		if at = recs[len(recs)-1]; at.Step < 25 {
			return errorf("at step %d, waiting for step 25", at.Step)
		}
		return nil
	})

	victim := runningWorkers(t, h, j.NomadJobID)[0]
	t.Logf("killing worker %s (%s) at step %d", victim.ID, victim.Name, at.Step)
	a, _, err := h.nomad.Allocations().Info(victim.ID, nil)
	must.NoError(t, err)
	must.NoError(t, h.nomad.Allocations().Signal(a, nil, "worker", "SIGKILL"))
	killedAt := time.Now()

	// Replaced: the victim failed, and another allocation of its group runs.
	waitUntil(t, 2*time.Minute, func() error {
		var failed, replaced bool
		for _, w := range h.groupAllocs(t, j.NomadJobID, victim.TaskGroup) {
			failed = failed || w.ID == victim.ID && w.ClientStatus == nomadapi.AllocClientStatusFailed
			replaced = replaced || w.ID != victim.ID && w.ClientStatus == nomadapi.AllocClientStatusRunning && w.Name == victim.Name
		}
		if !failed || !replaced {
			return errorf("victim failed %v, replaced %v", failed, replaced)
		}
		return nil
	})
	// Training goes on at world size 2, past where it was.
	waitUntil(t, 4*time.Minute, func() error {
		recs := readProgress(t, progress)
		last := recs[len(recs)-1]
		if last.WorldSize != 2 || last.Step < at.Step+20 || last.Time < float64(killedAt.Unix()) {
			return errorf("step %d at world size %d, waiting for world size 2 past step %d", last.Step, last.WorldSize, at.Step+20)
		}
		return nil
	})
	t.Logf("training again at world size 2 %s after the kill", time.Since(killedAt).Round(time.Second))
	assertNeverBeforeCommit(t, readProgress(t, progress))

	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
}

// A worker that cannot bind the port Nomad gave it (forced: the test holds
// every port of the client's dynamic range, which Nomad does not probe)
// fails, and is replaced by a new allocation once a port is free; the
// job trains and completes.
func TestRecovery_WorkerPortTakenIsReplaced(t *testing.T) {
	// Four dynamic ports, all held by the test at first.
	var held []net.Listener
	low := 31990
	for port := low; port < low+4; port++ {
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			t.Skipf("port %d is in use here: %v", port, err)
		}
		held = append(held, l)
	}
	release := func() {
		for _, l := range held {
			l.Close()
		}
		held = nil
	}
	t.Cleanup(release)
	span := fmt.Sprintf("%d-%d", low, low+3)
	cfg := horovodConfigWith(t, fmt.Sprintf("    dynamic_ports = %q", span),
		fmt.Sprintf("client {\n  min_dynamic_port = %d\n  max_dynamic_port = %d\n}", low, low+3))
	h, p, id, j, progress, stop := startRecoveryJob(t, cfg, "ports", "gpus = 1")

	var failed *nomadapi.Allocation
	waitUntil(t, 2*time.Minute, func() error {
		for _, w := range h.groupAllocs(t, j.NomadJobID, workerGroupOf(t, h, j.NomadJobID)) {
			if w.ClientStatus == nomadapi.AllocClientStatusFailed {
				failed, _, _ = h.nomad.Allocations().Info(w.ID, nil)
				return nil
			}
		}
		return errorf("no worker has failed yet")
	})
	events := taskEvents(failed)
	t.Logf("the worker that could not bind its port:%s", events)
	must.StrContains(t, events, "address already in use")
	release()

	waitWorldSize(t, progress, 1, 3*time.Minute)
	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
}

// startRecoveryJob starts a lab (cfg) and a FIFO planner, and a job of the
// example script that trains until its stop file exists; it returns once
// the job runs, with its progress and stop files.
func startRecoveryJob(t *testing.T, cfg lab.Config, name, gpus string) (h *horovodLab, p *plannerProc, id string, j *structs.Job, progress, stop string) {
	t.Helper()
	h = startHorovodLab(t, cfg)
	dir := t.TempDir()
	p = startPlanner(t, h.lab, filepath.Join(dir, "data"), `
policy {
  name = "fifo"
}
`)
	progress, stop = filepath.Join(dir, "progress.jsonl"), filepath.Join(dir, "stop")
	id = p.submit(exampleSpec(t, dir, name, gpus, "", map[string]string{
		"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.1", "PROGRESS_FILE": progress, "STOP_FILE": stop}))
	j = p.waitState(id, structs.JobRunning, 2*time.Minute)
	h.dumpTaskLogs(t, j.NomadJobID)
	return h, p, id, j, progress, stop
}

// runningWorkers lists the job's worker allocations that run.
func runningWorkers(t *testing.T, h *horovodLab, job string) []*nomadapi.AllocationListStub {
	t.Helper()
	allocs, _, err := h.nomad.Jobs().Allocations(job, true, nil)
	must.NoError(t, err)
	var out []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if strings.HasPrefix(a.TaskGroup, "worker-") && a.ClientStatus == nomadapi.AllocClientStatusRunning {
			out = append(out, a)
		}
	}
	must.SliceNotEmpty(t, out)
	return out
}

// workerGroupOf is the job's (one) worker group.
func workerGroupOf(t *testing.T, h *horovodLab, job string) string {
	t.Helper()
	nj, _, err := h.nomad.Jobs().Info(job, nil)
	must.NoError(t, err)
	for _, tg := range nj.TaskGroups {
		if strings.HasPrefix(*tg.Name, "worker-") {
			return *tg.Name
		}
	}
	t.Fatalf("job %s has no worker group", job)
	return ""
}

// assertNeverBeforeCommit checks that rank 0's steps never went back by
// more than a commit's worth (an elastic reset restores the last commit).
func assertNeverBeforeCommit(t *testing.T, recs []progressRecord) {
	t.Helper()
	high := 0
	for i, r := range recs {
		must.True(t, r.Step >= high-commitEvery,
			must.Sprintf("step went back from %d to %d (record %d), past the last commit", high, r.Step, i))
		high = max(high, r.Step)
	}
}

// A job that stops making progress (its script hangs at step 40) is marked
// stalled by the health watch, stopped and requeued (stalled_after and
// act_after at their 10 s minimum), and runs again from its checkpoint to
// completion. The planner plans it again at once, while the old launcher
// still commits and stops: the new launcher starts only after the old one
// has ended (one launcher a job, Nomad's task times say), and its events
// say what the start waited for when it did.
func TestRecovery_StalledJobRequeuedOneLauncherAtATime(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	must.NoError(t, os.MkdirAll(ckpt, 0o755))
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), fmt.Sprintf(`
checkpoint_dirs = [%q]
policy {
  name = "fifo"
}
recovery {
  stalled_after = "10s"
  act_after     = "10s"
}
`, ckpt))
	progress, mark := filepath.Join(dir, "progress.jsonl"), filepath.Join(dir, "stalled")
	id := p.submit(exampleSpec(t, dir, "stalls", "gpus = 1", "", map[string]string{
		"TOTAL_STEPS": "80", "STEP_SLEEP": "0.1", "PROGRESS_FILE": progress, "STALL_AT_STEP": "40", "STALL_MARK": mark,
		"CHECKPOINT_DIR": filepath.Join(ckpt, "stalls"), "CHECKPOINT_EVERY": "1"}))
	j := p.waitState(id, structs.JobRunning, 2*time.Minute)
	h.dumpTaskLogs(t, j.NomadJobID)
	started := time.Now()

	stalled := waitEvent(t, p, id, "stalled", "no progress report", started, 3*time.Minute)
	t.Logf("marked: %s", stalled.Message)
	requeued := waitEvent(t, p, id, structs.EventRequeued, "stalled", started, 2*time.Minute)
	t.Logf("requeued %s after it was marked: %s", requeued.Time.Sub(stalled.Time).Round(100*time.Millisecond), requeued.Message)
	done := p.waitState(id, structs.JobComplete, 4*time.Minute)
	must.SliceNotEmpty(t, resumedSteps(done), must.Sprintf("the second run did not resume from a checkpoint: %s", eventLines(done, started)))
	for _, e := range done.Events {
		if e.Type == planner.EventWaiting {
			t.Logf("the start waited: %s", e.Message)
		}
	}
	assertLaunchersApart(t, h.nomad, done.NomadJobID)
	must.Len(t, 2, launcherRuns(t, h.nomad, done.NomadJobID), must.Sprint("two runs: the stalled one and the one after"))
}
