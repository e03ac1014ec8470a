//go:build e2e

package e2e

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/testlab"
)

// Issue 16: the example under torchrun (real torchrun, two workers, on
// loopback; the lab test TestQueues_ReclaimShrinksStopsAndResumes covers
// horovodrun through the planner) saves a checkpoint when SIGTERM stops it
// (the SDK's on_sigterm), and started again with the planner's
// SCHEDULEARN_RESUME_CHECKPOINT and _STEP it goes on from that step, not
// from 0.
func TestExample_TorchrunSavesOnSIGTERMAndResumes(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	run := func(progress string, env ...string) *exec.Cmd {
		return startTorchrunExample(t, 2, progress, append([]string{"CHECKPOINT_DIR=" + ckpt, "CHECKPOINT_EVERY=100000",
			"STEP_SLEEP=0.2", "SCHEDULEARN_ADDR="}, env...)...)
	}

	first := filepath.Join(dir, "first.jsonl")
	cmd := run(first, "TOTAL_STEPS=100000")
	waitUntil(t, 3*time.Minute, func() error {
		if n := len(readProgress(t, first)); n < 15 {
			return fmt.Errorf("%d steps so far", n)
		}
		return nil
	})
	sigtermTorchrun(t, cmd)
	recs := readProgress(t, first)
	last := recs[len(recs)-1].Step
	saved := filepath.Join(ckpt, fmt.Sprintf("model-step%08d.pt", last))
	_, err := os.Stat(saved)
	must.NoError(t, err, must.Sprintf("no checkpoint of the last step %d", last))

	second := filepath.Join(dir, "second.jsonl")
	cmd = run(second, "TOTAL_STEPS="+strconv.Itoa(last+5),
		"SCHEDULEARN_RESUME_CHECKPOINT="+saved, "SCHEDULEARN_RESUME_STEP="+strconv.Itoa(last))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		must.NoError(t, err)
	case <-time.After(3 * time.Minute):
		t.Fatal("the resumed run did not end within 3 minutes") // the cleanup kills it
	}
	recs = readProgress(t, second)
	must.SliceNotEmpty(t, recs)
	must.Eq(t, last+1, recs[0].Step, must.Sprint("the restart did not resume from the checkpoint's step"))
	must.Eq(t, last+5, recs[len(recs)-1].Step)
}

// startTorchrunExample starts the example under real torchrun with procs
// workers on loopback (its output in progress.log), with env added to
// this process's; the test's cleanup kills what is left of it.
func startTorchrunExample(t *testing.T, procs int, progress string, env ...string) *exec.Cmd {
	t.Helper()
	bin := venvBin(t)
	root := testlab.Root(t)
	cmd := exec.Command(filepath.Join(bin, "torchrun"), "--standalone", "--nproc_per_node", strconv.Itoa(procs),
		filepath.Join(root, "jobspecs", "examples", "train_elastic.py"), "--torchrun")
	// Nothing of the test's own environment that the example or the SDK
	// reads: env sets what a test needs.
	cmd.Env = append(os.Environ(), append([]string{"PYTHONPATH=" + filepath.Join(root, "sdk", "python", "src"),
		"PROGRESS_FILE=" + progress, "OMP_NUM_THREADS=1", "CHECKPOINT=", "SCHEDULEARN_RESUME_CHECKPOINT=",
		"SCHEDULEARN_RESUME_STEP=", "SCHEDULEARN_JOB_ID=", "SCHEDULEARN_TOKEN=", "SCHEDULEARN_REPORT_TOKEN="}, env...)...)
	log, err := os.Create(progress + ".log")
	must.NoError(t, err)
	t.Cleanup(func() { log.Close() })
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	must.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
	})
	return cmd
}

