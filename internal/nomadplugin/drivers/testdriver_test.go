//go:build linux

package drivers_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/shared"
)

// testDriver is a small task driver on the SDK for its conformance test:
// a task is a process (its config block names the command), started in a
// process group of its own with the task's environment, output to the
// task's stdout and stderr paths. It does just enough of what a driver
// does to exercise every RPC with real processes; a recovered task is
// watched through /proc, its exit status unknown.

const (
	testDriverName    = "conformance"
	testHandleVersion = 1
	attrVersion       = "driver.conformance.version"
	attrCores         = "driver.conformance.cores"
)

var testConfigSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"fingerprint_period": hclspec.NewDefault(hclspec.NewAttr("fingerprint_period", "string", false), hclspec.NewLiteral(`"1s"`)),
})

type testConfig struct {
	FingerprintPeriod string `cty:"fingerprint_period"`
}

var testTaskSpec = hclspec.NewObject(map[string]*hclspec.Spec{
	"command": hclspec.NewAttr("command", "string", true),
	"args":    hclspec.NewAttr("args", "list(string)", false),
	"env":     hclspec.NewBlockAttrs("env", "string", false),
	"limits": hclspec.NewBlock("limits", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"nice": hclspec.NewDefault(hclspec.NewAttr("nice", "number", false), hclspec.NewLiteral(`0`)),
	})),
})

type testTaskConfig struct {
	Command string            `cty:"command"`
	Args    []string          `cty:"args"`
	Env     map[string]string `cty:"env"`
	Limits  *testLimits       `cty:"limits"`
}

type testLimits struct {
	Nice int `cty:"nice"`
}

// testTaskState is the driver state in a task's handle.
type testTaskState struct {
	Pid       int
	PidStart  uint64 // the process's start time (/proc), against pid reuse
	StartedAt time.Time
}

type testDriver struct {
	ctx    context.Context
	logger hclog.Logger
	events *drivers.Eventer

	mu      sync.Mutex
	period  time.Duration
	compute base.Compute
	tasks   map[string]*testTask
}

type testTask struct {
	cfg       *drivers.TaskConfig
	pid       int
	startedAt time.Time
	done      chan struct{} // closed once exit is set
	mu        sync.Mutex
	exit      *drivers.ExitResult
	ended     time.Time
}

func newTestDriver(ctx context.Context, logger hclog.Logger) *testDriver {
	return &testDriver{ctx: ctx, logger: logger, events: drivers.NewEventer(ctx, logger),
		period: time.Second, tasks: map[string]*testTask{}}
}

func (d *testDriver) PluginInfo() (*base.PluginInfo, error) {
	return &base.PluginInfo{Type: base.PluginTypeDriver, PluginApiVersions: []string{drivers.ApiVersion010},
		PluginVersion: "0.1.0", Name: testDriverName}, nil
}

func (d *testDriver) ConfigSchema() (*hclspec.Spec, error) { return testConfigSpec, nil }

