//go:build linux

package drivers_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/leakcheck"
	"github.com/schedulearn/schedulearn/internal/nomadplugin"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
	basepb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/base"
)

// The protocol conformance test of the SDK's driver side: a small driver
// (testdriver_test.go) served by the SDK, driven through go-plugin the way
// Nomad's agent drives a task driver: every RPC in the agent's order, with
// the payloads it sends, and inputs it never sends but a broken agent or a
// bad job could. Each test runs twice: served in process (then no
// goroutine of the SDK or the driver may outlive it) and as a binary (this
// test binary, re-executed, started with the agent's handshake; then no
// process may outlive the tests: leakcheck).

const serveEnv = "SCHEDULEARN_DRIVER_TEST_SERVE"

func TestMain(m *testing.M) {
	if os.Getenv(serveEnv) == "1" {
		nomadplugin.ServeDriver(func(ctx context.Context, logger hclog.Logger) drivers.DriverPlugin {
			return newTestDriver(ctx, logger)
		})
		os.Exit(0)
	}
	os.Exit(leakcheck.Main(m))
}

func pluginCmd() *exec.Cmd {
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), serveEnv+"=1")
	return cmd
}

// transport is one way to reach the test driver.
type transport struct {
	name string
	// serve returns a client of a fresh driver instance.
	serve func(t *testing.T) *drivers.Client
	// restart kills the instance behind the last client (as the driver's
	// process dies) and serves a fresh one; in process it serves a second
	// instance beside the first (whose tasks the second must recover).
	restart func(t *testing.T) *drivers.Client
}

// eachTransport runs f in process and as a binary.
func eachTransport(t *testing.T, f func(t *testing.T, tr transport)) {
	t.Run("in process", func(t *testing.T) {
		noGoroutineLeaks(t)
		serve := func(t *testing.T) *drivers.Client {
			ctx, cancel := context.WithCancel(context.Background())
			t.Cleanup(cancel)
			return plugintest.ServeDriver(t, newTestDriver(ctx, plugintest.Logger(t)))
		}
		f(t, transport{name: "in process", serve: serve, restart: serve})
	})
	t.Run("binary", func(t *testing.T) {
		var last *plugintest.Agent
		serve := func(t *testing.T) *drivers.Client {
			a := plugintest.Launch(t, pluginCmd())
			t.Cleanup(func() {
				if a.Exited() && a != killed.Load() {
					t.Errorf("the plugin exited during the test\n%s", a.Log())
				}
				if strings.Contains(a.Log(), "panic") {
					t.Errorf("the plugin logged a panic:\n%s", a.Log())
				}
			})
			last = a
			return a.Driver(t)
		}
		restart := func(t *testing.T) *drivers.Client {
			// As when the driver's process dies: SIGKILL, no shutdown.
			killed.Store(last)
			must.NoError(t, syscall.Kill(last.Pid(), syscall.SIGKILL))
			eventually(t, last.Exited)
			return serve(t)
		}
		f(t, transport{name: "binary", serve: serve, restart: restart})
	})
}

// killed is the plugin process a test killed on purpose.
var killed atomic.Pointer[plugintest.Agent]

// noGoroutineLeaks fails the test if, once it and its cleanups are done, a
// goroutine of the SDK's driver side or of the test driver is still
// running.
func noGoroutineLeaks(t *testing.T) {
	ours := regexp.MustCompile(`nomadplugin/drivers\.|nomadplugin/internal/relay\.|drivers_test\.\(\*testDriver\)|drivers_test\.\(\*streamWriter\)`)
	t.Cleanup(func() {
		var left []string
		deadline := time.Now().Add(10 * time.Second)
		for {
			buf := make([]byte, 1<<22)
			buf = buf[:runtime.Stack(buf, true)]
			left = left[:0]
			for _, g := range strings.Split(string(buf), "\n\n") {
				if ours.MatchString(g) {
					left = append(left, g)
				}
			}
			if len(left) == 0 || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if len(left) > 0 {
			t.Errorf("%d goroutine(s) outlived the test:\n%s", len(left), strings.Join(left, "\n\n"))
		}
	})
}

// eventually waits up to 10s for cond.
func eventually(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("timed out waiting")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// topology is what the agent sends a driver of a 2-core node.
var topology = &basepb.ClientTopology{
	NodeIds: []uint32{0},
	Cores: []*basepb.ClientTopologyCore{
		{CoreId: 0, BaseSpeed: 2000, MaxSpeed: 3000},
		{CoreId: 1, BaseSpeed: 0, MaxSpeed: 3000},
	},
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
			ClientMinPort: 14000, ClientMaxPort: 14512, Topology: topology,
		}},
	}))
}

