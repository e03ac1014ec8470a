package driver

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	"github.com/schedulearn/schedulearn/internal/testcgroup"
)

// freshCgroupEnv, when set, makes this test binary the inner run of
// TestDriver_FreshCgroupTree: its value is the state of Nomad's cgroup tree
// to start from.
const freshCgroupEnv = "SCHEDULEARN_FRESH_CGROUP"

// The harness tier works on a machine where no Nomad client ever ran (#12):
// with Nomad's cgroup tree missing, and with it made but empty (the cpuset
// parent and share partition without cpus or mems, as Nomad's own test
// harness used to leave them, which refuses every process with ENOSPC on
// cgroup v1). Each
// case runs this test binary in a cgroup sandbox of its own, so the
// machine's tree (and a Nomad client using it) is not touched.
func TestDriver_FreshCgroupTree(t *testing.T) {
	if state := os.Getenv(freshCgroupEnv); state != "" {
		freshCgroupInner(t, state)
		return
	}
	t.Parallel()
	self, err := os.Executable()
	must.NoError(t, err)
	for _, state := range []string{"missing", "empty"} {
		t.Run(state, func(t *testing.T) {
			cmd := testcgroup.SandboxCommand(t, self, "-test.run=^TestDriver_FreshCgroupTree$", "-test.v", "-test.count=1")
			cmd.Env = append(os.Environ(), freshCgroupEnv+"="+state)
			out, err := cmd.CombinedOutput()
			t.Logf("inner run:\n%s", out)
			must.NoError(t, err)
			must.StrContains(t, string(out), "--- PASS: TestDriver_FreshCgroupTree")
		})
	}
}

func freshCgroupInner(t *testing.T, state string) {
	parent := filepath.Join(testcgroup.Root, "cpuset", testcgroup.Parent())
	_, err := os.Stat(parent)
	must.True(t, errors.Is(err, fs.ErrNotExist), must.Sprintf("the sandbox has a nomad cpuset already: %v", err))
	share := filepath.Join(parent, testcgroup.SharePartition())
	if state == "empty" {
		must.NoError(t, os.MkdirAll(share, 0o755))
		must.Eq(t, "", readTrim(t, filepath.Join(share, "cpuset.cpus")))
	}

	// What TestMain does on a machine, as a Nomad client does at start.
	must.NoError(t, testcgroup.Ensure(plugintest.Logger(t)))
	must.NotEq(t, "", readTrim(t, filepath.Join(parent, "cpuset.cpus")))
	must.NotEq(t, "", readTrim(t, filepath.Join(share, "cpuset.mems")))

	td := newTestDriver(t)
	task := td.newTask(t, "launcher", launcherConfig("echo trained"), nil)
	_, _, err = td.h.StartTask(task)
	must.NoError(t, err)
	res := td.waitExit(t, task.ID, 60*time.Second)
	must.Eq(t, 0, res.ExitCode)
	must.NoError(t, res.Err)

	// A set-up tree is left alone: a client's reservations stay.
	must.NoError(t, os.WriteFile(filepath.Join(share, "cpuset.cpus"), []byte("0"), 0o644))
	must.NoError(t, testcgroup.Ensure(plugintest.Logger(t)))
	must.Eq(t, "0", readTrim(t, filepath.Join(share, "cpuset.cpus")))
}

func readTrim(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	return strings.TrimSpace(string(b))
}
