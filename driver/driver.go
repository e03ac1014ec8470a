package driver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/forkserver"
	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/base"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/drivers"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
)

// Driver is the horovod task driver. This file holds its RPCs.
type Driver struct {
	ctx    context.Context
	logger hclog.Logger

	eventer *drivers.Eventer
	tasks   *taskStore

	// lookPath finds horovodrun, python and torchrun (exec.LookPath).
	lookPath LookPathFunc
	// selfPath is this plugin's binary: workers run its agent, launchers
	// its ssh shim and discovery.
	selfPath string

	config *Config
	period time.Duration
	// fenceAfter is fence_after: how long a launcher trains on cut off.
	fenceAfter time.Duration
	// forkServer is the client's warm interpreter (standby_preload), or nil.
	forkServer atomic.Pointer[forkserver.Server]
	// compute is the node's cpu (the agent's), for task stats.
	compute supervisor.Compute
	// cgroupMode is how the node's cgroups are mounted.
	cgroupMode supervisor.CgroupMode
}

var (
	_ drivers.DriverPlugin               = (*Driver)(nil)
	_ drivers.ExecTaskStreamingRawDriver = (*Driver)(nil)
)

// NewPlugin is the factory nomadplugin.ServeDriver calls.
func NewPlugin(ctx context.Context, logger hclog.Logger) drivers.DriverPlugin {
	self, err := os.Executable()
	if err != nil {
		logger.Error("failed to find the plugin's own binary", "error", err)
	}
	return New(ctx, logger, exec.LookPath, self)
}

// New returns a driver that finds its tools with lookPath and runs the
// subcommands of the binary at selfPath.
func New(ctx context.Context, logger hclog.Logger, lookPath LookPathFunc, selfPath string) *Driver {
	logger = logger.Named(PluginName)
	return &Driver{
		ctx:        ctx,
		logger:     logger,
		eventer:    drivers.NewEventer(ctx, logger),
		tasks:      newTaskStore(),
		lookPath:   lookPath,
		selfPath:   selfPath,
		config:     &Config{ConsulAddress: "127.0.0.1:8500", DynamicPorts: DefaultDynamicPorts},
		fenceAfter: mustDuration(DefaultFenceAfter),
		period:     30 * time.Second,
		cgroupMode: supervisor.DetectCgroupMode(),
	}
}

// runnerConfig is how tasks are supervised: by this binary's `supervise`
// subcommand.
func (d *Driver) runnerConfig() supervisor.Config {
	return supervisor.Config{Binary: d.selfPath, Compute: d.compute}
}

// PluginInfo implements base.BasePlugin: a driver plugin named PluginName
// ("horovod") at PluginVersion, speaking driver API v0.1.0.
func (d *Driver) PluginInfo() (*base.PluginInfo, error) { return pluginInfo, nil }

// ConfigSchema implements base.BasePlugin: configSpec, the schema of the
// client's plugin "horovod" { config { ... } } block.
func (d *Driver) ConfigSchema() (*hclspec.Spec, error) { return configSpec, nil }

// SetConfig implements base.BasePlugin: it decodes and checks the client's
// plugin config (bin_dirs, standby_*, fence_after, dynamic_ports, ...) and
// makes it the driver's. On an agent (not the loader's short-lived
// instance) it also reads the node's cpu for task stats and starts the
// warm interpreter when standby_preload asks for one.
func (d *Driver) SetConfig(cfg *base.Config) error {
	var config Config
	if len(cfg.PluginConfig) != 0 {
		if err := hclspec.Decode(configSpec, cfg.PluginConfig, &config); err != nil {
			return fmt.Errorf("failed to decode plugin config: %w", err)
		}
	}
	period, err := config.fingerprintPeriod()
	if err != nil {
		return err
	}
	// Relative bin_dirs are the agent's working directory's.
	for i, dir := range config.BinDirs {
		if abs, err := filepath.Abs(dir); err == nil {
			config.BinDirs[i] = abs
		}
	}
	for i, m := range config.StandbyPreload {
		if !validModule(m) {
			return fmt.Errorf("standby_preload[%d]: %q is not a Python module name (dotted identifiers)", i, m)
		}
	}
	for k := range config.StandbyEnv {
		if !validEnvName(k) || k == "PATH" || forkserver.StartupVar(k) {
			return fmt.Errorf("standby_env: %q is not a variable the warm interpreter can take (a name of letters, digits and _, not PATH, PYTHON* or LD_*)", k)
		}
	}
	if d := config.StandbyDir; d != "" && (!filepath.IsAbs(d) || filepath.Clean(d) != d || len(d) > forkserver.MaxParentLen) {
		return fmt.Errorf("standby_dir: %q must be a clean absolute path of at most %d bytes (the socket's path in it must fit a Unix socket address)", d, forkserver.MaxParentLen)
	}
	fenceAfter, err := parseFenceAfter(config.FenceAfter)
	if err != nil {
		return err
	}
	if err := checkPortRange(config.DynamicPorts); err != nil {
		return fmt.Errorf("dynamic_ports: %w", err)
	}
	if err := kernelPortsOverlap(config.DynamicPorts); err != nil {
		d.logger.Warn("Horovod's services may take ports Nomad gives workers", "error", err)
	}
	if config.AuthSecret != "" {
		d.logger.Warn("auth_secret is ignored: each job brings its own secret in " + SecretEnv + " (see docs/driver.md); remove it from the client config")
	}
	d.config = &config
	d.period = period
	d.fenceAfter = fenceAfter
	// Nomad's plugin loader also configures a short-lived instance, with
	// no agent config, only to check the config: no warm interpreter there.
	agent := cfg.AgentConfig != nil && cfg.AgentConfig.Driver != nil
	if agent {
		d.compute = computeOf(cfg.AgentConfig.Compute())
	}
	if len(config.StandbyPreload) > 0 && agent && d.forkServer.Load() == nil {
		d.startForkServer(&config)
	}
	return nil
}

