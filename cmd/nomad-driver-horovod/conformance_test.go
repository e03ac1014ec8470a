//go:build linux

package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/schedulearn/schedulearn/driver"
	"github.com/schedulearn/schedulearn/driver/subcmd"
	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
	"github.com/schedulearn/schedulearn/internal/testcgroup"
)

// The protocol conformance test of the horovod task driver: this test
// binary is the driver's binary (TestMain runs main when serveEnv is set,
// and the subcommands the driver runs inside tasks: the supervisor, the
// launcher, the worker agent), started and driven the way Nomad's agent
// starts and drives a binary in plugin_dir: go-plugin with the agent's
// handshake, then every RPC the agent makes, in its order, with the
// payloads it sends, on real tasks (a launcher whose training command is a
// shell loop, a worker running the driver's agent); then inputs it never
// sends but a broken agent or a bad job could. No process the tests start
// outlives them (leakcheck).

const serveEnv = "HOROVOD_DRIVER_TEST_SERVE"

func TestMain(m *testing.M) {
	if ok, code := subcmd.Run(os.Args); ok {
		os.Exit(code)
	}
	if os.Getenv(serveEnv) == "1" {
		main()
		os.Exit(0)
	}
	// The cgroup tree a Nomad client makes when it starts.
	if err := testcgroup.Ensure(hclog.Default()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(leakcheck.Main(m))
}

func pluginCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	return cmd
}

// launch starts the driver as the agent does; the test fails if it exits
// unasked or logs a panic.
func launch(t *testing.T) *plugintest.Agent {
	t.Helper()
	a := plugintest.Launch(t, pluginCmd())
	t.Cleanup(func() {
		if strings.Contains(a.Log(), "panic") {
			t.Errorf("the driver logged a panic:\n%s", a.Log())
		}
	})
	return a
}

// fakeBinDir is a bin_dirs entry: horovodrun (a script: --version, or it
// runs the training command after its options) and python3 (a version).
func fakeBinDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	must.NoError(t, os.WriteFile(filepath.Join(dir, "horovodrun"), []byte(`#!/bin/sh
# A fake horovodrun: its version, or the training command after the options.
[ "$1" = "--version" ] && { echo 0.28.1; exit 0; }
while [ $# -gt 0 ]; do
  case "$1" in
    --gloo) shift ;;
    -np|--min-np|--max-np|--slots-per-host|--host-discovery-script|--network-interface|--elastic-timeout|--reset-limit) shift 2 ;;
    --blacklist-cooldown-range) shift 3 ;;
    *) break ;;
  esac
done
exec "$@"
`), 0o755))
	must.NoError(t, os.WriteFile(filepath.Join(dir, "python3"), []byte("#!/bin/sh\necho Python 3.11.2\n"), 0o755))
	return dir
}

// topology is what the agent sends a driver of a 2-core node.
var topology = &basepb.ClientTopology{
	NodeIds: []uint32{0},
	Cores: []*basepb.ClientTopologyCore{
		{CoreId: 0, BaseSpeed: 2000},
		{CoreId: 1, BaseSpeed: 2000},
	},
}

// clientConfig is a plugin block as the lab's and Terraform's client
// configs write it, with no Nomad server to fence against.
func clientConfig(binDir string) string {
	return fmt.Sprintf(`
bin_dirs           = [%q]
consul_address     = "127.0.0.1:1"
nomad_address      = "http://127.0.0.1:1"
fingerprint_period = "200ms"
fence_after        = "0s"
`, binDir)
}

// configure does what the agent does with a dispensed instance first.
func configure(t *testing.T, d *drivers.Client, body string) {
	t.Helper()
	spec, err := d.ConfigSchema()
	must.NoError(t, err)
	payload := plugintest.MustEncodeConfig(t, spec, body)
	must.NoError(t, d.SetConfig(&base.Config{
		ApiVersion:   drivers.ApiVersion010,
		PluginConfig: payload,
		AgentConfig: &base.AgentConfig{Driver: &base.AgentDriverConfig{
			ClientMinPort: 20000, ClientMaxPort: 32000, Topology: topology,
		}},
	}))
}

