package driver

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/subcmd"
	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
	"github.com/schedulearn/schedulearn/internal/testcgroup"
)

// The test binary is also every program the driver runs in these tests
// (rawexec's trick): the plugin's subcommands (each task's supervisor, the
// worker agent), and, when called through a link named horovodrun, a fake
// horovodrun.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "horovodrun" {
		os.Exit(fakeHorovodrun(os.Args[1:]))
	}
	if ok, code := subcmd.Run(os.Args); ok {
		os.Exit(code)
	}
	// The cgroup tree a Nomad client would have made when it started
	// (TestDriver_FreshCgroupTree makes its own, in a sandbox).
	if os.Getenv(freshCgroupEnv) == "" {
		if err := testcgroup.Ensure(hclog.Default()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	os.Exit(runTests(m))
}

// runTests runs the tests with the sockets of the in-process plugins (and
// every temporary file) in a directory of their own, so that the tests,
// which serve drivers, run in parallel and leave nothing behind.
func runTests(m *testing.M) int {
	dir, err := os.MkdirTemp("", "drv")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	if err := plugintest.UseSocketDir(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return leakcheck.Main(m)
}

// recordEnv names the file the fake horovodrun writes its argv and
// environment to, one per line (args first, a "--env--" line, then env).
const recordEnv = "FAKE_HOROVODRUN_RECORD"

// fakeHorovodrun checks the command line the driver gave it, records it,
// then runs the training command (the words after horovodrun's options) as
// its child, forwarding SIGTERM, SIGINT and SIGUSR1, and exits as it does.
func fakeHorovodrun(args []string) int {
	if path := os.Getenv(recordEnv); path != "" {
		rec := strings.Join(args, "\n") + "\n--env--\n" + strings.Join(os.Environ(), "\n") + "\n"
		if err := os.WriteFile(path, []byte(rec), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "fake horovodrun:", err)
			return 97
		}
	}
	withValue := map[string]bool{"-np": true, "--min-np": true, "--max-np": true, "--slots-per-host": true,
		"--host-discovery-script": true, "--network-interface": true, "--elastic-timeout": true, "--reset-limit": true}
	i := 0
	for i < len(args) && strings.HasPrefix(args[i], "-") {
		switch {
		case withValue[args[i]]:
			i += 2
		case args[i] == "--blacklist-cooldown-range":
			i += 3
		default:
			i++
		}
	}
	if i >= len(args) {
		fmt.Fprintln(os.Stderr, "fake horovodrun: no training command")
		return 98
	}
	cmd := exec.Command(args[i], args[i+1:]...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGUSR1)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "fake horovodrun:", err)
		return 99
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	_ = cmd.Wait()
	return cmd.ProcessState.ExitCode()
}

// topology is what the agent sends about this machine's cpus (2 GHz a
// core here).
var topology = func() *basepb.ClientTopology {
	t := &basepb.ClientTopology{NodeIds: []uint32{0}}
	for i := range testcgroup.CountCores(testcgroup.UsableCores()) {
		t.Cores = append(t.Cores, &basepb.ClientTopologyCore{CoreId: uint32(i), BaseSpeed: 2000})
	}
	return t
}()

// agentConfig is the agent's config a dispensed driver gets.
var agentConfig = &base.AgentConfig{Driver: &base.AgentDriverConfig{ClientMinPort: 20000, ClientMaxPort: 32000, Topology: topology}}

// testDriver is a driver whose horovodrun is the fake and whose python is
// a script, served over gRPC in process (plugintest.ServeDriver) as the
// agent reaches it.
type testDriver struct {
	d      *Driver
	h      *drivers.Client
	binDir string
	// kill ends the driver as when its process dies: its tasks run on.
	kill func()
}

func newTestDriver(t *testing.T) *testDriver {
	t.Helper()
	binDir := fakeBinDir(t, true)
	return newTestDriverIn(t, binDir)
}

func newTestDriverIn(t *testing.T, binDir string) *testDriver {
	t.Helper()
	self, err := os.Executable()
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := New(ctx, plugintest.Logger(t), lookPathIn(binDir), self)
	// No Nomad servers here: no fence (fence's own tests cover it).
	d.fenceAfter = 0
	d.compute = computeOf(agentConfig.Compute())
	h := plugintest.ServeDriver(t, d)
	return &testDriver{d: d, h: h, binDir: binDir, kill: cancel}
}