// startForkServer starts the client's warm interpreter (standby_preload)
// and keeps it running: one that exits (killed, out of memory) is started
// again after a pause that doubles while it keeps exiting, up to
// forkServerMaxPause; it is stopped with the driver. While there is none
// (no python, or it fails, or between restarts) workers start standbys of
// their own, as they do without the setting.
func (d *Driver) startForkServer(config *Config) {
	python, err := findPython(d.lookPath, config.BinDirs)
	if err != nil {
		d.logger.Warn("standby_preload: no warm interpreter", "error", err)
		return
	}
	start := func() *forkserver.Server {
		fs := &forkserver.Server{
			Python:  python,
			Modules: config.StandbyPreload,
			Program: workeragent.StandbyProgram(),
			Parent:  config.StandbyDir,
			// Not the driver's environment: it may hold its tokens.
			Env: append(envList(config.StandbyEnv), "PATH="+joinPath(config.BinDirs, "/usr/local/bin:/usr/bin:/bin")),
			Log: d.logger.Named("forkserver").StandardWriter(&hclog.StandardLoggerOptions{InferLevels: true}),
		}
		if err := fs.Start(); err != nil {
			d.logger.Warn("standby_preload: no warm interpreter", "error", err)
			return nil
		}
		d.forkServer.Store(fs)
		d.logger.Info("warm interpreter started", "python", python, "preload", strings.Join(config.StandbyPreload, ","), "socket", fs.Socket())
		return fs
	}
	fs := start()
	if fs == nil {
		return
	}
	go func() {
		pause := forkServerPause
		for {
			ready := false
			select {
			case <-fs.Ready():
				ready = true
				d.logger.Info("warm interpreter ready")
			case <-fs.Done():
			case <-d.ctx.Done():
			}
			started := time.Now()
			select {
			case <-fs.Done():
			case <-d.ctx.Done():
				fs.Stop()
				return
			}
			fs.Stop()
			// One that served a while is a new trouble, not the same.
			if ready && time.Since(started) > forkServerMaxPause {
				pause = forkServerPause
			}
			d.logger.Warn("warm interpreter exited; workers start standbys of their own until it is started again", "in", pause)
			select {
			case <-time.After(pause):
			case <-d.ctx.Done():
				return
			}
			pause = min(2*pause, forkServerMaxPause)
			if next := start(); next != nil {
				fs = next
			}
		}
	}()
}

// The pauses before the warm interpreter is started again (variables for
// tests).
var (
	forkServerPause    = time.Second
	forkServerMaxPause = 5 * time.Minute
)

// TaskConfigSchema implements drivers.DriverPlugin: taskConfigSpec, the
// schema of a task's config block (role, launcher, np, discovery, ...).
func (d *Driver) TaskConfigSchema() (*hclspec.Spec, error) { return taskConfigSpec, nil }

// Capabilities implements drivers.DriverPlugin: signals and exec, no
// filesystem isolation or mounts, the host's or the group's network.
func (d *Driver) Capabilities() (*drivers.Capabilities, error) { return capabilities, nil }