func (d *testDriver) SetConfig(cfg *base.Config) error {
	c := testConfig{FingerprintPeriod: "1s"}
	if len(cfg.PluginConfig) > 0 {
		if err := hclspec.Decode(testConfigSpec, cfg.PluginConfig, &c); err != nil {
			return err
		}
	}
	period, err := time.ParseDuration(c.FingerprintPeriod)
	if err != nil || period <= 0 {
		return fmt.Errorf("fingerprint_period: %q is not a positive duration", c.FingerprintPeriod)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.period = period
	d.compute = cfg.AgentConfig.Compute()
	return nil
}

func (d *testDriver) TaskConfigSchema() (*hclspec.Spec, error) { return testTaskSpec, nil }

func (d *testDriver) Capabilities() (*drivers.Capabilities, error) {
	return &drivers.Capabilities{
		SendSignals:       true,
		Exec:              true,
		FSIsolation:       drivers.FSIsolationNone,
		NetIsolationModes: []drivers.NetIsolationMode{drivers.NetIsolationModeHost, drivers.NetIsolationModeGroup},
		MountConfigs:      drivers.MountConfigSupportNone,
	}, nil
}

func (d *testDriver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		for {
			d.mu.Lock()
			period, cores := d.period, d.compute.Cores
			d.mu.Unlock()
			fp := &drivers.Fingerprint{
				Health:            drivers.HealthStateHealthy,
				HealthDescription: drivers.DriverHealthy,
				Attributes: map[string]*shared.Attribute{
					attrVersion: shared.StringAttribute("0.1.0"),
					attrCores:   shared.IntAttribute(int64(cores), ""),
				},
			}
			select {
			case ch <- fp:
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
			select {
			case <-time.After(period):
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			}
		}
	}()
	return ch, nil
}

func (d *testDriver) task(id string) (*testTask, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	t, ok := d.tasks[id]
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return t, nil
}

func (d *testDriver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	if _, err := d.task(cfg.ID); err == nil {
		return nil, nil, fmt.Errorf("failed to start task: task %q already started", cfg.ID)
	}
	var tc testTaskConfig
	if err := cfg.DecodeDriverConfig(testTaskSpec, &tc); err != nil {
		return nil, nil, fmt.Errorf("failed to decode driver config: %w", err)
	}
	stdout, err := os.OpenFile(cfg.StdoutPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, drivers.NewRecoverableError(fmt.Errorf("failed to open stdout: %w", err), true)
	}
	defer stdout.Close()
	stderr, err := os.OpenFile(cfg.StderrPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return nil, nil, drivers.NewRecoverableError(fmt.Errorf("failed to open stderr: %w", err), true)
	}
	defer stderr.Close()
	cmd := exec.Command(tc.Command, tc.Args...)
	cmd.Dir = cfg.TaskDir().Dir
	cmd.Env = taskEnv(cfg, tc.Env)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, nil, fmt.Errorf("failed to start task: %w", err)
	}
	t := &testTask{cfg: cfg, pid: cmd.Process.Pid, startedAt: time.Now(), done: make(chan struct{})}
	start, _ := procStart(t.pid)
	handle := drivers.NewTaskHandle(testHandleVersion)
	handle.Config = cfg
	handle.State = drivers.TaskStateRunning
	if err := handle.SetDriverState(&testTaskState{Pid: t.pid, PidStart: start, StartedAt: t.startedAt}); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, nil, err
	}
	d.mu.Lock()
	d.tasks[cfg.ID] = t
	d.mu.Unlock()
	go func() {
		err := cmd.Wait()
		res := &drivers.ExitResult{ExitCode: cmd.ProcessState.ExitCode()}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Signal = int(ws.Signal())
			res.ExitCode = 128 + res.Signal
		} else if err != nil && !errors.As(err, new(*exec.ExitError)) {
			res.Err = err
		}
		d.exited(t, res)
	}()
	return handle, nil, nil
}

// exited records how the task ended, and reports a failure as a task
// event, as a driver does.
func (d *testDriver) exited(t *testTask, res *drivers.ExitResult) {
	t.mu.Lock()
	t.exit, t.ended = res, time.Now()
	t.mu.Unlock()
	close(t.done)
	if !res.Successful() {
		_ = d.events.EmitEvent(&drivers.TaskEvent{
			TaskID: t.cfg.ID, AllocID: t.cfg.AllocID, TaskName: t.cfg.Name,
			Message:     fmt.Sprintf("Task failed: exit code %d", res.ExitCode),
			Annotations: map[string]string{"exit_code": strconv.Itoa(res.ExitCode)},
		})
	}
}

func taskEnv(cfg *drivers.TaskConfig, extra map[string]string) []string {
	env := cfg.EnvList()
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

func (d *testDriver) RecoverTask(h *drivers.TaskHandle) error {
	if _, err := d.task(h.Config.ID); err == nil {
		return nil
	}
	if h.Version != testHandleVersion {
		return fmt.Errorf("failed to recover task: handle version %d, want %d", h.Version, testHandleVersion)
	}
	var st testTaskState
	if err := h.GetDriverState(&st); err != nil {
		return fmt.Errorf("failed to recover task: %w", err)
	}
	if start, ok := procStart(st.Pid); !ok || start != st.PidStart {
		return fmt.Errorf("failed to recover task: its process %d is gone", st.Pid)
	}
	t := &testTask{cfg: h.Config, pid: st.Pid, startedAt: st.StartedAt, done: make(chan struct{})}
	d.mu.Lock()
	d.tasks[h.Config.ID] = t
	d.mu.Unlock()
	go func() {
		// Not our child: watch it until it is gone; its status is lost.
		for {
			if start, ok := procStart(st.Pid); !ok || start != st.PidStart {
				d.exited(t, &drivers.ExitResult{Err: errors.New("exit status unknown: the task was recovered")})
				return
			}
			select {
			case <-time.After(20 * time.Millisecond):
			case <-d.ctx.Done():
				return
			}
		}
	}()
	return nil
}

// procStart is a live (not zombie) process's start time.
func procStart(pid int) (uint64, bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, false
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return 0, false
	}
	start, err := strconv.ParseUint(f[19], 10, 64)
	return start, err == nil
}