var taskSeq atomic.Int64

// newTask is a task config as the agent makes one: IDs, environment,
// resources, an alloc dir with the task's log files, and the task's
// config block encoded with the driver's schema.
func newTask(t *testing.T, d *drivers.Client, body string) *drivers.TaskConfig {
	t.Helper()
	spec, err := d.TaskConfigSchema()
	must.NoError(t, err)
	n := taskSeq.Add(1)
	cfg := &drivers.TaskConfig{
		ID:            fmt.Sprintf("alloc-%d/train/%d", n, n),
		Name:          "train",
		AllocID:       fmt.Sprintf("alloc-%d", n),
		JobID:         "job",
		JobName:       "job",
		TaskGroupName: "group",
		Namespace:     "default",
		NodeID:        "node-1",
		NodeName:      "node",
		Env: map[string]string{
			"PATH":            os.Getenv("PATH"),
			"GREETING":        "hello",
			leakcheck.EnvName: leakcheck.Mark(), // the task's processes are checked too
		},
		DeviceEnv: map[string]string{"NVIDIA_VISIBLE_DEVICES": "GPU-1"},
		Resources: &drivers.Resources{
			NomadResources: &drivers.AllocatedTaskResources{
				Cpu:    drivers.AllocatedCpuResources{CpuShares: 100},
				Memory: drivers.AllocatedMemoryResources{MemoryMB: 64},
			},
			LinuxResources: &drivers.LinuxResources{CPUShares: 100, MemoryLimitBytes: 64 << 20},
		},
	}
	plugintest.MkAllocDir(t, cfg)
	cfg.DriverConfig, err = plugintest.EncodeConfig(spec, body)
	must.NoError(t, err)
	return cfg
}

// longTask runs until stopped: SIGTERM makes it exit 7, SIGUSR1 print.
const longTask = `
command = "/bin/sh"
args    = ["-c", "trap 'echo term; exit 7' TERM; trap 'echo usr1' USR1; echo started $GREETING $EXTRA; while :; do sleep 0.05; done"]
env {
  EXTRA = "extra"
}
limits {
  nice = 1
}
`

// The scan of plugin_dir: the handshake line, then base's PluginInfo and
// ConfigSchema; without the agent's cookie the binary refuses to serve.
func TestConformance_Scan(t *testing.T) {
	plugintest.CheckHandshake(t, pluginCmd)

	a := plugintest.Launch(t, pluginCmd())
	b := a.Base(t)
	info, err := b.PluginInfo()
	must.NoError(t, err)
	must.Eq(t, base.PluginTypeDriver, info.Type)
	must.Eq(t, testDriverName, info.Name)
	must.Eq(t, []string{drivers.ApiVersion010}, info.PluginApiVersions)
	spec, err := b.ConfigSchema()
	must.NoError(t, err)
	_, err = plugintest.EncodeConfig(spec, `fingerprint_period = "5s"`)
	must.NoError(t, err)
}