// The example keeps its last three model checkpoints, and never deletes
// the one the planner holds, which is where a restart resumes: a planner
// cut off from the job (chaos seed 57: a partition) holds an older
// checkpoint than the job has saved since, and the example had pruned it,
// so the restarted job found no file and started over from step 1. Here a
// fake planner records the reports until the first with a checkpoint,
// then is away (503) while the example saves five more: none is deleted,
// as the planner cannot be asked which it holds. Back, it records the
// reports queued meanwhile, and the example is down to its last three.
func TestExample_PruneKeepsTheCheckpointThePlannerHolds(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	const (
		up = iota
		away
		back
	)
	var mu sync.Mutex
	phase := up
	var held string // the checkpoint the planner holds
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		switch {
		case phase == away:
			http.Error(w, "away", http.StatusServiceUnavailable)
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs/j-1/resume":
			_ = json.NewEncoder(w).Encode(map[string]any{"checkpoint": held, "step": 1})
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs/j-1/progress":
			var batch []struct {
				Checkpoint string `json:"checkpoint"`
			}
			if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			for _, rep := range batch {
				if rep.Checkpoint != "" {
					held = rep.Checkpoint
				}
			}
			if phase == up && held != "" {
				phase = away // after this batch
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	holds := func() (int, string) {
		mu.Lock()
		defer mu.Unlock()
		return phase, held
	}
	saved := func() []int {
		files, err := filepath.Glob(filepath.Join(ckpt, "model-step*.pt"))
		must.NoError(t, err)
		var steps []int
		for _, f := range files {
			steps = append(steps, checkpointStep(t, f))
		}
		return steps
	}
	progress := filepath.Join(dir, "run.jsonl")
	t.Cleanup(func() {
		if b, err := os.ReadFile(progress + ".log"); err == nil && t.Failed() {
			t.Logf("the example's output:\n%s", b)
		}
	})
	cmd := startTorchrunExample(t, 1, progress, "CHECKPOINT_DIR="+ckpt, "CHECKPOINT_EVERY=1", "STEP_SLEEP=0.05",
		"TOTAL_STEPS=100000", "SCHEDULEARN_ADDR="+srv.URL, "SCHEDULEARN_JOB_ID=j-1", "SCHEDULEARN_TOKEN=job-token")
	waitUntil(t, 3*time.Minute, func() error {
		if p, _ := holds(); p != away {
			return errors.New("no checkpoint recorded yet")
		}
		return nil
	})
	_, first := holds()
	firstStep := checkpointStep(t, first)
	// Five checkpoints more (one every 5 steps) while the planner is away:
	// none deleted, the one it holds among them.
	waitUntil(t, 3*time.Minute, func() error {
		if steps := saved(); steps[len(steps)-1] < firstStep+25 {
			return fmt.Errorf("checkpoints so far: %v", steps)
		}
		return nil
	})
	_, err := os.Stat(first)
	must.NoError(t, err, must.Sprint("the checkpoint the planner holds was deleted while it was away"))
	steps := saved()
	for i := 1; i < len(steps); i++ {
		must.Eq(t, steps[i-1]+5, steps[i], must.Sprintf("a checkpoint was deleted while the planner was away: %v", steps))
	}

	// Back: it records what was queued (it then holds a later one), and
	// the example is down to its last three again.
	mu.Lock()
	phase = back
	mu.Unlock()
	waitUntil(t, 3*time.Minute, func() error {
		_, now := holds()
		if steps := saved(); now == first || len(steps) != 3 {
			return fmt.Errorf("the planner holds %s; checkpoints %v", filepath.Base(now), steps)
		}
		return nil
	})
	_, err = os.Stat(first)
	must.True(t, errors.Is(err, os.ErrNotExist), must.Sprintf("the checkpoint the planner no longer holds was kept: %v", err))

	sigtermTorchrun(t, cmd)
}

// sigtermTorchrun stops the example as Nomad stops a task (SIGTERM to
// torchrun, which passes it on) and waits a minute at most for it to end.
func sigtermTorchrun(t *testing.T, cmd *exec.Cmd) {
	t.Helper()
	must.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("torchrun stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("torchrun did not stop within a minute of SIGTERM")
	}
}

// checkpointStep is the step of the example's model checkpoint at path
// (model-step<step>.pt).
func checkpointStep(t *testing.T, path string) int {
	t.Helper()
	n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "model-step"), ".pt"))
	must.NoError(t, err, must.Sprint(path))
	return n
}