// Fingerprint implements drivers.DriverPlugin: it sends fingerprint's
// finding (horovodrun and python found, their versions, whether torchrun
// is there) at once and then every fingerprint_period (30s by default),
// until ctx or the driver's context ends.
func (d *Driver) Fingerprint(ctx context.Context) (<-chan *drivers.Fingerprint, error) {
	ch := make(chan *drivers.Fingerprint)
	go func() {
		defer close(ch)
		timer := time.NewTimer(0)
		defer timer.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.ctx.Done():
				return
			case <-timer.C:
				fp := fingerprint(ctx, d.lookPath, d.config.BinDirs)
				select {
				case ch <- fp:
				case <-ctx.Done():
					return
				case <-d.ctx.Done():
					return
				}
				timer.Reset(d.period)
			}
		}
	}()
	return ch, nil
}

// StartTask implements drivers.DriverPlugin: it decodes and validates the
// task's config, writes its task file and scripts, starts the launcher
// or worker agent under a supervisor (supervisor.New), and returns a handle
// whose TaskState lets RecoverTask reattach. The DriverNetwork is nil:
// the driver makes no network of its own.
func (d *Driver) StartTask(cfg *drivers.TaskConfig) (*drivers.TaskHandle, *drivers.DriverNetwork, error) {
	if _, ok := d.tasks.get(cfg.ID); ok {
		return nil, nil, fmt.Errorf("failed to start task: task %q already started", cfg.ID)
	}
	var tc TaskConfig
	if err := cfg.DecodeDriverConfig(taskConfigSpec, &tc); err != nil {
		return nil, nil, fmt.Errorf("failed to decode driver config: %w", err)
	}
	if err := tc.validate(); err != nil {
		return nil, nil, fmt.Errorf("failed to validate driver config: %w", err)
	}
	p, err := d.planTask(cfg, &tc)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to plan task: %w", err)
	}
	if err := taskfile.Write(p.taskFile, p.task); err != nil {
		return nil, nil, err
	}
	if err := p.writeScripts(); err != nil {
		return nil, nil, err
	}

	logger := d.logger.With("alloc_id", cfg.AllocID, "task_name", cfg.Name, "role", tc.Role)
	logger.Info("starting task", "command", p.cmd.Path, "args", p.cmd.Args)
	r, err := supervisor.New(logger, d.runnerConfig(), p.cmd)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to start task: %w", err)
	}

	h := newTaskHandle(r, cfg, tc.Role, time.Now().Round(time.Millisecond), logger)
	h.onExit = d.reportFailure(cfg)
	state := TaskState{
		Runner:    r.State(),
		Pid:       r.Pid(),
		StartedAt: h.startedAt,
		Role:      tc.Role,
		StateFile: p.taskFile,
	}
	handle := drivers.NewTaskHandle(taskHandleVersion)
	handle.Config = cfg
	if err := handle.SetDriverState(&state); err != nil {
		r.Close()
		return nil, nil, fmt.Errorf("failed to set driver state: %w", err)
	}
	d.tasks.set(cfg.ID, h)
	go h.run()
	return handle, nil, nil
}

// RecoverTask implements drivers.DriverPlugin: it reattaches to the task's
// supervisor from the TaskState StartTask stored. A task it already
// tracks is no error; a handle of another taskHandleVersion is, and
// Nomad then starts the task again.
func (d *Driver) RecoverTask(handle *drivers.TaskHandle) error {
	if handle == nil || handle.Config == nil {
		return errors.New("failed to recover task: handle is nil")
	}
	if _, ok := d.tasks.get(handle.Config.ID); ok {
		return nil
	}
	if handle.Version != taskHandleVersion {
		// 1: Nomad's executor ran the task; 2: the state is msgpack, as
		// the driver wrote it on Nomad's plugin SDK.
		return fmt.Errorf("failed to recover task: its handle (version %d) was written by an earlier version of the driver, which this one (version %d) cannot read; Nomad starts the task again", handle.Version, taskHandleVersion)
	}
	var state TaskState
	if err := handle.GetDriverState(&state); err != nil {
		return fmt.Errorf("failed to decode task state: %w", err)
	}
	if state.Runner == nil {
		return errors.New("failed to recover task: its state names no supervisor")
	}
	cfg := handle.Config
	logger := d.logger.With("alloc_id", cfg.AllocID, "task_name", cfg.Name, "role", state.Role)
	r, err := supervisor.Recover(logger, d.runnerConfig(), state.Runner)
	if err != nil {
		return fmt.Errorf("failed to recover task: %w", err)
	}
	h := newTaskHandle(r, cfg, state.Role, state.StartedAt, logger)
	h.onExit = d.reportFailure(cfg)
	d.tasks.set(handle.Config.ID, h)
	go h.run()
	logger.Info("recovered task", "pid", state.Pid)
	return nil
}