// A task's whole life, in the agent's order: configure, fingerprint and
// events streams, schema and capabilities, start, wait, inspect, stats,
// signal, exec (one-shot; streaming without and with a terminal), stop,
// the failure event, destroy.
func TestConformance_Lifecycle(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		d := tr.serve(t)
		configure(t, d, `fingerprint_period = "200ms"`)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()

		fp, err := d.Fingerprint(ctx)
		must.NoError(t, err)
		first := plugintest.Next(t, fp)
		must.NoError(t, first.Err)
		must.Eq(t, drivers.HealthStateHealthy, first.Health)
		must.Eq(t, drivers.DriverHealthy, first.HealthDescription)
		must.Eq(t, "0.1.0", *first.Attributes[attrVersion].String)
		must.Eq(t, int64(2), *first.Attributes[attrCores].Int, must.Sprint("the agent's topology reached the driver"))
		events, err := d.TaskEvents(ctx)
		must.NoError(t, err)

		spec, err := d.TaskConfigSchema()
		must.NoError(t, err)
		must.MapContainsKey(t, spec.GetObject().GetAttributes(), "command")
		caps, err := d.Capabilities()
		must.NoError(t, err)
		must.Eq(t, &drivers.Capabilities{
			SendSignals: true, Exec: true, FSIsolation: drivers.FSIsolationNone,
			NetIsolationModes: []drivers.NetIsolationMode{drivers.NetIsolationModeHost, drivers.NetIsolationModeGroup},
			MountConfigs:      drivers.MountConfigSupportNone,
		}, caps)
		must.True(t, caps.HasNetIsolationMode(drivers.NetIsolationModeGroup))

		cfg := newTask(t, d, longTask)
		handle, network, err := d.StartTask(cfg)
		must.NoError(t, err)
		t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
		must.NoError(t, plugintest.WaitUntilStarted(d, cfg.ID, 10*time.Second))
		must.Nil(t, network)
		must.Eq(t, 1, handle.Version)
		must.Eq(t, drivers.TaskStateRunning, handle.State)
		must.Eq(t, cfg, handle.Config, must.Sprint("the handle carries the task config the agent sent, all of it"))
		var state testTaskState
		must.NoError(t, handle.GetDriverState(&state))
		must.Positive(t, state.Pid)
		waitCh, err := d.WaitTask(ctx, cfg.ID)
		must.NoError(t, err)
		plugintest.WaitLog(t, cfg.StdoutPath, "started hello extra")

		st, err := d.InspectTask(cfg.ID)
		must.NoError(t, err)
		must.Eq(t, drivers.TaskStateRunning, st.State)
		must.Eq(t, cfg.ID, st.ID)
		must.Eq(t, "train", st.Name)
		must.False(t, st.StartedAt.IsZero())
		must.True(t, st.CompletedAt.IsZero())
		must.Eq(t, fmt.Sprint(state.Pid), st.DriverAttributes["pid"])

		sctx, scancel := context.WithCancel(ctx)
		stats, err := d.TaskStats(sctx, cfg.ID, 100*time.Millisecond)
		must.NoError(t, err)
		for range 2 {
			u := plugintest.Next(t, stats)
			must.Positive(t, u.ResourceUsage.MemoryStats.RSS)
			must.Eq(t, []string{drivers.MeasuredRSS}, u.ResourceUsage.MemoryStats.Measured)
			must.Eq(t, []string{drivers.MeasuredUserMode, drivers.MeasuredSystemMode}, u.ResourceUsage.CpuStats.Measured)
			must.MapContainsKey(t, u.Pids, fmt.Sprint(state.Pid))
			must.Less(t, time.Minute, time.Since(time.Unix(0, u.Timestamp)))
		}
		scancel()

		must.NoError(t, d.SignalTask(cfg.ID, "SIGUSR1"))
		plugintest.WaitLog(t, cfg.StdoutPath, "usr1")

		res, err := d.ExecTask(cfg.ID, []string{"/bin/sh", "-c", "echo out $GREETING; echo err >&2; exit 3"}, 10*time.Second)
		must.NoError(t, err)
		must.Eq(t, "out hello\n", string(res.Stdout))
		must.Eq(t, "err\n", string(res.Stderr))
		must.Eq(t, 3, res.ExitResult.ExitCode)

		ex, err := plugintest.Exec(ctx, d, cfg.ID, []string{"cat"}, false, plugintest.Stdin("hello "), plugintest.Stdin("world\n"), plugintest.StdinClose())
		must.NoError(t, err)
		must.Eq(t, "hello world\n", string(ex.Stdout))
		must.True(t, ex.StdoutClosed && ex.StderrClosed)
		must.Eq(t, &drivers.ExitResult{}, ex.Exit)
		must.Zero(t, ex.AfterExit)

		ex, err = plugintest.Exec(ctx, d, cfg.ID, []string{"/bin/sh", "-c", "read l; echo got $l; echo oops >&2; exit 4"}, true,
			plugintest.Resize(24, 80), plugintest.Stdin("x\n"))
		must.NoError(t, err)
		must.StrContains(t, string(ex.Stdout), "resize 24x80\n")
		must.StrContains(t, string(ex.Stdout), "got x\n")
		must.StrContains(t, string(ex.Stdout), "oops\n", must.Sprint("on a terminal stderr joins stdout"))
		must.Eq(t, "", string(ex.Stderr))
		must.Eq(t, 4, ex.Exit.ExitCode)

		must.NoError(t, d.StopTask(cfg.ID, 5*time.Second, "SIGTERM"))
		exit := plugintest.Next(t, waitCh)
		must.NoError(t, exit.Err)
		must.Eq(t, 7, exit.ExitCode)
		must.Zero(t, exit.Signal)
		must.False(t, exit.Successful())

		ev := plugintest.Next(t, events)
		must.NoError(t, ev.Err)
		must.Eq(t, cfg.ID, ev.TaskID)
		must.Eq(t, cfg.AllocID, ev.AllocID)
		must.Eq(t, "train", ev.TaskName)
		must.Eq(t, "Task failed: exit code 7", ev.Message)
		must.Eq(t, map[string]string{"exit_code": "7"}, ev.Annotations)
		must.Less(t, time.Minute, time.Since(ev.Timestamp))

		st, err = d.InspectTask(cfg.ID)
		must.NoError(t, err)
		must.Eq(t, drivers.TaskStateExited, st.State)
		must.Eq(t, 7, st.ExitResult.ExitCode)
		must.True(t, st.CompletedAt.After(st.StartedAt))

		// WaitTask after the exit answers at once, as often as asked.
		again, err := d.WaitTask(ctx, cfg.ID)
		must.NoError(t, err)
		must.Eq(t, 7, plugintest.Next(t, again).ExitCode)

		must.NoError(t, d.DestroyTask(cfg.ID, false))
		_, err = d.InspectTask(cfg.ID)
		must.ErrorIs(t, err, drivers.ErrTaskNotFound)

		// The fingerprint goes on; ending the caller's context ends both
		// streams.
		must.NoError(t, plugintest.Next(t, fp).Err)
		cancel()
		plugintest.Closed(t, fp)
		plugintest.Closed(t, events)
	})
}