// secret is the job's secret, as its template renders it.
const secret = "0123456789abcdef0123456789abcdef-conformance"

var taskSeq int

// newTask is a task config as the agent makes one: IDs, the task's
// environment (with the job's secret and the group's port), resources,
// the cgroups the client makes, an alloc dir with the task's log files,
// and the task's config block encoded along the agent's path.
func newTask(t *testing.T, d *drivers.Client, name, body string) *drivers.TaskConfig {
	t.Helper()
	spec, err := d.TaskConfigSchema()
	must.NoError(t, err)
	taskSeq++
	allocID := fmt.Sprintf("%08d-0000-4000-8000-%012d", os.Getpid(), taskSeq)
	cfg := &drivers.TaskConfig{
		ID:            allocID + "/" + name + "/0a1b2c3d",
		Name:          name,
		AllocID:       allocID,
		JobID:         "train",
		JobName:       "train",
		TaskGroupName: name,
		Namespace:     "default",
		NodeID:        "node-1",
		NodeName:      "node",
		Env: map[string]string{
			"PATH":                  "/usr/local/bin:/usr/bin:/bin",
			"GREETING":              "hello",
			"NOMAD_JOB_ID":          "train",
			"NOMAD_ADDR_horovod":    freeAddr(t),
			"HOROVOD_DRIVER_SECRET": secret,
			leakcheck.EnvName:       leakcheck.Mark(), // the task's processes are checked too
		},
		DeviceEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1"},
		Resources: &drivers.Resources{
			NomadResources: &drivers.AllocatedTaskResources{
				Cpu:    drivers.AllocatedCpuResources{CpuShares: 100},
				Memory: drivers.AllocatedMemoryResources{MemoryMB: 256},
			},
			LinuxResources: &drivers.LinuxResources{CPUShares: 100, MemoryLimitBytes: 256 << 20,
				CpusetCgroupPath: testcgroup.TaskCpusetPath(allocID, name)},
		},
	}
	plugintest.MkAllocDir(t, cfg)
	testcgroup.MakeTaskCgroup(t, allocID, name)
	cfg.DriverConfig, err = plugintest.EncodeTaskConfig(spec, body, map[string]cty.Value{"NOMAD_JOB_ID": cty.StringVal("train")})
	must.NoError(t, err)
	return cfg
}

// launcherTask trains until stopped: SIGTERM makes it exit 7, SIGUSR1
// print.
const launcherTask = `
role    = "launcher"
command = "/bin/sh"
args    = ["-c", "trap 'echo term; exit 7' TERM; trap 'echo usr1' USR1; echo started $GREETING $EXTRA; while :; do sleep 0.05; done"]
np      = 1
discovery {
  service = "${NOMAD_JOB_ID}-workers"
}
env = {
  EXTRA = "extra"
}
`