// WaitTask implements drivers.DriverPlugin: the channel gets the task's
// exit result once it has exited, then closes; ctx or the driver ending
// closes it without one.
func (d *Driver) WaitTask(ctx context.Context, taskID string) (<-chan *drivers.ExitResult, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	ch := make(chan *drivers.ExitResult)
	go func() {
		defer close(ch)
		select {
		case <-h.done:
		case <-ctx.Done():
			return
		case <-d.ctx.Done():
			return
		}
		select {
		case ch <- h.result():
		case <-ctx.Done():
		case <-d.ctx.Done():
		}
	}()
	return ch, nil
}

// StopTask sends the task's kill signal (SIGTERM unless the job says
// otherwise), so training can commit its elastic state, and kills the
// process group once timeout has passed.
func (d *Driver) StopTask(taskID string, timeout time.Duration, signal string) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if signal == "" {
		signal = "SIGTERM"
	}
	sig, err := lookupSignal(signal)
	if err != nil {
		return fmt.Errorf("failed to stop task: %w", err)
	}
	if err := h.runner.Shutdown(sig, timeout); err != nil {
		return fmt.Errorf("failed to stop task: %w", err)
	}
	select {
	case <-h.done:
	case <-time.After(timeout + 20*time.Second):
		return fmt.Errorf("failed to stop task: process %d did not exit", h.runner.Pid())
	}
	return nil
}

// DestroyTask implements drivers.DriverPlugin: it closes the task's
// runner and forgets the task; a running one is an error unless force
// is set.
func (d *Driver) DestroyTask(taskID string, force bool) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	if h.isRunning() && !force {
		return errors.New("failed to destroy task: it is running (use force)")
	}
	h.runner.Close()
	d.tasks.delete(taskID)
	return nil
}

// InspectTask implements drivers.DriverPlugin: the task's status from its
// handle: state, start and end, exit result, pid and role.
func (d *Driver) InspectTask(taskID string) (*drivers.TaskStatus, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	return h.status(), nil
}

// TaskStats implements drivers.DriverPlugin: the cpu and memory use the
// task's runner measures every interval, in Nomad's form.
func (d *Driver) TaskStats(ctx context.Context, taskID string, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	usage, err := h.runner.Stats(ctx, interval)
	if err != nil {
		return nil, fmt.Errorf("failed to read task stats: %w", err)
	}
	return usageStream(usage), nil
}

// TaskEvents implements drivers.DriverPlugin: the events of all the
// driver's tasks (such as the stderr tail reportFailure sends when one
// fails), from the driver's Eventer.
func (d *Driver) TaskEvents(ctx context.Context) (<-chan *drivers.TaskEvent, error) {
	return d.eventer.TaskEvents(ctx)
}

// SignalTask implements drivers.DriverPlugin: it sends the named signal
// to the task's process through its runner.
func (d *Driver) SignalTask(taskID string, signal string) error {
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	sig, err := lookupSignal(signal)
	if err != nil {
		return fmt.Errorf("failed to signal task: %w", err)
	}
	return h.runner.Signal(sig)
}

// ExecTask implements drivers.DriverPlugin: it runs cmd in the task's
// context through its runner until it exits or timeout passes, and
// returns the end of its combined output and its exit code.
func (d *Driver) ExecTask(taskID string, cmd []string, timeout time.Duration) (*drivers.ExecTaskResult, error) {
	if len(cmd) == 0 {
		return nil, errors.New("failed to exec in task: no command")
	}
	h, ok := d.tasks.get(taskID)
	if !ok {
		return nil, drivers.ErrTaskNotFound
	}
	out, code, err := h.runner.Exec(time.Now().Add(timeout), cmd)
	if err != nil {
		return nil, fmt.Errorf("failed to exec in task: %w", err)
	}
	return &drivers.ExecTaskResult{Stdout: out, ExitResult: &drivers.ExitResult{ExitCode: code}}, nil
}

// ExecTaskStreamingRaw implements drivers.ExecTaskStreamingRawDriver (nomad
// alloc exec): it runs cmd in the task's context with stdin, terminal
// sizes, output and the exit code carried over stream (execStreaming).
func (d *Driver) ExecTaskStreamingRaw(ctx context.Context, taskID string, cmd []string, tty bool, stream drivers.ExecTaskStream) error {
	if len(cmd) == 0 {
		return errors.New("failed to exec in task: no command")
	}
	h, ok := d.tasks.get(taskID)
	if !ok {
		return drivers.ErrTaskNotFound
	}
	return execStreaming(ctx, h.runner, cmd, tty, stream)
}
