package driver

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
	"github.com/vmihailenco/msgpack/v5"

	"github.com/schedulearn/schedulearn/driver/forkserver"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// encodeConfig is the client config block's body as the agent sends it.
func encodeConfig(t *testing.T, body string) []byte {
	t.Helper()
	payload := plugintest.MustEncodeConfig(t, configSpec, body)
	return payload
}

// The launcher runs horovodrun in elastic mode with the discovery script
// and the ssh shim the driver wrote, with the job's environment only, and
// the job ends with the training command's exit code.
func TestDriver_LauncherStartWait(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	record := filepath.Join(t.TempDir(), "record")
	tc := launcherConfig("echo training; exit 0")
	tc.NetworkInterface = "lo"
	tc.ElasticTimeout = 60
	tc.BlacklistCooldown = []int{5, 30}
	tc.Env = map[string]string{"PROGRESS_FILE": "/tmp/progress"}
	task := td.newTask(t, "launcher", tc, map[string]string{
		recordEnv:                  record,
		"NOMAD_ALLOC_ID":           "launcher-alloc",
		"NOMAD_TOKEN":              "secret-wi-token",
		"NOMAD_JOB_ID":             "train",
		"PATH":                     "/usr/bin:/bin",
		"NOMAD_ADDR_horovod":       "127.0.0.1:1",
		"NVIDIA_VISIBLE_DEVICES":   "GPU-launcher",
		"SOMETHING_THE_USER_NEEDS": "kept",
	})

	handle, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	res := td.waitExit(t, task.ID, 30*time.Second)
	must.Eq(t, 0, res.ExitCode)
	must.NoError(t, res.Err)

	args, env, _ := strings.Cut(waitFile(t, record, 5*time.Second), "--env--\n")
	dirs := task.TaskDir()
	discovery := filepath.Join(dirs.LocalDir, "horovod", "discover.sh")
	must.Eq(t, []string{
		"--gloo", "-np", "2", "--min-np", "1", "--max-np", "3", "--slots-per-host", "1",
		"--host-discovery-script", discovery,
		"--network-interface", "lo", "--elastic-timeout", "60", "--blacklist-cooldown-range", "5", "30",
		"/bin/sh", "-c", "echo training; exit 0",
	}, strings.Split(strings.TrimSpace(args), "\n"))

	envs := strings.Split(env, "\n")
	must.SliceContains(t, envs, "NOMAD_JOB_ID=train")
	must.SliceContains(t, envs, "PROGRESS_FILE=/tmp/progress")
	must.SliceContains(t, envs, "SOMETHING_THE_USER_NEEDS=kept")
	for _, gone := range []string{"HOROVOD_DRIVER_SECRET=", "NOMAD_ALLOC_ID=", "NOMAD_TOKEN=", "NOMAD_ADDR_horovod=", "NVIDIA_VISIBLE_DEVICES="} {
		for _, e := range envs {
			must.False(t, strings.HasPrefix(e, gone), must.Sprintf("launcher env has %s", e))
		}
	}
	shimDir := filepath.Join(dirs.LocalDir, "horovod", "bin")
	must.SliceContains(t, envs, "PATH="+shimDir+":/usr/bin:/bin")

	// The scripts exec this binary's subcommands with the task file.
	for path, sub := range map[string]string{discovery: "discover", filepath.Join(shimDir, "ssh"): "ssh-shim"} {
		info, err := os.Stat(path)
		must.NoError(t, err)
		must.True(t, info.Mode()&0o111 != 0, must.Sprintf("%s is not executable", path))
		b, err := os.ReadFile(path)
		must.NoError(t, err)
		must.StrContains(t, string(b), "'"+sub+"' '-task-file' '"+filepath.Join(dirs.SecretsDir, "horovod.json")+"'")
	}
	jt, err := taskfile.Read(filepath.Join(dirs.SecretsDir, "horovod.json"))
	must.NoError(t, err)
	must.Eq(t, "train-workers", jt.Service)
	must.Eq(t, "secret-wi-token", jt.NomadToken)
	must.Eq(t, taskfile.Token(testSecret, "default", "train"), jt.Token)
	must.Eq(t, filepath.Join(dirs.SharedAllocDir, drain.DiscoveredPath), jt.DiscoveredFile)

	var state TaskState
	must.NoError(t, handle.GetDriverState(&state))
	must.Positive(t, state.Pid)
	must.NotNil(t, state.Runner)
	must.Eq(t, state.Pid, state.Runner.Pid)
	must.Eq(t, RoleLauncher, state.Role)
	must.NoError(t, td.h.DestroyTask(task.ID, true))
}