// workerTask runs the driver's worker agent on the group's port.
const workerTask = `
role = "worker"
port = "horovod"
`

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// The scan of plugin_dir: the handshake line, then base's PluginInfo and
// ConfigSchema; without the agent's cookie the binary refuses to serve.
// The client configs the lab, Terraform and the e2e tier write fit the
// schema; the loader's validating instance (no agent config) takes them.
func TestConformance_Scan(t *testing.T) {
	plugintest.CheckHandshake(t, pluginCmd)

	a := launch(t)
	b := a.Base(t)
	info, err := b.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, base.PluginTypeDriver, info.Type)
	must.Eq(t, driver.PluginName, info.Name)
	must.Eq(t, []string{drivers.ApiVersion010}, info.PluginApiVersions)
	must.RegexMatch(t, regexp.MustCompile(`^v?\d+\.\d+\.\d+`), info.PluginVersion)
	spec, err := b.ConfigSchema()
	must.NoError(t, err)
	sameSchema(t, "config-schema.json", spec)
	d := a.Driver(t)
	taskSpec, err := d.TaskConfigSchema()
	must.NoError(t, err)
	sameSchema(t, "task-schema.json", taskSpec)
	for _, body := range []string{
		"",
		// jobspecs/lab/nomad.hcl
		"bin_dirs = [\".cache/venv/bin\"]\nstandby_preload = [\"torch\", \"horovod.torch\"]",
		// every key, as terraform/modules/gpu-client and e2e write them
		`bin_dirs = ["/opt/venv/bin"]
standby_preload    = ["torch"]
standby_dir        = "/run/schedulearn-standby"
standby_env {
  OMP_NUM_THREADS = "1"
}
auth_secret        = "ignored"
consul_address     = "127.0.0.1:8500"
consul_token       = "t"
nomad_address      = "http://127.0.0.1:4646"
fingerprint_period = "5s"
fence_after        = "8s"
dynamic_ports      = "20000-32000"`,
	} {
		payload := plugintest.MustEncodeConfig(t, spec, body)
		must.NoError(t, d.SetConfig(&base.Config{ApiVersion: drivers.ApiVersion010, PluginConfig: payload}))
	}
}

// sameSchema fails the test unless spec is the schema in testdata/name:
// what the driver on Nomad's plugin SDK sent (recorded from its binary,
// 8c05a11, through this SDK's client), so client and job configs that
// loaded before load the same, with the same defaults.
func sameSchema(t *testing.T, name string, spec *hclspec.Spec) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	must.NoError(t, err)
	var want hclspec.Spec
	must.NoError(t, protojson.Unmarshal(b, &want))
	got, _ := protojson.MarshalOptions{Multiline: true}.Marshal(spec)
	must.True(t, proto.Equal(&want, spec), must.Sprintf("the schema differs from testdata/%s:\n%s", name, got))
}