func (d *testDriver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	t, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.ExitResult, 1)
	go func() {
		defer close(ch)
		select {
		case <-t.done:
			t.mu.Lock()
			ch <- t.exit.Copy()
			t.mu.Unlock()
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

var testSignals = map[string]syscall.Signal{
	"SIGHUP": syscall.SIGHUP, "SIGINT": syscall.SIGINT, "SIGQUIT": syscall.SIGQUIT, "SIGKILL": syscall.SIGKILL,
	"SIGTERM": syscall.SIGTERM, "SIGUSR1": syscall.SIGUSR1, "SIGUSR2": syscall.SIGUSR2,
}

func signalOf(name string) (syscall.Signal, error) {
	sig, ok := testSignals[name]
	if !ok {
		return 0, fmt.Errorf("unknown signal %q", name)
	}
	return sig, nil
}

func (d *testDriver) StopTask(taskID string, timeout time.Duration, signal string) error {
	t, err := d.task(taskID)
	if err != nil {
		return err
	}
	if signal == "" {
		signal = "SIGTERM"
	}
	sig, err := signalOf(signal)
	if err != nil {
		return fmt.Errorf("failed to stop task: %w", err)
	}
	_ = syscall.Kill(-t.pid, sig)
	select {
	case <-t.done:
		return nil
	case <-time.After(timeout):
	}
	_ = syscall.Kill(-t.pid, syscall.SIGKILL)
	select {
	case <-t.done:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("failed to stop task: process %d did not exit", t.pid)
	}
}

func (d *testDriver) DestroyTask(taskID string, force bool) error {
	t, err := d.task(taskID)
	if err != nil {
		return err
	}
	select {
	case <-t.done:
	default:
		if !force {
			return errors.New("failed to destroy task: it is running (use force)")
		}
		if err := d.StopTask(taskID, 0, "SIGKILL"); err != nil {
			return err
		}
	}
	d.mu.Lock()
	delete(d.tasks, taskID)
	d.mu.Unlock()
	return nil
}

func (d *testDriver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	t, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &drivers.TaskStatus{
		ID: t.cfg.ID, Name: t.cfg.Name, State: drivers.TaskStateRunning, StartedAt: t.startedAt,
		DriverAttributes: map[string]string{"pid": strconv.Itoa(t.pid)},
	}
	if t.exit != nil {
		st.State, st.CompletedAt, st.ExitResult = drivers.TaskStateExited, t.ended, t.exit.Copy()
	}
	return st, nil
}

// TaskStats reads the task process's cpu time and RSS from /proc.
func (d *testDriver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	t, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	ch := make(chan *drivers.TaskResourceUsage)
	go func() {
		defer close(ch)
		for {
			u := procUsage(t.pid)
			select {
			case ch <- &drivers.TaskResourceUsage{ResourceUsage: u, Timestamp: time.Now().UnixNano(),
				Pids: map[string]*drivers.ResourceUsage{strconv.Itoa(t.pid): u}}:
			case <-ctx.Done():
				return
			case <-t.done:
				return
			}
			select {
			case <-time.After(interval):
			case <-ctx.Done():
				return
			case <-t.done:
				return
			}
		}
	}()
	return ch, nil
}

func procUsage(pid int) *drivers.ResourceUsage {
	u := &drivers.ResourceUsage{MemoryStats: &drivers.MemoryStats{}, CpuStats: &drivers.CpuStats{}}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "statm")); err == nil {
		if f := strings.Fields(string(b)); len(f) > 1 {
			pages, _ := strconv.ParseUint(f[1], 10, 64)
			u.MemoryStats.RSS = pages * uint64(os.Getpagesize())
			u.MemoryStats.Measured = []string{drivers.MeasuredRSS}
		}
	}
	if b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat")); err == nil {
		if i := bytes.LastIndexByte(b, ')'); i > 0 {
			if f := strings.Fields(string(b[i+1:])); len(f) > 13 {
				ut, _ := strconv.ParseFloat(f[11], 64)
				st, _ := strconv.ParseFloat(f[12], 64)
				u.CpuStats.UserMode, u.CpuStats.SystemMode = ut, st
				u.CpuStats.Measured = []string{drivers.MeasuredUserMode, drivers.MeasuredSystemMode}
			}
		}
	}
	return u
}