// After the driver restarts, the agent hands it each running task's handle
// (RecoverTask, with the task ID only in the handle's config); the driver
// then serves the task as if it had started it. Bad handles are refused.
func TestConformance_Recover(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		d := tr.serve(t)
		configure(t, d, "")
		cfg := newTask(t, d, longTask)
		handle, _, err := d.StartTask(cfg)
		must.NoError(t, err)
		t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
		plugintest.WaitLog(t, cfg.StdoutPath, "started")

		d2 := tr.restart(t)
		configure(t, d2, "")
		t.Cleanup(func() { plugintest.StopTask(d2, cfg.ID) })
		must.NoError(t, d2.RecoverTask(handle))
		must.NoError(t, d2.RecoverTask(handle), must.Sprint("a task the driver knows recovers again"))
		st, err := d2.InspectTask(cfg.ID)
		must.NoError(t, err)
		must.Eq(t, drivers.TaskStateRunning, st.State)
		waitCh, err := d2.WaitTask(context.Background(), cfg.ID)
		must.NoError(t, err)
		must.NoError(t, d2.SignalTask(cfg.ID, "SIGUSR1"))
		plugintest.WaitLog(t, cfg.StdoutPath, "usr1")
		must.NoError(t, d2.StopTask(cfg.ID, 5*time.Second, "SIGTERM"))
		exit := plugintest.Next(t, waitCh)
		must.ErrorContains(t, exit.Err, "exit status unknown", must.Sprint("the wait's error travels as the agent reads it"))
		must.NoError(t, d2.DestroyTask(cfg.ID, false))

		// Bad handles: none, no config, no ID, no or corrupt state, another
		// version, a process that is gone.
		with := func(f func(h *drivers.TaskHandle)) *drivers.TaskHandle {
			h := handle.Copy()
			h.Config.ID = "other-" + h.Config.ID
			f(h)
			return h
		}
		cases := []struct {
			name   string
			handle *drivers.TaskHandle
			want   string
		}{
			{"no handle", nil, "missing task handle"},
			{"no config", &drivers.TaskHandle{Version: 1, DriverState: handle.DriverState}, "the task handle has no task config"},
			{"no task ID", with(func(h *drivers.TaskHandle) { h.Config.ID = "" }), "the task handle's config has no task ID"},
			{"no state", with(func(h *drivers.TaskHandle) { h.DriverState = nil }), "invalid driver state: the handle has none"},
			{"corrupt state", with(func(h *drivers.TaskHandle) { h.DriverState = []byte("\x82\xa3Pid\x01") }), "invalid driver state (version 1)"},
			{"another version", with(func(h *drivers.TaskHandle) { h.Version = 9 }), "handle version 9"},
			{"process gone", with(func(*drivers.TaskHandle) {}), "is gone"},
		}
		for _, tc := range cases {
			t.Run(tc.name, func(t *testing.T) {
				err := d2.RecoverTask(tc.handle)
				must.ErrorContains(t, err, tc.want)
				if tc.handle != nil && tc.handle.Config != nil && tc.handle.Config.ID != "" {
					_, err := d2.InspectTask(tc.handle.Config.ID)
					must.ErrorIs(t, err, drivers.ErrTaskNotFound, must.Sprint("a refused handle leaves no task behind"))
				}
			})
		}
	})
}