// A task's whole life, in the agent's order: configure, fingerprint and
// events streams, schema and capabilities, start, wait, inspect, stats,
// signal, exec (one-shot; streaming without and with a terminal), stop,
// the failure event, destroy; and a worker, which runs the driver's agent.
func TestConformance_Lifecycle(t *testing.T) {
	a := launch(t)
	d := a.Driver(t)
	configure(t, d, clientConfig(fakeBinDir(t)))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fp, err := d.Fingerprint(ctx)
	must.NoError(t, err)
	first := plugintest.Next(t, fp)
	must.NoError(t, first.Err)
	must.Eq(t, drivers.HealthStateHealthy, first.Health, must.Sprint(first.HealthDescription))
	must.Eq(t, drivers.DriverHealthy, first.HealthDescription)
	must.Eq(t, "0.28.1", *first.Attributes["driver.horovod.horovodrun_version"].String)
	must.Eq(t, "3.11.2", *first.Attributes["driver.horovod.python_version"].String)
	must.NotNil(t, first.Attributes["driver.horovod.torchrun"].Bool)
	for _, attr := range first.Attributes {
		must.NoError(t, attr.Validate())
	}
	events, err := d.TaskEvents(ctx)
	must.NoError(t, err)

	spec, err := d.TaskConfigSchema()
	must.NoError(t, err)
	keys := spec.GetObject().GetAttributes()
	for _, k := range []string{"role", "command", "args", "launcher", "np", "min_np", "max_np", "slots", "discovery",
		"elastic_timeout", "reset_limit", "blacklist_cooldown", "network_interface", "env", "port", "preload", "rdzv_port", "rdzv_port_label"} {
		must.MapContainsKey(t, keys, k)
	}
	must.MapLen(t, 18, keys)
	caps, err := d.Capabilities()
	must.NoError(t, err)
	must.Eq(t, &drivers.Capabilities{
		SendSignals: true, Exec: true, FSIsolation: drivers.FSIsolationNone,
		NetIsolationModes: []drivers.NetIsolationMode{drivers.NetIsolationModeHost, drivers.NetIsolationModeGroup},
		MountConfigs:      drivers.MountConfigSupportNone,
	}, caps)

	cfg := newTask(t, d, "launcher", launcherTask)
	handle, network, err := d.StartTask(cfg)
	must.NoError(t, err)
	t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
	must.NoError(t, plugintest.WaitUntilStarted(d, cfg.ID, 10*time.Second))
	must.Nil(t, network)
	must.Eq(t, 3, handle.Version)
	must.Eq(t, cfg, handle.Config, must.Sprint("the handle carries the task config the agent sent"))
	var state driver.TaskState
	must.NoError(t, handle.GetDriverState(&state))
	must.Positive(t, state.Pid)
	must.Eq(t, driver.RoleLauncher, state.Role)
	waitCh, err := d.WaitTask(ctx, cfg.ID)
	must.NoError(t, err)
	plugintest.WaitLog(t, cfg.StdoutPath, "started hello extra")

	st, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	must.Eq(t, cfg.ID, st.ID)
	must.Eq(t, "launcher", st.Name)
	must.False(t, st.StartedAt.IsZero())
	must.True(t, st.CompletedAt.IsZero())
	must.Eq(t, map[string]string{"pid": fmt.Sprint(state.Pid), "role": "launcher"}, st.DriverAttributes)

	sctx, scancel := context.WithCancel(ctx)
	stats, err := d.TaskStats(sctx, cfg.ID, 100*time.Millisecond)
	must.NoError(t, err)
	for range 2 {
		u := plugintest.Next(t, stats)
		must.Positive(t, u.ResourceUsage.MemoryStats.RSS+u.ResourceUsage.MemoryStats.Usage)
		must.SliceNotEmpty(t, u.ResourceUsage.MemoryStats.Measured)
		must.SliceContains(t, u.ResourceUsage.CpuStats.Measured, drivers.MeasuredPercent)
		must.MapContainsKey(t, u.Pids, fmt.Sprint(state.Pid), must.Sprint("stats list the process tree"))
		must.Less(t, time.Minute, time.Since(time.Unix(0, u.Timestamp)))
	}
	scancel()

	must.NoError(t, d.SignalTask(cfg.ID, "SIGUSR1"))
	plugintest.WaitLog(t, cfg.StdoutPath, "usr1")

	res, err := d.ExecTask(cfg.ID, []string{"/bin/sh", "-c", "echo out $GREETING $NOMAD_JOB_ID; echo err >&2; exit 3"}, 10*time.Second)
	must.NoError(t, err)
	must.StrContains(t, string(res.Stdout), "out hello train\n")
	must.Eq(t, 3, res.ExitResult.ExitCode)

	ex, err := plugintest.Exec(ctx, d, cfg.ID, []string{"/bin/sh", "-c", `cat; echo "$GREETING" >&2; exit 2`}, false,
		plugintest.Stdin("hello "), plugintest.Stdin("world\n"), plugintest.StdinClose())
	must.NoError(t, err)
	must.Eq(t, "hello world\n", string(ex.Stdout))
	must.Eq(t, "hello\n", string(ex.Stderr))
	must.Eq(t, 2, ex.Exit.ExitCode)
	must.Zero(t, ex.AfterExit)

	ex, err = plugintest.Exec(ctx, d, cfg.ID, []string{"/bin/sh", "-c", `read l; stty size; echo "got $l"; echo oops >&2`}, true,
		plugintest.Resize(40, 120), plugintest.Stdin("x\n"))
	must.NoError(t, err)
	must.StrContains(t, string(ex.Stdout), "40 120\r\n")
	must.StrContains(t, string(ex.Stdout), "got x\r\n")
	must.StrContains(t, string(ex.Stdout), "oops", must.Sprint("on a terminal stderr joins stdout"))
	must.Eq(t, "", string(ex.Stderr))
	must.Eq(t, 0, ex.Exit.ExitCode)

	must.NoError(t, d.StopTask(cfg.ID, 5*time.Second, "SIGTERM"))
	exit := plugintest.Next(t, waitCh)
	must.NoError(t, exit.Err)
	must.Eq(t, 7, exit.ExitCode)
	must.Zero(t, exit.Signal)
	plugintest.WaitLog(t, cfg.StdoutPath, "term")

	ev := plugintest.Next(t, events)
	must.NoError(t, ev.Err)
	must.Eq(t, cfg.ID, ev.TaskID)
	must.Eq(t, cfg.AllocID, ev.AllocID)
	must.Eq(t, "launcher", ev.TaskName)
	must.StrHasPrefix(t, "Task failed: exit code 7", ev.Message)
	must.Eq(t, map[string]string{"exit_code": "7"}, ev.Annotations)

	st, err = d.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateExited, st.State)
	must.Eq(t, 7, st.ExitResult.ExitCode)
	must.True(t, st.CompletedAt.After(st.StartedAt))
	again, err := d.WaitTask(ctx, cfg.ID)
	must.NoError(t, err)
	must.Eq(t, 7, plugintest.Next(t, again).ExitCode, must.Sprint("WaitTask after the exit answers at once"))
	must.NoError(t, d.DestroyTask(cfg.ID, false))
	_, err = d.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)

	// A worker: the driver's agent on the group's port, stopped by the
	// job's kill signal, exits 0.
	w := newTask(t, d, "worker", workerTask)
	_, _, err = d.StartTask(w)
	must.NoError(t, err)
	t.Cleanup(func() { plugintest.StopTask(d, w.ID) })
	must.NoError(t, plugintest.WaitUntilStarted(d, w.ID, 10*time.Second))
	plugintest.WaitLog(t, filepath.Join(w.TaskDir().SharedAllocDir, drain.AgentStatusPath), "{")
	wst, err := d.InspectTask(w.ID)
	must.NoError(t, err)
	must.Eq(t, "worker", wst.DriverAttributes["role"])
	wait, err := d.WaitTask(ctx, w.ID)
	must.NoError(t, err)
	must.NoError(t, d.StopTask(w.ID, 10*time.Second, "SIGTERM"))
	must.Eq(t, 0, plugintest.Next(t, wait).ExitCode)
	must.NoError(t, d.DestroyTask(w.ID, false))

	// The fingerprint goes on; ending the caller's context ends both
	// streams.
	must.NoError(t, plugintest.Next(t, fp).Err)
	cancel()
	closed(t, fp)
	closed(t, events)
}