// fakeBinDir holds horovodrun (a link to the test binary) and python3 (a
// script printing a version).
func fakeBinDir(t *testing.T, withHorovodrun bool) string {
	t.Helper()
	dir := t.TempDir()
	self, err := os.Executable()
	must.NoError(t, err)
	if withHorovodrun {
		must.NoError(t, os.Symlink(self, filepath.Join(dir, "horovodrun")))
	}
	must.NoError(t, os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\necho Python 3.11.2\n"), 0o755))
	return dir
}

// lookPathIn finds executables in dir only.
func lookPathIn(dir string) LookPathFunc {
	return func(name string) (string, error) {
		p := filepath.Join(dir, name)
		if _, err := os.Stat(p); err != nil {
			return "", &exec.Error{Name: name, Err: exec.ErrNotFound}
		}
		return p, nil
	}
}

// newTask returns a task config for the driver config tc, with an alloc
// dir (and logs, through logmon) and a cgroup, as the Nomad client makes.
// testSecret is the job secret test tasks get.
const testSecret = "0123456789abcdef0123456789abcdef-test-job-secret"

func (td *testDriver) newTask(t *testing.T, name string, tc *TaskConfig, env map[string]string) *drivers.TaskConfig {
	t.Helper()
	return td.newTaskLogs(t, name, tc, env, true)
}

// newTaskLogs is newTask; logs is kept from when Nomad's harness ran
// logmon (a task that never started left it waiting for its fifos): the
// task's output now goes to plain files either way.
func (td *testDriver) newTaskLogs(t *testing.T, name string, tc *TaskConfig, env map[string]string, logs bool) *drivers.TaskConfig {
	t.Helper()
	_ = logs
	allocID := newUUID()
	if env == nil {
		env = map[string]string{}
	}
	// Task processes get only the task's environment: mark them too.
	env[leakcheck.EnvName] = leakcheck.Mark()
	// The job's secret, as a template renders it; a test that sets it to
	// "" gets none.
	if _, ok := env["HOROVOD_DRIVER_SECRET"]; !ok {
		env["HOROVOD_DRIVER_SECRET"] = testSecret
	}
	if env["HOROVOD_DRIVER_SECRET"] == "" {
		delete(env, "HOROVOD_DRIVER_SECRET")
	}
	task := &drivers.TaskConfig{
		AllocID:   allocID,
		ID:        allocID + "/" + name + "/" + newUUID()[:8],
		Name:      name,
		JobID:     "train",
		JobName:   "train",
		Namespace: "default",
		Env:       env,
		Resources: &drivers.Resources{
			NomadResources: &drivers.AllocatedTaskResources{
				Memory: drivers.AllocatedMemoryResources{MemoryMB: 256},
				Cpu:    drivers.AllocatedCpuResources{CpuShares: 100},
			},
			LinuxResources: &drivers.LinuxResources{
				MemoryLimitBytes: 256 << 20,
				CPUShares:        100,
				CpusetCgroupPath: testcgroup.TaskCpusetPath(allocID, name),
			},
		},
	}
	must.NoError(t, task.EncodeDriverConfig(taskConfigSpec, tc))
	plugintest.MkAllocDir(t, task)
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		dirs := task.TaskDir()
		for _, f := range []string{
			filepath.Join(dirs.LogDir, name+".stdout.0"),
			filepath.Join(dirs.LogDir, name+".stderr.0"),
			filepath.Join(dirs.Dir, supervisor.StateDirName, "supervisor.log"),
		} {
			b, _ := os.ReadFile(f)
			t.Logf("%s:\n%s", f, b)
		}
	})
	testcgroup.MakeTaskCgroup(t, allocID, name)
	// As the Nomad client does once a task is done with: destroy it (its
	// supervisor kills what is left). Runs first of the cleanups.
	t.Cleanup(func() { _ = td.h.DestroyTask(task.ID, true) })
	return task
}

// launcherConfig is a valid launcher config running script with /bin/sh.
func launcherConfig(script string) *TaskConfig {
	return &TaskConfig{
		Role:      RoleLauncher,
		Launcher:  LauncherHorovod,
		Command:   "/bin/sh",
		Args:      []string{"-c", script},
		NP:        2,
		MinNP:     1,
		MaxNP:     3,
		Slots:     1,
		Discovery: &DiscoveryConfig{Service: "train-workers", Provider: ProviderConsul},
		Port:      "horovod",
	}
}

// waitExit waits for the task's exit result.
func (td *testDriver) waitExit(t *testing.T, taskID string, timeout time.Duration) *drivers.ExitResult {
	t.Helper()
	ch, err := td.h.WaitTask(context.Background(), taskID)
	must.NoError(t, err)
	select {
	case res := <-ch:
		must.NotNil(t, res)
		return res
	case <-time.After(timeout):
		t.Fatalf("task %s did not exit within %v", taskID, timeout)
		return nil
	}
}

// newUUID is a random UUID, as Nomad's IDs are.
func newUUID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

// waitFile waits until path exists and returns its content.
func waitFile(t *testing.T, path string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if b, err := os.ReadFile(path); err == nil && len(b) > 0 {
			return string(b)
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not appear within %v", path, timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