// A failing training command fails the task with its exit code, and a task
// event quotes the end of its stderr.
func TestDriver_FailureExitCodeAndEvent(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	events, err := td.h.TaskEvents(context.Background())
	must.NoError(t, err)
	task := td.newTask(t, "launcher", launcherConfig("echo 'loss is NaN, giving up' >&2; exit 3"), nil)
	_, _, err = td.h.StartTask(task)
	must.NoError(t, err)

	res := td.waitExit(t, task.ID, 30*time.Second)
	must.Eq(t, 3, res.ExitCode)
	must.False(t, res.Successful())

	deadline := time.After(10 * time.Second)
	for {
		select {
		case ev := <-events:
			if ev.TaskID != task.ID {
				continue
			}
			must.StrContains(t, ev.Message, "exit code 3")
			must.StrContains(t, ev.Message, "loss is NaN, giving up")
			must.Eq(t, "3", ev.Annotations["exit_code"])
			return
		case <-deadline:
			t.Fatal("no task event for the failure")
		}
	}
}

// StopTask sends SIGTERM (the default kill signal): training can trap it,
// commit, and exit 0 well before the kill timeout.
func TestDriver_StopSendsSIGTERM(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	dir := t.TempDir()
	marker, ready := filepath.Join(dir, "term"), filepath.Join(dir, "ready")
	task := td.newTask(t, "launcher", launcherConfig(fmt.Sprintf(
		`trap 'echo committed > %s; exit 0' TERM; echo ready > %s; while :; do sleep 0.1; done`, marker, ready)), nil)
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	must.NoError(t, plugintest.WaitUntilStarted(td.h, task.ID, 10*time.Second))
	waitFile(t, ready, 20*time.Second)

	start := time.Now()
	must.NoError(t, td.h.StopTask(task.ID, 30*time.Second, ""))
	must.Less(t, 15*time.Second, time.Since(start))
	res := td.waitExit(t, task.ID, 10*time.Second)
	must.Eq(t, 0, res.ExitCode)
	must.Eq(t, "committed\n", waitFile(t, marker, time.Second))
}

// A process that ignores SIGTERM is killed once the kill timeout passes.
func TestDriver_StopKillsAfterTimeout(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	ready := filepath.Join(t.TempDir(), "ready")
	task := td.newTask(t, "launcher", launcherConfig(`trap '' TERM; echo ready > `+ready+`; while :; do sleep 0.1; done`), nil)
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, ready, 20*time.Second)

	must.NoError(t, td.h.StopTask(task.ID, time.Second, "SIGTERM"))
	res := td.waitExit(t, task.ID, 20*time.Second)
	must.Eq(t, 9, res.Signal)
}

