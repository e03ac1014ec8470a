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
	// As Nomad stops a task: SIGTERM to torchrun, which passes it on.
	must.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("torchrun stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("torchrun did not stop within a minute of SIGTERM")
	}
	recs := readProgress(t, first)
	last := recs[len(recs)-1].Step
	saved := filepath.Join(ckpt, fmt.Sprintf("model-step%08d.pt", last))
	_, err := os.Stat(saved)
	must.NoError(t, err, must.Sprintf("no checkpoint of the last step %d", last))

	second := filepath.Join(dir, "second.jsonl")
	cmd = run(second, "TOTAL_STEPS="+strconv.Itoa(last+5),
		"SCHEDULEARN_RESUME_CHECKPOINT="+saved, "SCHEDULEARN_RESUME_STEP="+strconv.Itoa(last))
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
// the newest one the planner took, which is where a restart resumes: a
// planner cut off from the job (chaos seed 57: a partition) holds an older
// checkpoint than the job has saved since, and the example had pruned it,
// so the restarted job found no file and started over from step 1. Here a
// fake planner takes the reports until the first with a checkpoint, then
// answers 503; the example saves five more checkpoints, and one more on
// SIGTERM.
func TestExample_PruneKeepsTheCheckpointThePlannerTook(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	var mu sync.Mutex
	var took string // the checkpoint the planner took
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/jobs/j-1/resume":
			_, _ = w.Write([]byte(`{"checkpoint": "", "step": 0}`))
		case r.Method == http.MethodPost && r.URL.Path == "/v1/jobs/j-1/progress":
			var batch []struct {
				Checkpoint string `json:"checkpoint"`
			}
			if err := json.NewDecoder(r.Body).Decode(&batch); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			mu.Lock()
			defer mu.Unlock()
			if took != "" {
				http.Error(w, "away", http.StatusServiceUnavailable)
				return
			}
			for _, rep := range batch {
				if rep.Checkpoint != "" {
					took = rep.Checkpoint
				}
			}
			w.WriteHeader(http.StatusNoContent)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	progress := filepath.Join(dir, "run.jsonl")
	cmd := startTorchrunExample(t, 1, progress, "CHECKPOINT_DIR="+ckpt, "CHECKPOINT_EVERY=1", "STEP_SLEEP=0.05",
		"TOTAL_STEPS=100000", "SCHEDULEARN_ADDR="+srv.URL, "SCHEDULEARN_JOB_ID=j-1", "SCHEDULEARN_TOKEN=job-token")
	held := func() string {
		mu.Lock()
		defer mu.Unlock()
		return took
	}
	waitUntil(t, 3*time.Minute, func() error {
		if held() == "" {
			return errors.New("no checkpoint taken yet")
		}
		return nil
	})
	step, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(held()), "model-step"), ".pt"))
	must.NoError(t, err, must.Sprint(held()))
	// Five checkpoints more (one every 5 steps): the last three kept.
	waitUntil(t, 3*time.Minute, func() error {
		if recs := readProgress(t, progress); len(recs) == 0 || recs[len(recs)-1].Step < step+26 {
			return errors.New("not far enough yet")
		}
		return nil
	})
	must.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		t.Logf("torchrun stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("torchrun did not stop within a minute of SIGTERM")
	}
	_, err = os.Stat(held())
	must.NoError(t, err, must.Sprint("the checkpoint the planner holds was deleted"))
	files, err := filepath.Glob(filepath.Join(ckpt, "model-step*.pt"))
	must.NoError(t, err)
	must.Len(t, 4, files, must.Sprintf("the last three and the one the planner holds: %v", files))
}
