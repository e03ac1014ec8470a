//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
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
	bin := venvBin(t)
	root := testlab.Root(t)
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	run := func(progress string, env ...string) *exec.Cmd {
		cmd := exec.Command(filepath.Join(bin, "torchrun"), "--standalone", "--nproc_per_node", "2",
			filepath.Join(root, "jobspecs", "examples", "train_elastic.py"), "--torchrun")
		cmd.Env = append(os.Environ(), append([]string{"PYTHONPATH=" + filepath.Join(root, "sdk", "python", "src"),
			"CHECKPOINT_DIR=" + ckpt, "CHECKPOINT_EVERY=100000", "STEP_SLEEP=0.2", "PROGRESS_FILE=" + progress,
			"SCHEDULEARN_ADDR=", "OMP_NUM_THREADS=1"}, env...)...)
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
