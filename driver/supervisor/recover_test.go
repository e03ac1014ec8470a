package supervisor

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// A task started by a driver that then dies keeps running; a new driver
// recovers it from the saved state and gets its exit code, whether the
// task exits after the recovery or before it.
func TestRunner_RecoverAfterDriverDeath(t *testing.T) {
	t.Parallel()
	for _, exitFirst := range []bool{false, true} {
		name := "task exits after recovery"
		if exitFirst {
			name = "task exits while no driver runs"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cmd := shCommand(t, "")
			cmd.Cgroup = testCgroupV1(t)
			release := filepath.Join(cmd.TaskDir, "release")
			cmd.Args[1] = `while [ ! -e ` + release + ` ]; do sleep 0.05; done; exit 7`
			saved := startInChild(t, cmd)
			must.Positive(t, saved.Pid)
			must.True(t, running(saved.Pid), must.Sprint("the task died with its driver"))
			must.True(t, running(saved.SupervisorPid), must.Sprint("the supervisor died with its driver"))

			// The state goes through Nomad's store as plain data.
			b, err := json.Marshal(saved)
			must.NoError(t, err)
			var st State
			must.NoError(t, json.Unmarshal(b, &st))

			if exitFirst {
				must.NoError(t, os.WriteFile(release, nil, 0o644))
				waitGone(t, []int{st.SupervisorPid}, 10*time.Second)
			}
			r, err := Recover(hclog.NewNullLogger(), testConfig(t), &st)
			must.NoError(t, err)
			t.Cleanup(r.Close)
			must.Eq(t, st.Pid, r.Pid())
			must.Eq(t, st, *r.State())
			if !exitFirst {
				must.NoError(t, os.WriteFile(release, nil, 0o644))
			}
			must.Eq(t, 7, wait(t, r, 10*time.Second).ExitCode)
		})
	}
}

// A supervisor killed while its task runs: the driver that waits learns
// the task is lost and its processes are killed; a driver that recovers
// it later gets ErrNoProcess and the same cleanup.
func TestRunner_SupervisorKilled(t *testing.T) {
	t.Parallel()
	t.Run("while the driver waits", func(t *testing.T) {
		t.Parallel()
		cmd, pidFile := treeCommand(t, testCgroupV1(t), "")
		r := start(t, cmd)
		pids := pidsIn(t, pidFile, 3)

		waited := make(chan error, 1)
		go func() {
			_, err := r.Wait(context.Background())
			waited <- err
		}()
		must.NoError(t, syscall.Kill(r.State().SupervisorPid, syscall.SIGKILL))
		select {
		case err := <-waited:
			must.ErrorIs(t, err, ErrNoProcess)
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return after the supervisor died")
		}
		waitGone(t, pids, 5*time.Second)
	})
	t.Run("while no driver runs", func(t *testing.T) {
		t.Parallel()
		cmd, pidFile := treeCommand(t, testCgroupV1(t), "")
		st := startInChild(t, cmd)
		pids := pidsIn(t, pidFile, 3)
		must.NoError(t, syscall.Kill(st.SupervisorPid, syscall.SIGKILL))
		waitGone(t, []int{st.SupervisorPid}, 5*time.Second)

		_, err := Recover(hclog.NewNullLogger(), testConfig(t), st)
		must.ErrorIs(t, err, ErrNoProcess)
		waitGone(t, pids, 5*time.Second)
	})
}

// A closed task cannot be recovered: Nomad destroyed it.
func TestRunner_RecoverClosedFails(t *testing.T) {
	t.Parallel()
	r := start(t, shCommand(t, "exit 0"))
	wait(t, r, 10*time.Second)
	st := r.State()
	r.Close()
	_, err := Recover(hclog.NewNullLogger(), testConfig(t), st)
	must.ErrorIs(t, err, ErrNoProcess)
	_, err = Recover(hclog.NewNullLogger(), testConfig(t), nil)
	must.Error(t, err)
}

// A task dir too deep for a socket address still works: the socket is
// reached through a descriptor of its directory.
func TestRunner_LongTaskDir(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "")
	cmd.TaskDir = filepath.Join(cmd.TaskDir, strings.Repeat("d", 60), strings.Repeat("e", 60))
	must.NoError(t, os.MkdirAll(cmd.TaskDir, 0o755))
	release := filepath.Join(cmd.TaskDir, "release")
	cmd.Args[1] = `while [ ! -e ` + release + ` ]; do sleep 0.05; done; exit 9`
	r := start(t, cmd)
	must.Greater(t, maxSocketPath, len(filepath.Join(r.State().Dir, socketName)))
	r2, err := Recover(hclog.NewNullLogger(), testConfig(t), r.State())
	must.NoError(t, err)
	must.NoError(t, os.WriteFile(release, nil, 0o644))
	must.Eq(t, 9, wait(t, r2, 10*time.Second).ExitCode)
}

// A task restarted in the same task dir does not see the last run's exit.
func TestRunner_RestartInSameDir(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "exit 1")
	r := start(t, cmd)
	must.Eq(t, 1, wait(t, r, 10*time.Second).ExitCode)
	cmd.Args[1] = "sleep 0.3; exit 2"
	r2 := start(t, cmd)
	must.Eq(t, 2, wait(t, r2, 10*time.Second).ExitCode)
}

// Close kills a task that still runs, its whole tree, and it cannot be
// recovered after.
func TestRunner_CloseKillsRunningTask(t *testing.T) {
	t.Parallel()
	cmd, pidFile := treeCommand(t, testCgroupV1(t), "trap '' TERM")
	r := start(t, cmd)
	pids := pidsIn(t, pidFile, 3)
	r.Close()
	waitGone(t, pids, 5*time.Second)
	_, err := Recover(hclog.NewNullLogger(), testConfig(t), r.State())
	must.ErrorIs(t, err, ErrNoProcess)
}