// After the driver restarts (a new instance, as after a Nomad client
// restart) RecoverTask reattaches to the same process: same PID, and
// WaitTask still reports how it ends.
func TestDriver_RecoverKeepsProcess(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	dir := t.TempDir()
	release, ready := filepath.Join(dir, "release"), filepath.Join(dir, "ready")
	task := td.newTask(t, "launcher", launcherConfig(fmt.Sprintf(
		`echo ready > %s; while [ ! -e %s ]; do sleep 0.1; done; exit 7`, ready, release)), nil)
	handle, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, ready, 20*time.Second)
	before, err := td.h.InspectTask(task.ID)
	must.NoError(t, err)

	// The first driver goes away without stopping anything.
	td.kill()
	td2 := newTestDriverIn(t, td.binDir)
	_, err = td2.h.InspectTask(task.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)

	must.NoError(t, td2.h.RecoverTask(handle))
	must.NoError(t, td2.h.RecoverTask(handle), must.Sprint("recovering twice is a no-op"))
	after, err := td2.h.InspectTask(task.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, after.State)
	must.Eq(t, before.DriverAttributes["pid"], after.DriverAttributes["pid"])
	must.Eq(t, before.StartedAt.Unix(), after.StartedAt.Unix())

	must.NoError(t, os.WriteFile(release, nil, 0o644))
	res := td2.waitExit(t, task.ID, 20*time.Second)
	must.Eq(t, 7, res.ExitCode)
	must.NoError(t, td2.h.DestroyTask(task.ID, false))
}

// Recovering a task whose executor is gone fails (Nomad then restarts the
// task per its restart policy).
func TestDriver_RecoverGoneTaskFails(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	task := td.newTask(t, "launcher", launcherConfig("exit 0"), nil)
	handle, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	td.waitExit(t, task.ID, 30*time.Second)
	must.NoError(t, td.h.DestroyTask(task.ID, true))

	td2 := newTestDriverIn(t, td.binDir)
	must.Error(t, td2.h.RecoverTask(handle))
	must.Error(t, td2.d.RecoverTask(nil))
}

// The handle's state is JSON since the driver is on our own plugin SDK
// (version 3). A task whose handle an earlier driver wrote (version 2: the
// same state in msgpack, through Nomad's SDK; 1: Nomad's executor) is not
// recovered: the error says why, and Nomad starts the task again. A
// handle of this version whose state is not this driver's fails too.
func TestDriver_RecoverEarlierHandleFails(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	ready := filepath.Join(t.TempDir(), "ready")
	task := td.newTask(t, "launcher", launcherConfig(`echo ready > `+ready+`; while :; do sleep 0.1; done`), nil)
	handle, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, ready, 20*time.Second)
	must.Eq(t, taskHandleVersion, handle.Version)
	var state map[string]any
	must.NoError(t, json.Unmarshal(handle.DriverState, &state), must.Sprint("the state is JSON"))
	must.MapContainsKeys(t, state, []string{"Runner", "Pid", "StartedAt", "Role", "StateFile"})

	td.kill()
	td2 := newTestDriverIn(t, td.binDir)
	// What the driver on Nomad's SDK wrote: its TaskState, msgpack.
	v2, err := msgpack.Marshal(map[string]any{"Runner": state["Runner"], "Pid": state["Pid"], "Role": "launcher"})
	must.NoError(t, err)
	for _, c := range []struct {
		name    string
		version int
		state   []byte
		want    string
	}{
		{"Nomad's executor", 1, v2, "its handle (version 1) was written by an earlier version of the driver"},
		{"msgpack", 2, v2, "its handle (version 2) was written by an earlier version of the driver"},
		{"msgpack as version 3", taskHandleVersion, v2, "failed to decode task state: invalid driver state"},
		{"no supervisor", taskHandleVersion, []byte(`{"Pid": 1}`), "its state names no supervisor"},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := handle.Copy()
			h.Version, h.DriverState = c.version, c.state
			must.ErrorContains(t, td2.h.RecoverTask(h), c.want)
			_, err := td2.h.InspectTask(task.ID)
			must.ErrorIs(t, err, drivers.ErrTaskNotFound)
		})
	}
	// The task's own handle still recovers it.
	must.NoError(t, td2.h.RecoverTask(handle))
	must.NoError(t, td2.h.StopTask(task.ID, 5*time.Second, ""))
	td2.waitExit(t, task.ID, 10*time.Second)
}

