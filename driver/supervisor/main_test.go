package supervisor

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
)

// startChildEnv, when set, makes this test binary a driver that starts the
// task its value describes (a JSON Command), prints the runner's State and
// exits without closing it: a driver that dies.
const startChildEnv = "RUNNER_TEST_START"

// The test binary is also the supervisor (the driver binary's `supervise`
// subcommand), and the short-lived driver of startInChild.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "supervise" {
		os.Exit(Supervise(os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if spec := os.Getenv(startChildEnv); spec != "" {
		os.Exit(startChild(spec))
	}
	os.Exit(leakcheck.Main(m))
}

func startChild(specJSON string) int {
	var cmd Command
	if err := json.Unmarshal([]byte(specJSON), &cmd); err != nil {
		return 3
	}
	self, _ := os.Executable()
	r, err := New(hclog.NewNullLogger(), Config{Binary: self}, cmd)
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		return 1
	}
	_ = json.NewEncoder(os.Stdout).Encode(r.State())
	return 0
}

// startInChild starts cmd from another process, which then exits: the
// supervisor and the task outlive their driver, as after a driver crash.
func startInChild(t *testing.T, cmd Command) *State {
	t.Helper()
	self, err := os.Executable()
	must.NoError(t, err)
	spec, err := json.Marshal(cmd)
	must.NoError(t, err)
	c := exec.Command(self)
	c.Env = append(os.Environ(), startChildEnv+"="+string(spec))
	out, err := c.Output()
	must.NoError(t, err, must.Sprintf("child driver: %s", exitStderr(err)))
	var st State
	must.NoError(t, json.Unmarshal(out, &st))
	t.Cleanup(func() {
		// Whatever the test did: the task and its supervisor end with it.
		if r, err := Recover(hclog.NewNullLogger(), Config{}, &st); err == nil {
			r.Close()
		}
	})
	return &st
}

// testConfig runs this test binary as the supervisor.
func testConfig(t *testing.T) Config {
	t.Helper()
	self, err := os.Executable()
	must.NoError(t, err)
	return Config{Binary: self, Compute: Compute{TotalMHz: 2000 * 4, Cores: 4}}
}

// taskDir is a task dir any user can enter, with its log files.
func taskDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for d := dir; d != os.TempDir() && d != "/"; d = filepath.Dir(d) {
		_ = os.Chmod(d, 0o755)
	}
	return dir
}

// shCommand runs script with /bin/sh in a new task dir; its output goes to
// stdout.log and stderr.log there.
func shCommand(t *testing.T, script string) Command {
	t.Helper()
	dir := taskDir(t)
	return Command{
		Path:       "/bin/sh",
		Args:       []string{"-c", script},
		Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", leakcheck.EnvName + "=" + leakcheck.Mark()},
		TaskDir:    dir,
		StdoutPath: filepath.Join(dir, "stdout.log"),
		StderrPath: filepath.Join(dir, "stderr.log"),
	}
}

// start starts cmd; the test's end closes it.
func start(t *testing.T, cmd Command) Runner {
	t.Helper()
	r, err := New(hclog.NewNullLogger(), testConfig(t), cmd)
	must.NoError(t, err)
	t.Cleanup(r.Close)
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(cmd.TaskDir, StateDirName, logFileName))
			t.Logf("supervisor log:\n%s", b)
		}
	})
	return r
}

// wait waits for r's exit.
func wait(t *testing.T, r Runner, timeout time.Duration) *Exit {
	t.Helper()
	ctx, cancel := contextWithTimeout(timeout)
	defer cancel()
	exit, err := r.Wait(ctx)
	must.NoError(t, err)
	return exit
}

// waitFile waits until path has content and returns it.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 && b[len(b)-1] == '\n' {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not written within %v", path, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pidsIn reads the pids a script wrote to path, one a line.
func pidsIn(t *testing.T, path string, n int) []int {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		var pids []int
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		if len(pids) >= n {
			return pids
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d pids, want %d", path, len(pids), n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// running says whether pid runs (a zombie does not).
func running(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || !strings.HasPrefix(string(b[i+1:]), " Z")
}

// waitGone waits until none of pids runs.
func waitGone(t *testing.T, pids []int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for running(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pid %d still runs", pid)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// testCgroupV1 makes a task cgroup in each controller Nomad's client uses
// on cgroup v1 (freezer, cpu, memory, and a cpuset with the root's cpus
// and mems), removed when the test ends. It skips where that cannot be
// done.
func testCgroupV1(t *testing.T) Cgroup {
	t.Helper()
	if DetectCgroupMode() != CgroupsV1 {
		t.Skip("needs cgroup v1 as root")
	}
	name := testCgroupName()
	cg := Cgroup{V1: map[string]string{}}
	for _, ctrl := range []string{"freezer", "cpu", "memory", "cpuset"} {
		dir := filepath.Join(CgroupRoot, ctrl, name)
		must.NoError(t, os.Mkdir(dir, 0o755))
		cg.V1[ctrl] = dir
		t.Cleanup(func() { removeCgroup(t, cg, dir) })
		if ctrl == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(CgroupRoot, ctrl, f))
				must.NoError(t, err)
				must.NoError(t, os.WriteFile(filepath.Join(dir, f), v, 0o644))
			}
		}
	}
	return cg
}

// testCgroupV2 makes a cgroup in the unified hierarchy (the whole tree on
// v2; beside the v1 controllers on a hybrid host, where it places and
// kills processes but has no controllers), removed when the test ends.
func testCgroupV2(t *testing.T) Cgroup {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root := CgroupRoot
	if DetectCgroupMode() != CgroupsV2 {
		root = filepath.Join(CgroupRoot, "unified")
	}
	if _, err := os.Stat(filepath.Join(root, "cgroup.procs")); err != nil {
		t.Skip("no unified cgroup hierarchy")
	}
	dir := filepath.Join(root, testCgroupName())
	must.NoError(t, os.Mkdir(dir, 0o755))
	cg := Cgroup{V2: dir}
	t.Cleanup(func() { removeCgroup(t, cg, dir) })
	return cg
}

func testCgroupName() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "schedulearn-supervisor-test-" + hex.EncodeToString(b)
}

func removeCgroup(t *testing.T, cg Cgroup, dir string) {
	if err := cg.Kill(); err != nil {
		t.Errorf("failed to empty test cgroup: %v", err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		err := os.Remove(dir)
		if err == nil || errors.Is(err, fs.ErrNotExist) {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("failed to remove test cgroup: %v", err)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func cgroupHas(t *testing.T, cg Cgroup, pid int) bool {
	t.Helper()
	pids, err := cg.Pids()
	must.NoError(t, err)
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}

// exitStderr is what a child that failed wrote to stderr.
func exitStderr(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return string(ee.Stderr)
	}
	return ""
}

func contextWithTimeout(d time.Duration) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), d)
}
