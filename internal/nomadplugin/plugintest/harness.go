package plugintest

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/device"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
)

// ServeDevice serves impl in process over a real gRPC connection
// (go-plugin's test transport, without a process or handshake) and returns
// the agent's client for it. It points TMPDIR at a test directory, where
// go-plugin leaves its socket, so the test must not be parallel, unless
// the test binary called UseSocketDir.
func ServeDevice(t testing.TB, impl device.DevicePlugin) *device.Client {
	t.Helper()
	return serveInProcess[*device.Client](t, device.PluginSet(impl), base.PluginTypeDevice)
}

// ServeDriver serves a driver in process, as ServeDevice serves a device
// plugin, and returns the agent's client for it.
func ServeDriver(t testing.TB, impl drivers.DriverPlugin) *drivers.Client {
	t.Helper()
	return serveInProcess[*drivers.Client](t, drivers.PluginSet(impl), base.PluginTypeDriver)
}

// socketDir is where in-process plugins leave their sockets, when the test
// binary chose one (UseSocketDir).
var socketDir atomic.Bool

// UseSocketDir points TMPDIR at dir for the rest of the test binary (call
// it from TestMain, and remove dir after the tests): go-plugin leaves each
// in-process plugin's socket there, and ServeDevice and ServeDriver then
// leave TMPDIR alone, so tests that serve plugins may run in parallel.
// Every temporary file of the binary goes there too (t.TempDir included).
func UseSocketDir(dir string) error {
	if err := os.Setenv("TMPDIR", dir); err != nil {
		return err
	}
	socketDir.Store(true)
	return nil
}

func serveInProcess[T any](t testing.TB, set plugin.PluginSet, name string) T {
	t.Helper()
	if !socketDir.Load() {
		t.Setenv("TMPDIR", t.TempDir())
	}
	client, _ := plugin.TestPluginGRPCConn(t, true, set)
	// Close asks the server to stop over gRPC; stopping the server here as
	// well races inside go-plugin (two GRPCServer.Stop calls).
	t.Cleanup(func() { _ = client.Close() })
	return dispense[T](t, client, name)
}

// Agent is a plugin process started the way Nomad's agent starts one.
type Agent struct {
	client *plugin.Client
	rpc    plugin.ClientProtocol
	log    *syncBuffer
}

// Launch starts cmd as the agent starts a binary from plugin_dir: the
// handshake cookie in its environment, gRPC only, the plugin's JSON log
// read from its stderr. It fails the test when the handshake fails; the
// process is killed when the test ends, and its log is printed if the test
// failed.
func Launch(t testing.TB, cmd *exec.Cmd) *Agent {
	t.Helper()
	log := &syncBuffer{}
	client := plugin.NewClient(&plugin.ClientConfig{
		HandshakeConfig: base.Handshake,
		Plugins: plugin.PluginSet{
			base.PluginTypeBase:   &base.Plugin{},
			base.PluginTypeDevice: &device.Plugin{},
			base.PluginTypeDriver: &drivers.Plugin{},
		},
		Cmd:              cmd,
		AllowedProtocols: []plugin.Protocol{plugin.ProtocolGRPC},
		Logger:           hclog.New(&hclog.LoggerOptions{Name: "agent", Level: hclog.Trace, Output: log}),
	})
	t.Cleanup(func() {
		client.Kill()
		if t.Failed() {
			t.Logf("plugin log:\n%s", log.String())
		}
	})
	rpc, err := client.Client()
	if err != nil {
		t.Fatalf("failed to start plugin %s: %v\nplugin log:\n%s", cmd.Path, err, log.String())
	}
	return &Agent{client: client, rpc: rpc, log: log}
}

// Base dispenses the base service, as the agent does to learn what a
// binary is.
func (a *Agent) Base(t testing.TB) *base.Client {
	t.Helper()
	return dispense[*base.Client](t, a.rpc, base.PluginTypeBase)
}

// Device dispenses the device service.
func (a *Agent) Device(t testing.TB) *device.Client {
	t.Helper()
	return dispense[*device.Client](t, a.rpc, base.PluginTypeDevice)
}

// Driver dispenses the driver service.
func (a *Agent) Driver(t testing.TB) *drivers.Client {
	t.Helper()
	return dispense[*drivers.Client](t, a.rpc, base.PluginTypeDriver)
}

// Pid is the plugin process's pid.
func (a *Agent) Pid() int {
	if rc := a.client.ReattachConfig(); rc != nil {
		return rc.Pid
	}
	return 0
}

// Exited reports whether the plugin process has exited.
func (a *Agent) Exited() bool { return a.client.Exited() }

// Kill ends the plugin as the agent does.
func (a *Agent) Kill() { a.client.Kill() }

// Log is what the plugin and go-plugin logged so far.
func (a *Agent) Log() string { return a.log.String() }

func dispense[T any](t testing.TB, rpc plugin.ClientProtocol, name string) T {
	t.Helper()
	raw, err := rpc.Dispense(name)
	if err != nil {
		t.Fatalf("failed to dispense %q: %v", name, err)
	}
	v, ok := raw.(T)
	if !ok {
		t.Fatalf("dispensed %q is a %T", name, raw)
	}
	return v
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// CheckHandshake checks what a plugin binary does before any RPC, as the
// agent sees it: started by newCmd with the agent's cookie it prints
// go-plugin's handshake line (core protocol 1, Nomad's protocol version 2,
// a unix socket, gRPC); without the cookie it says it is a plugin and
// exits non-zero.
func CheckHandshake(t testing.TB, newCmd func() *exec.Cmd) {
	t.Helper()
	cmd := newCmd()
	cmd.Env = append(cmd.Env, base.Handshake.MagicCookieKey+"="+base.Handshake.MagicCookieValue)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		t.Fatalf("no handshake line: %v", err)
	}
	fields := strings.Split(strings.TrimSpace(line), "|")
	if len(fields) != 6 || fields[0] != "1" || fields[1] != "2" || fields[2] != "unix" || fields[4] != "grpc" {
		t.Fatalf("handshake line %q: want 1|2|unix|<socket>|grpc|", line)
	}

	out, err := newCmd().CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("without the cookie: want a non-zero exit, got %v", err)
	}
	if !strings.Contains(string(out), "This binary is a plugin") {
		t.Fatalf("without the cookie: unexpected output %q", out)
	}
}

// Logger is a logger that writes to the test's log (a plugin served in
// process logs there), until the test's cleanups have run; later lines
// are dropped (testing forbids logging after a test).
func Logger(t testing.TB) hclog.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() { w.done.Store(true) })
	return hclog.New(&hclog.LoggerOptions{Name: "plugin", Level: hclog.Trace, Output: w})
}

type testWriter struct {
	t    testing.TB
	done atomic.Bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	if !w.done.Load() {
		w.t.Log(strings.TrimRight(string(p), "\n"))
	}
	return len(p), nil
}