// TaskStats reports the process tree's cpu and memory; ExecTask and
// SignalTask reach the task.
func TestDriver_StatsExecSignal(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	dir := t.TempDir()
	usr1, ready := filepath.Join(dir, "usr1"), filepath.Join(dir, "ready")
	task := td.newTask(t, "launcher", launcherConfig(fmt.Sprintf(
		`trap 'echo got > %s' USR1; echo ready > %s; while :; do sleep 0.1; done`, usr1, ready)), map[string]string{"GREETING": "hello", "NOMAD_JOB_ID": "train"})
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, ready, 20*time.Second)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	stats, err := td.h.TaskStats(ctx, task.ID, 200*time.Millisecond)
	must.NoError(t, err)
	select {
	case u := <-stats:
		must.NotNil(t, u)
		must.NotNil(t, u.ResourceUsage)
		must.Positive(t, u.ResourceUsage.MemoryStats.RSS+u.ResourceUsage.MemoryStats.Usage)
		must.MapNotEmpty(t, u.Pids, must.Sprint("stats list the process tree"))
	case <-time.After(10 * time.Second):
		t.Fatal("no stats")
	}

	out, err := td.h.ExecTask(task.ID, []string{"/bin/sh", "-c", "echo $GREETING from $NOMAD_JOB_ID"}, 10*time.Second)
	must.NoError(t, err)
	must.Eq(t, 0, out.ExitResult.ExitCode)
	must.Eq(t, "hello from train\n", string(out.Stdout))

	must.NoError(t, td.h.SignalTask(task.ID, "SIGUSR1"))
	must.Eq(t, "got\n", waitFile(t, usr1, 10*time.Second))
	must.Error(t, td.h.SignalTask(task.ID, "SIGNOPE"))

	must.NoError(t, td.h.StopTask(task.ID, 5*time.Second, ""))
	must.NoError(t, td.h.DestroyTask(task.ID, false))
}

// A worker runs the agent on its group port, with its GPUs as
// CUDA_VISIBLE_DEVICES; a launcher with the job's token runs commands there.
func TestDriver_WorkerAgent(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	addr := freeAddr(t)
	task := td.newTask(t, "worker", &TaskConfig{Role: RoleWorker, Slots: 1, Port: "horovod"}, map[string]string{
		"NOMAD_ADDR_horovod":     addr,
		"NVIDIA_VISIBLE_DEVICES": "GPU-1234",
		"NOMAD_JOB_ID":           "train",
	})
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	statusFile := filepath.Join(task.TaskDir().SharedAllocDir, drain.AgentStatusPath)
	waitFile(t, statusFile, 20*time.Second)

	token := taskfile.Token(testSecret, "default", "train")
	var stdout, stderr strings.Builder
	code, err := workeragent.Run(context.Background(), addr, token, `echo "$CUDA_VISIBLE_DEVICES $NOMAD_JOB_ID $HOROVOD_DRIVER_SECRET"; echo oops >&2; exit 4`, nil, &stdout, &stderr, 5*time.Second)
	must.NoError(t, err)
	must.Eq(t, 4, code)
	must.Eq(t, "GPU-1234 train \n", stdout.String())
	must.Eq(t, "oops\n", stderr.String())

	_, err = workeragent.Run(context.Background(), addr, "wrong-token", "true", nil, &stdout, &stderr, 5*time.Second)
	must.ErrorIs(t, err, workeragent.ErrUnauthorized)

	must.NoError(t, td.h.StopTask(task.ID, 10*time.Second, ""))
	res := td.waitExit(t, task.ID, 10*time.Second)
	must.Eq(t, 0, res.ExitCode)
}