func (d *testDriver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.events.TaskEvents(ctx)
}

func (d *testDriver) SignalTask(taskID string, signal string) error {
	t, err := d.task(taskID)
	if err != nil {
		return err
	}
	sig, err := signalOf(signal)
	if err != nil {
		return fmt.Errorf("failed to signal task: %w", err)
	}
	return syscall.Kill(t.pid, sig)
}

func (d *testDriver) execCmd(ctx context.Context, t *testTask, command []string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, command[0], command[1:]...)
	cmd.Dir = t.cfg.TaskDir().Dir
	cmd.Env = taskEnv(t.cfg, nil)
	return cmd
}

func (d *testDriver) ExecTask(taskID string, command []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	t, err := d.task(taskID)
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	var stdout, stderr bytes.Buffer
	cmd := d.execCmd(ctx, t, command)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		return nil, fmt.Errorf("failed to exec in task: %w", err)
	}
	return &drivers.ExecTaskResult{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(),
		ExitResult: &drivers.ExitResult{ExitCode: cmd.ProcessState.ExitCode()}}, nil
}

// ExecTaskStreamingRaw runs the command with pipes. With a terminal (no
// pty here) its stderr joins its stdout, and each terminal size received
// is written to the output as "resize <rows>x<cols>".
func (d *testDriver) ExecTaskStreamingRaw(ctx context.Context, taskID string, command []string, tty bool, stream drivers.ExecTaskStream) error {
	t, err := d.task(taskID)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := d.execCmd(ctx, t, command)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	stdout := &streamWriter{send: stream.Send}
	stderr := &streamWriter{send: stream.Send, stderr: !tty}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("failed to exec in task: %w", err)
	}
	go func() {
		defer stdin.Close()
		for {
			m, err := stream.Recv()
			if err != nil {
				return
			}
			switch {
			case m.TtySize != nil && tty:
				_, _ = fmt.Fprintf(stdout, "resize %dx%d\n", m.TtySize.Height, m.TtySize.Width)
			case m.Stdin != nil && m.Stdin.Close:
				return
			case m.Stdin != nil:
				if _, err := stdin.Write(m.Stdin.Data); err != nil {
					return
				}
			}
		}
	}()
	err = cmd.Wait()
	if err != nil && !errors.As(err, new(*exec.ExitError)) {
		return fmt.Errorf("failed to exec in task: %w", err)
	}
	writers := []*streamWriter{stdout}
	if !tty {
		writers = append(writers, stderr)
	}
	for _, w := range writers {
		if err := w.close(); err != nil {
			return err
		}
	}
	return stream.Send(drivers.NewExecStreamingResponseExit(cmd.ProcessState.ExitCode()))
}

// streamWriter writes an exec's output to its stream (Send is safe from
// several goroutines).
type streamWriter struct {
	send   func(*drivers.ExecTaskStreamingResponseMsg) error
	stderr bool
}

func (w *streamWriter) msg(op *drivers.ExecTaskStreamingIOOperation) *drivers.ExecTaskStreamingResponseMsg {
	if w.stderr {
		return &drivers.ExecTaskStreamingResponseMsg{Stderr: op}
	}
	return &drivers.ExecTaskStreamingResponseMsg{Stdout: op}
}

func (w *streamWriter) Write(p []byte) (int, error) {
	if err := w.send(w.msg(&drivers.ExecTaskStreamingIOOperation{Data: bytes.Clone(p)})); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (w *streamWriter) close() error {
	return w.send(w.msg(&drivers.ExecTaskStreamingIOOperation{Close: true}))
}

var _ io.Writer = (*streamWriter)(nil)