// closed fails the test unless ch is closed (after what was on its way)
// within plugintest.StreamTimeout.
func closed[T any](t *testing.T, ch <-chan T) {
	t.Helper()
	timeout := time.After(plugintest.StreamTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-timeout:
			t.Fatal("stream not closed")
		}
	}
}

// After the driver's process is SIGKILLed, the agent starts it again and
// hands it each running task's handle (RecoverTask, the task ID only in
// the handle's config); the driver then serves the task as if it had
// started it. Handles it cannot use are refused, and leave no task.
func TestConformance_Recover(t *testing.T) {
	a := launch(t)
	d := a.Driver(t)
	binDir := fakeBinDir(t)
	configure(t, d, clientConfig(binDir))
	cfg := newTask(t, d, "launcher", launcherTask)
	handle, _, err := d.StartTask(cfg)
	must.NoError(t, err)
	plugintest.WaitLog(t, cfg.StdoutPath, "started")
	before, err := d.InspectTask(cfg.ID)
	must.NoError(t, err)

	must.NoError(t, syscall.Kill(a.Pid(), syscall.SIGKILL))
	deadline := time.Now().Add(10 * time.Second)
	for !a.Exited() {
		must.True(t, time.Now().Before(deadline), must.Sprint("the driver did not die"))
		time.Sleep(20 * time.Millisecond)
	}

	d2 := launch(t).Driver(t)
	configure(t, d2, clientConfig(binDir))
	t.Cleanup(func() { plugintest.StopTask(d2, cfg.ID) })
	_, err = d2.InspectTask(cfg.ID)
	must.ErrorIs(t, err, drivers.ErrTaskNotFound)
	must.NoError(t, d2.RecoverTask(handle))
	must.NoError(t, d2.RecoverTask(handle), must.Sprint("a task the driver knows recovers again"))
	st, err := d2.InspectTask(cfg.ID)
	must.NoError(t, err)
	must.Eq(t, drivers.TaskStateRunning, st.State)
	must.Eq(t, before.DriverAttributes, st.DriverAttributes, must.Sprint("the same process"))
	must.Eq(t, before.StartedAt.UnixMilli(), st.StartedAt.UnixMilli())
	waitCh, err := d2.WaitTask(context.Background(), cfg.ID)
	must.NoError(t, err)
	must.NoError(t, d2.SignalTask(cfg.ID, "SIGUSR1"))
	plugintest.WaitLog(t, cfg.StdoutPath, "usr1")
	ex, err := d2.ExecTask(cfg.ID, []string{"/bin/sh", "-c", "echo $GREETING"}, 10*time.Second)
	must.NoError(t, err)
	must.Eq(t, "hello\n", string(ex.Stdout))
	must.NoError(t, d2.StopTask(cfg.ID, 5*time.Second, "SIGTERM"))
	exit := plugintest.Next(t, waitCh)
	must.NoError(t, exit.Err)
	must.Eq(t, 7, exit.ExitCode, must.Sprint("the supervisor outlived the driver and kept the exit code"))
	must.NoError(t, d2.DestroyTask(cfg.ID, false))

	with := func(f func(h *drivers.TaskHandle)) *drivers.TaskHandle {
		h := handle.Copy()
		h.Config.ID = "other-" + h.Config.ID
		f(h)
		return h
	}
	for _, c := range []struct {
		name   string
		handle *drivers.TaskHandle
		want   string
	}{
		{"no handle", nil, "missing task handle"},
		{"no config", &drivers.TaskHandle{Version: 3, DriverState: handle.DriverState}, "the task handle has no task config"},
		{"no task ID", with(func(h *drivers.TaskHandle) { h.Config.ID = "" }), "the task handle's config has no task ID"},
		{"no state", with(func(h *drivers.TaskHandle) { h.DriverState = nil }), "invalid driver state: the handle has none"},
		{"corrupt state", with(func(h *drivers.TaskHandle) { h.DriverState = []byte("\x85\xa6Runner\x81") }), "failed to decode task state: invalid driver state"},
		{"Nomad's SDK's (msgpack)", with(func(h *drivers.TaskHandle) { h.Version = 2 }), "its handle (version 2) was written by an earlier version of the driver"},
		{"Nomad's executor's", with(func(h *drivers.TaskHandle) { h.Version = 1 }), "its handle (version 1) was written by an earlier version of the driver"},
		{"a destroyed task", with(func(*drivers.TaskHandle) {}), "failed to recover task"},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := d2.RecoverTask(c.handle)
			must.ErrorContains(t, err, c.want)
			if c.handle != nil && c.handle.Config != nil && c.handle.Config.ID != "" {
				_, err := d2.InspectTask(c.handle.Config.ID)
				must.ErrorIs(t, err, drivers.ErrTaskNotFound, must.Sprint("a refused handle leaves no task behind"))
			}
		})
	}
	_, err = d2.PluginInfo()
	must.NoError(t, err, must.Sprint("the driver still serves"))
}