// Bad task configs fail StartTask with a message naming the key.
func TestDriver_BadConfig(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(*TaskConfig)
		want string
	}{
		{"min_np above max_np", func(tc *TaskConfig) { tc.MinNP, tc.NP, tc.MaxNP = 4, 4, 3 }, "min_np (4) must not exceed max_np (3)"},
		{"np above max_np", func(tc *TaskConfig) { tc.NP, tc.MaxNP = 4, 3 }, "np (4) must not exceed max_np (3)"},
		{"missing command", func(tc *TaskConfig) { tc.Command = "" }, "command: required for a launcher"},
		{"bad role", func(tc *TaskConfig) { tc.Role = "boss" }, `role: must be "launcher" or "worker", got "boss"`},
		{"bad launcher", func(tc *TaskConfig) { tc.Launcher = "mpirun" }, `launcher: must be "horovod" or "torchrun"`},
		{"no discovery", func(tc *TaskConfig) { tc.Discovery = nil }, "discovery: a launcher needs a discovery block"},
		{"no discovery service", func(tc *TaskConfig) { tc.Discovery = &DiscoveryConfig{} }, "discovery: a launcher needs a discovery block"},
		{"bad provider", func(tc *TaskConfig) { tc.Discovery.Provider = "etcd" }, `discovery.provider: must be "consul" or "nomad"`},
		{"bad cooldown", func(tc *TaskConfig) { tc.BlacklistCooldown = []int{30, 5} }, "blacklist_cooldown: must be [min, max]"},
		{"worker with command", func(tc *TaskConfig) { tc.Role = RoleWorker }, "command: a worker runs the driver's agent"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			// MkAllocDir's cleanup closes the harness: one per case.
			td := newTestDriver(t)
			cfg := launcherConfig("true")
			tc.edit(cfg)
			task := td.newTaskLogs(t, "launcher", cfg, nil, false)
			_, _, err := td.h.StartTask(task)
			must.ErrorContains(t, err, tc.want)
		})
	}
}

// A worker whose group has no port of the configured label fails to start.
func TestDriver_WorkerWithoutPort(t *testing.T) {
	t.Parallel()
	td := newTestDriver(t)
	task := td.newTaskLogs(t, "worker", &TaskConfig{Role: RoleWorker, Slots: 1, Port: "hvd-port"}, nil, false)
	_, _, err := td.h.StartTask(task)
	must.ErrorContains(t, err, `port: no network port labelled "hvd-port" in the task's group (NOMAD_ADDR_hvd_port is not set)`)
}

// The fingerprint is healthy with horovodrun and python, with their
// versions; undetected without horovodrun.
func TestDriver_Fingerprint(t *testing.T) {
	t.Parallel()
	withScripts := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(withScripts, "horovodrun"), []byte("#!/bin/sh\necho 0.28.1\n"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(withScripts, "python3"), []byte("#!/bin/sh\necho Python 3.11.2\n"), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(withScripts, "torchrun"), []byte("#!/bin/sh\n"), 0o755))

	cases := []struct {
		name   string
		dir    string
		health drivers.HealthState
		attrs  map[string]string
	}{
		{"found", withScripts, drivers.HealthStateHealthy, map[string]string{
			attrHorovodrunVersion: "0.28.1", attrPythonVersion: "3.11.2", attrTorchrun: "true"}},
		{"no horovodrun", fakeBinDir(t, false), drivers.HealthStateUndetected, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			h := plugintest.ServeDriver(t, New(ctx, plugintest.Logger(t), lookPathIn(tc.dir), ""))
			ch, err := h.Fingerprint(ctx)
			must.NoError(t, err)
			select {
			case fp := <-ch:
				must.Eq(t, tc.health, fp.Health, must.Sprint(fp.HealthDescription))
				for k, v := range tc.attrs {
					must.MapContainsKey(t, fp.Attributes, k)
					must.Eq(t, v, attrValue(fp.Attributes[k]))
				}
				if tc.health == drivers.HealthStateUndetected {
					must.StrContains(t, fp.HealthDescription, "horovodrun not found")
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no fingerprint")
			}
		})
	}
}

// attrValue is a fingerprint attribute's value as Nomad shows it.
func attrValue(a *shared.Attribute) string {
	switch {
	case a.String != nil:
		return *a.String
	case a.Bool != nil:
		return strconv.FormatBool(*a.Bool)
	}
	return a.GoString()
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	addr := l.Addr().String()
	must.NoError(t, l.Close())
	return addr
}