// Inputs the agent does not send, or sends from a bad job, get errors that
// say what is wrong, and the driver keeps serving.
func TestConformance_BadInputs(t *testing.T) {
	eachTransport(t, func(t *testing.T, tr transport) {
		d := tr.serve(t)
		configSpec, err := d.ConfigSchema()
		must.NoError(t, err)
		encode := func(s *hclspec.Spec, body string) []byte { return plugintest.MustEncodeConfig(t, s, body) }

		t.Run("plugin config", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				payload []byte
				want    string
			}{
				{"unknown key", encode(plugintest.WithKey(configSpec, hclspec.NewAttr("colour", "string", false), "colour"), `colour = "red"`), `unknown key "colour"`},
				{"wrong type", encode(plugintest.WithKey(configSpec, hclspec.NewAttr("fingerprint_period", "number", false), "fingerprint_period"), `fingerprint_period = 3`),
					"fingerprint_period: a string is required, got a number"},
				{"not msgpack", []byte{0xc1}, "not msgpack"},
				{"a bad value", encode(configSpec, `fingerprint_period = "often"`), `fingerprint_period: "often" is not a positive duration`},
			} {
				t.Run(tc.name, func(t *testing.T) {
					err := d.SetConfig(&base.Config{ApiVersion: drivers.ApiVersion010, PluginConfig: tc.payload})
					must.ErrorContains(t, err, tc.want)
				})
			}
		})
		configure(t, d, "")
		spec, err := d.TaskConfigSchema()
		must.NoError(t, err)

		t.Run("task config", func(t *testing.T) {
			for _, tc := range []struct {
				name    string
				payload []byte
				want    string
			}{
				{"unknown key", encode(plugintest.WithKey(spec, hclspec.NewAttr("colour", "string", false), "colour"), "command = \"true\"\ncolour = \"red\""),
					`invalid config: unknown key "colour" (known: args, command, env, limits)`},
				{"unknown key in a block", encode(plugintest.WithKey(spec, hclspec.NewAttr("colour", "string", false), "limits", "colour"),
					"command = \"true\"\nlimits {\ncolour = \"red\"\n}"), `limits: unknown key "colour"`},
				{"wrong type", encode(plugintest.WithKey(spec, hclspec.NewAttr("command", "number", true), "command"), "command = 3"),
					"command: a string is required, got a number"},
				{"wrong element type", encode(plugintest.WithKey(spec, hclspec.NewAttr("args", "list(number)", false), "args"), "command = \"true\"\nargs = [1]"),
					"args.0: a string is required, got a number"},
				{"wrong type in a block", encode(plugintest.WithKey(spec, hclspec.NewAttr("nice", "string", false), "limits", "nice"),
					"command = \"true\"\nlimits {\nnice = \"low\"\n}"), "limits.nice: a number is required, got a string"},
				{"a missing key", encode(plugintest.WithKey(spec, nil, "command"), ""), `key "command" is missing`},
				{"not msgpack", []byte{0xc1, 0x00}, "not msgpack"},
				{"none", nil, "the task has no driver config"},
			} {
				t.Run(tc.name, func(t *testing.T) {
					cfg := newTask(t, d, `command = "true"`)
					cfg.DriverConfig = tc.payload
					_, _, err := d.StartTask(cfg)
					must.ErrorContains(t, err, tc.want)
					must.ErrorIs(t, err, drivers.ErrInvalidArgument)
					must.False(t, drivers.IsRecoverable(err))
					_, err = d.InspectTask(cfg.ID)
					must.ErrorIs(t, err, drivers.ErrTaskNotFound)
				})
			}
		})

		t.Run("start", func(t *testing.T) {
			_, _, err := d.StartTask(nil)
			must.ErrorContains(t, err, "missing task config")
			cfg := newTask(t, d, `command = "true"`)
			cfg.ID = ""
			_, _, err = d.StartTask(cfg)
			must.ErrorIs(t, err, drivers.ErrInvalidArgument)
			must.ErrorContains(t, err, "missing task ID")

			cfg = newTask(t, d, longTask)
			_, _, err = d.StartTask(cfg)
			must.NoError(t, err)
			id := cfg.ID
			t.Cleanup(func() { plugintest.StopTask(d, id) })
			_, _, err = d.StartTask(cfg)
			must.ErrorContains(t, err, "already started")

			// A driver's recoverable error reaches the agent as one.
			cfg = newTask(t, d, `command = "true"`)
			cfg.StdoutPath = filepath.Join(t.TempDir(), "missing", "stdout")
			_, _, err = d.StartTask(cfg)
			must.ErrorContains(t, err, "failed to open stdout")
			must.True(t, drivers.IsRecoverable(err))
		})

		t.Run("unknown and missing tasks", func(t *testing.T) { plugintest.CheckUnknownTasks(t, d) })

		t.Run("bad requests on a running task", func(t *testing.T) {
			cfg := newTask(t, d, longTask)
			_, _, err := d.StartTask(cfg)
			must.NoError(t, err)
			t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
			must.ErrorContains(t, d.SignalTask(cfg.ID, "SIGNOPE"), `unknown signal "SIGNOPE"`)
			must.ErrorContains(t, d.SignalTask(cfg.ID, ""), "missing signal")
			_, err = d.ExecTask(cfg.ID, nil, time.Second)
			must.ErrorContains(t, err, "missing command")
			_, err = plugintest.Exec(context.Background(), d, cfg.ID, nil, false)
			must.ErrorContains(t, err, "missing command")
			_, err = d.ExecTask(cfg.ID, []string{"/no/such/command"}, time.Second)
			must.ErrorContains(t, err, "failed to exec in task")
			must.ErrorContains(t, d.StopTask(cfg.ID, time.Second, "SIGNOPE"), `unknown signal "SIGNOPE"`)
			must.ErrorContains(t, d.DestroyTask(cfg.ID, false), "it is running")
			st, err := d.InspectTask(cfg.ID)
			must.NoError(t, err)
			must.Eq(t, drivers.TaskStateRunning, st.State, must.Sprint("no bad request touched the task"))
			must.NoError(t, d.DestroyTask(cfg.ID, true))
		})

		_, err = d.PluginInfo()
		must.NoError(t, err, must.Sprint("the driver still serves"))
	})
}

// noExecDriver hides the test driver's interactive exec.
type noExecDriver struct{ drivers.DriverPlugin }

// A driver without interactive exec answers the agent's ExecTaskStreaming
// with Unimplemented, and what the agent reads without nil checks is
// filled even when the driver leaves it out.
func TestConformance_WithoutExecStreaming(t *testing.T) {
	noGoroutineLeaks(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	d := plugintest.ServeDriver(t, noExecDriver{newTestDriver(ctx, hclog.NewNullLogger())})
	cfg := newTask(t, d, longTask)
	_, _, err := d.StartTask(cfg)
	must.NoError(t, err)
	t.Cleanup(func() { plugintest.StopTask(d, cfg.ID) })
	_, err = plugintest.Exec(ctx, d, cfg.ID, []string{"true"}, false)
	must.ErrorContains(t, err, "the driver does not serve interactive exec")
	must.False(t, errors.Is(err, drivers.ErrTaskNotFound))
}