// Inputs the agent does not send, or sends from a bad job or client
// config, get errors that say what is wrong, and the driver keeps serving.
func TestConformance_BadInputs(t *testing.T) {
	a := launch(t)
	d := a.Driver(t)
	binDir := fakeBinDir(t)
	configSpec, err := d.ConfigSchema()
	must.NoError(t, err)
	encode := func(s *hclspec.Spec, body string) []byte { return plugintest.MustEncodeConfig(t, s, body) }

	t.Run("plugin config", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			payload []byte
			want    string
		}{
			{"unknown key", encode(plugintest.WithKey(configSpec, hclspec.NewAttr("colour", "string", false), "colour"), `colour = "red"`), `unknown key "colour"`},
			{"wrong type", encode(plugintest.WithKey(configSpec, hclspec.NewAttr("fingerprint_period", "number", false), "fingerprint_period"), `fingerprint_period = 3`),
				"fingerprint_period: a string is required, got a number"},
			{"wrong element type", encode(plugintest.WithKey(configSpec, hclspec.NewAttr("bin_dirs", "list(number)", false), "bin_dirs"), `bin_dirs = [1]`),
				"bin_dirs.0: a string is required, got a number"},
			{"not msgpack", []byte{0xc1}, "not msgpack"},
			{"a bad period", encode(configSpec, `fingerprint_period = "often"`), `fingerprint_period: must be a positive duration, got "often"`},
			{"a bad module", encode(configSpec, `standby_preload = ["torch; import os"]`), "standby_preload[0]"},
			{"a relative standby_dir", encode(configSpec, `standby_dir = "run"`), "standby_dir"},
			{"a bad port range", encode(configSpec, `dynamic_ports = "32000-20000"`), "dynamic_ports"},
			{"a bad fence", encode(configSpec, `fence_after = "soon"`), "fence_after"},
		} {
			t.Run(c.name, func(t *testing.T) {
				err := d.SetConfig(&base.Config{ApiVersion: drivers.ApiVersion010, PluginConfig: c.payload})
				must.ErrorContains(t, err, c.want)
			})
		}
	})
	configure(t, d, clientConfig(binDir))
	spec, err := d.TaskConfigSchema()
	must.NoError(t, err)

	t.Run("task config", func(t *testing.T) {
		for _, c := range []struct {
			name    string
			payload []byte
			invalid bool // the SDK's InvalidArgument: the config does not fit the schema
			want    string
		}{
			{"unknown key", encode(plugintest.WithKey(spec, hclspec.NewAttr("gpus", "number", false), "gpus"), "role = \"worker\"\ngpus = 2"), true,
				`invalid config: unknown key "gpus" (known: args, blacklist_cooldown, command, discovery, elastic_timeout, env, launcher, max_np, min_np, network_interface, np, port, preload, rdzv_port, rdzv_port_label, reset_limit, role, slots)`},
			{"unknown key in a block", encode(plugintest.WithKey(spec, hclspec.NewAttr("tag", "string", false), "discovery", "tag"),
				"role = \"launcher\"\ndiscovery {\nservice = \"s\"\ntag = \"t\"\n}"), true, `discovery: unknown key "tag"`},
			{"wrong type", encode(plugintest.WithKey(spec, hclspec.NewAttr("np", "string", false), "np"), "role = \"launcher\"\nnp = \"many\""), true,
				"np: a number is required, got a string"},
			{"wrong element type", encode(plugintest.WithKey(spec, hclspec.NewAttr("args", "list(bool)", false), "args"), "role = \"launcher\"\nargs = [true]"), true,
				"args.0: a string is required, got a bool"},
			{"not a whole number", encode(plugintest.WithKey(spec, hclspec.NewAttr("np", "string", false), "np"), "role = \"launcher\"\nnp = \"1.5\""), true,
				"np"},
			{"a missing key", encode(plugintest.WithKey(spec, nil, "role"), ""), true, `key "role" is missing`},
			{"not msgpack", []byte{0xc1, 0x00}, true, "not msgpack"},
			{"none", nil, true, "the task has no driver config"},
			{"a bad role", encode(spec, `role = "boss"`), false, `role: must be "launcher" or "worker", got "boss"`},
			{"a launcher without np", encode(spec, "role = \"launcher\"\ncommand = \"x\"\ndiscovery {\nservice = \"s\"\n}"), false, "np: required for a launcher"},
			{"a launcher without discovery", encode(spec, "role = \"launcher\"\ncommand = \"x\"\nnp = 1"), false, "discovery: a launcher needs a discovery block"},
			{"a worker with a command", encode(spec, "role = \"worker\"\ncommand = \"x\""), false, "command: a worker runs the driver's agent"},
			{"a worker without its port", encode(spec, "role = \"worker\"\nport = \"nope\""), false, `port: no network port labelled "nope"`},
		} {
			t.Run(c.name, func(t *testing.T) {
				cfg := newTask(t, d, "launcher", launcherTask)
				cfg.DriverConfig = c.payload
				_, _, err := d.StartTask(cfg)
				must.ErrorContains(t, err, c.want)
				if c.invalid {
					must.ErrorIs(t, err, drivers.ErrInvalidArgument)
				}
				must.False(t, drivers.IsRecoverable(err))
				_, err = d.InspectTask(cfg.ID)
				must.ErrorIs(t, err, drivers.ErrTaskNotFound)
			})
		}
	})

	t.Run("start", func(t *testing.T) {
		_, _, err := d.StartTask(nil)
		must.ErrorContains(t, err, "missing task config")
		cfg := newTask(t, d, "launcher", launcherTask)
		cfg.ID = ""
		_, _, err = d.StartTask(cfg)
		must.ErrorIs(t, err, drivers.ErrInvalidArgument)
		must.ErrorContains(t, err, "missing task ID")

		cfg = newTask(t, d, "launcher", launcherTask)
		delete(cfg.Env, "HOROVOD_DRIVER_SECRET")
		_, _, err = d.StartTask(cfg)
		must.ErrorContains(t, err, "the task has no HOROVOD_DRIVER_SECRET in its environment")

		cfg = newTask(t, d, "launcher", launcherTask)
		_, _, err = d.StartTask(cfg)
		must.NoError(t, err)
		t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
		_, _, err = d.StartTask(cfg)
		must.ErrorContains(t, err, "already started")
	})

	t.Run("unknown and missing tasks", func(t *testing.T) { plugintest.CheckUnknownTasks(t, d) })

	t.Run("bad requests on a running task", func(t *testing.T) {
		cfg := newTask(t, d, "launcher", launcherTask)
		_, _, err := d.StartTask(cfg)
		must.NoError(t, err)
		t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
		plugintest.WaitLog(t, cfg.StdoutPath, "started")
		must.ErrorContains(t, d.SignalTask(cfg.ID, "SIGNOPE"), `unknown signal "SIGNOPE"`)
		must.ErrorContains(t, d.SignalTask(cfg.ID, ""), "missing signal")
		_, err = d.ExecTask(cfg.ID, nil, time.Second)
		must.ErrorContains(t, err, "missing command")
		_, err = plugintest.Exec(context.Background(), d, cfg.ID, nil, false)
		must.ErrorContains(t, err, "missing command")
		res, err := d.ExecTask(cfg.ID, []string{"/no/such/command"}, 5*time.Second)
		if err == nil {
			must.NotEq(t, 0, res.ExitResult.ExitCode, must.Sprint("a command that does not exist fails"))
		}
		must.ErrorContains(t, d.StopTask(cfg.ID, time.Second, "SIGNOPE"), `unknown signal "SIGNOPE"`)
		must.ErrorContains(t, d.DestroyTask(cfg.ID, false), "it is running")
		st, err := d.InspectTask(cfg.ID)
		must.NoError(t, err)
		must.Eq(t, drivers.TaskStateRunning, st.State, must.Sprint("no bad request touched the task"))
		must.NoError(t, d.DestroyTask(cfg.ID, true))
	})

	_, err = d.PluginInfo()
	must.NoError(t, err, must.Sprint("the driver still serves"))
	must.False(t, a.Exited())
}