// warmInterpreterDirs gives a bin_dirs entry holding the system's python3
// (the test is skipped without one) and a standby_dir: short, as
// t.TempDir's path is too long for a socket's; removed when the test ends.
func warmInterpreterDirs(t *testing.T) (binDir, standbyDir string) {
	t.Helper()
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	binDir = t.TempDir()
	must.NoError(t, os.Symlink(python, filepath.Join(binDir, "python3")))
	standbyDir, err := os.MkdirTemp("", "sbd-")
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(standbyDir) })
	return binDir, standbyDir
}

// With standby_preload, the client's warm interpreter imports the modules
// when the driver starts, and a worker that preloads modules forks its
// standby from it: its first Python command finds them imported, runs as
// the server's child in the worker's own cgroups, and the worker's task
// file names the server's socket.
func TestDriver_WorkerForksStandbyFromWarmInterpreter(t *testing.T) {
	t.Parallel()
	binDir, standbyDir := warmInterpreterDirs(t)
	td := newTestDriverIn(t, binDir)
	// Nomad's plugin loader checks the config on an instance of its own,
	// without the agent's config: that one starts no interpreter.
	must.NoError(t, td.h.SetConfig(&base.Config{ApiVersion: drivers.ApiVersion010, PluginConfig: encodeConfig(t, fmt.Sprintf("bin_dirs = [%q]\nstandby_preload = [\"decimal\"]", binDir))}))
	must.Nil(t, td.d.forkServer.Load())
	must.NoError(t, td.h.SetConfig(&base.Config{ApiVersion: drivers.ApiVersion010, AgentConfig: agentConfig, PluginConfig: encodeConfig(t, fmt.Sprintf(`
bin_dirs        = [%q]
standby_preload = ["decimal"]
standby_dir     = %q
standby_env {
  FROM_CONFIG = "1"
}
`, binDir, standbyDir))}))
	fs := td.d.forkServer.Load()
	must.NotNil(t, fs)
	t.Cleanup(fs.Kill)
	must.Eq(t, standbyDir, filepath.Dir(fs.Dir))
	select {
	case <-fs.Ready():
	case <-time.After(time.Minute):
		t.Fatal("the warm interpreter never served")
	}

	addr := freeAddr(t)
	task := td.newTask(t, "worker", &TaskConfig{Role: RoleWorker, Slots: 1, Port: "horovod", Preload: []string{"decimal"}}, map[string]string{
		"NOMAD_ADDR_horovod": addr,
		"NOMAD_JOB_ID":       "train",
	})
	_, _, err := td.h.StartTask(task)
	must.NoError(t, err)
	waitFile(t, filepath.Join(task.TaskDir().SharedAllocDir, drain.AgentStatusPath), 20*time.Second)
	taskFile, err := taskfile.Read(filepath.Join(task.TaskDir().SecretsDir, taskFileName))
	must.NoError(t, err)
	must.Eq(t, fs.Socket(), taskFile.StandbyServer)

	h, ok := td.d.tasks.get(task.ID)
	must.True(t, ok)
	agentCgroup, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", h.runner.Pid()))
	must.NoError(t, err)
	script := filepath.Join(task.TaskDir().LocalDir, "probe.py")
	must.NoError(t, os.WriteFile(script, []byte(`import os, sys
print("decimal" in sys.modules, os.getppid() == int(sys.argv[1]), open("/proc/self/environ").read().count("FROM_CONFIG=1"))
sys.stdout.write(open("/proc/self/cgroup").read())
`), 0o644))
	token := taskfile.Token(testSecret, "default", "train")
	var stdout, stderr strings.Builder
	code, err := workeragent.Run(context.Background(), addr, token, fmt.Sprintf("%s %s %d", filepath.Join(binDir, "python3"), script, fs.Pid()),
		nil, &stdout, &stderr, 5*time.Second)
	must.NoError(t, err)
	must.Eq(t, 0, code, must.Sprint(stderr.String()))
	// The standby's process environment is the warm interpreter's: PATH
	// and standby_env (its command's is applied after the fork).
	must.Eq(t, "True True 1\n"+string(agentCgroup), stdout.String())

	must.NoError(t, td.h.StopTask(task.ID, 10*time.Second, ""))
	td.waitExit(t, task.ID, 10*time.Second)
}

// A warm interpreter that exits (killed, out of memory) is started again,
// with a new socket; the old one's directory is gone. Stopping the driver
// stops it for good.
func TestDriver_WarmInterpreterRestarts(t *testing.T) {
	t.Parallel()
	binDir, standbyDir := warmInterpreterDirs(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := New(ctx, plugintest.Logger(t), lookPathIn(binDir), "")
	must.NoError(t, d.SetConfig(&base.Config{AgentConfig: agentConfig,
		PluginConfig: encodeConfig(t, fmt.Sprintf("bin_dirs = [%q]\nstandby_preload = [\"decimal\"]\nstandby_dir = %q", binDir, standbyDir))}))
	ready := func() *forkserver.Server {
		t.Helper()
		fs := d.forkServer.Load()
		must.NotNil(t, fs)
		t.Cleanup(fs.Kill)
		select {
		case <-fs.Ready():
		case <-time.After(time.Minute):
			t.Fatal("the warm interpreter never served")
		}
		return fs
	}
	first := ready()
	must.NoError(t, syscall.Kill(first.Pid(), syscall.SIGKILL))
	<-first.Done()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return d.forkServer.Load() != first }),
		wait.Timeout(30*time.Second), wait.Gap(50*time.Millisecond)))
	second := ready()
	must.NotEq(t, first.Socket(), second.Socket())
	must.True(t, second.IsReady())
	_, err := os.Stat(first.Dir)
	must.True(t, os.IsNotExist(err), must.Sprintf("the killed server's directory %s is still there: %v", first.Dir, err))

	cancel()
	select {
	case <-second.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the warm interpreter outlived its driver")
	}
	time.Sleep(2 * time.Second) // past the first pause: nothing restarts it
	must.Eq(t, second, d.forkServer.Load())
	entries, err := os.ReadDir(standbyDir)
	must.NoError(t, err)
	must.SliceEmpty(t, entries)
}

// The warm interpreter's settings are checked when the client loads them,
// each error naming its key.
func TestDriver_SetConfigChecksWarmInterpreter(t *testing.T) {
	t.Parallel()
	for name, c := range map[string]struct {
		config string
		want   string
	}{
		"a module name that is not one": {`standby_preload = ["torch; import os"]`, "standby_preload[0]"},
		"a startup variable":            {"standby_preload = [\"torch\"]\nstandby_env {\n  PYTHONPATH = \"/x\"\n}", "standby_env"},
		"PATH":                          {"standby_env {\n  PATH = \"/x\"\n}", "standby_env"},
		"not a name":                    {"standby_env {\n  A-B = \"1\"\n}", "standby_env"},
		"a relative standby_dir":        {`standby_dir = "run/standby"`, "standby_dir"},
		"a standby_dir too long":        {`standby_dir = "/` + strings.Repeat("d", 64) + `"`, "at most 64 bytes"},
		"dynamic_ports not a range":     {`dynamic_ports = "20000"`, "dynamic_ports"},
		"dynamic_ports reversed":        {`dynamic_ports = "32000-20000"`, "dynamic_ports"},
		"dynamic_ports past 65535":      {`dynamic_ports = "20000-70000"`, "dynamic_ports"},
		"fence_after not a duration":    {`fence_after = "soon"`, "fence_after"},
		"fence_after negative":          {`fence_after = "-1s"`, "fence_after"},
	} {
		t.Run(name, func(t *testing.T) {
			d := New(context.Background(), plugintest.Logger(t), lookPathIn(t.TempDir()), "")
			err := d.SetConfig(&base.Config{PluginConfig: encodeConfig(t, c.config)})
			must.ErrorContains(t, err, c.want)
			must.Nil(t, d.forkServer.Load())
		})
	}
}
