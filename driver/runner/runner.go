// Package runner runs one task process behind a small interface. The real
// runner is Nomad's executor plugin (drivers/shared/executor), as raw_exec
// uses it: the executor runs in a session of its own, so the task survives
// the Nomad client and this driver exiting, and a restarted driver reattaches
// to it with the go-plugin reattach config kept in the task state.
package runner

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	plugin "github.com/hashicorp/go-plugin"
	"github.com/hashicorp/nomad/client/lib/cpustats"
	"github.com/hashicorp/nomad/drivers/shared/executor"
	"github.com/hashicorp/nomad/plugins/base"
	"github.com/hashicorp/nomad/plugins/drivers"
	pstructs "github.com/hashicorp/nomad/plugins/shared/structs"
)

// Runner is a running (or exited) task process.
type Runner interface {
	// Pid is the task process's id.
	Pid() int
	// Wait blocks until the process exits and returns how it ended.
	Wait(ctx context.Context) (*Exit, error)
	// Shutdown sends signal, waits up to grace for the process to exit,
	// then kills its process group.
	Shutdown(signal string, grace time.Duration) error
	// Signal sends sig to the process.
	Signal(sig os.Signal) error
	// Stats streams the cpu and memory use of the process tree.
	Stats(ctx context.Context, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error)
	// Exec runs cmd beside the task, with its environment.
	Exec(deadline time.Time, cmd string, args []string) ([]byte, int, error)
	// ExecStreaming runs cmd beside the task, streaming its io.
	ExecStreaming(ctx context.Context, cmd []string, tty bool, stream drivers.ExecTaskStream) error
	// Reattach is the config a later Recover needs.
	Reattach() *pstructs.ReattachConfig
	// Close releases the runner (kills the executor) once the process is
	// gone or the task is destroyed.
	Close()
}

// Exit is how a process ended.
type Exit struct {
	ExitCode  int
	Signal    int
	OOMKilled bool
	Time      time.Time
}

// Command is what to run.
type Command struct {
	Path       string
	Args       []string
	Env        []string
	WorkDir    string
	TaskDir    string
	User       string
	StdoutPath string
	StderrPath string
	Resources  *drivers.Resources
	Network    *drivers.NetworkIsolationSpec
}

// ErrNoProcess is returned by Recover when the executor is gone.
var ErrNoProcess = errors.New("task process is gone")

type executorRunner struct {
	exec   executor.Executor
	client *plugin.Client
	pid    int
}

// New starts an executor for the task and launches cmd in it. The executor
// logs to executor.out in the task dir.
func New(logger hclog.Logger, agent *base.ClientDriverConfig, compute cpustats.Compute, cmd Command) (Runner, error) {
	if agent == nil {
		return nil, errors.New("failed to start executor: the driver has no agent config yet")
	}
	execCfg := &executor.ExecutorConfig{
		LogFile:  filepath.Join(cmd.TaskDir, "executor.out"),
		LogLevel: "debug",
		Compute:  compute,
	}
	exec, client, err := executor.CreateExecutor(logger, agent, execCfg)
	if err != nil {
		return nil, fmt.Errorf("failed to create executor: %w", err)
	}
	ps, err := exec.Launch(&executor.ExecCommand{
		Cmd:              cmd.Path,
		Args:             cmd.Args,
		Env:              cmd.Env,
		User:             cmd.User,
		TaskDir:          cmd.TaskDir,
		WorkDir:          cmd.WorkDir,
		StdoutPath:       cmd.StdoutPath,
		StderrPath:       cmd.StderrPath,
		Resources:        cmd.Resources.Copy(),
		NetworkIsolation: cmd.Network,
	})
	if err != nil {
		client.Kill()
		return nil, fmt.Errorf("failed to launch %s: %w", cmd.Path, err)
	}
	return &executorRunner{exec: exec, client: client, pid: ps.Pid}, nil
}

// Recover reattaches to the executor of a task started earlier, perhaps
// by another instance of the driver.
func Recover(logger hclog.Logger, compute cpustats.Compute, rc *pstructs.ReattachConfig, pid int) (Runner, error) {
	plugRC, err := pstructs.ReattachConfigToGoPlugin(rc)
	if err != nil {
		return nil, fmt.Errorf("failed to read reattach config: %w", err)
	}
	exec, client, err := executor.ReattachToExecutor(plugRC, logger, compute)
	if err != nil {
		return nil, fmt.Errorf("failed to reattach to executor: %w: %w", ErrNoProcess, err)
	}
	return &executorRunner{exec: exec, client: client, pid: pid}, nil
}

func (r *executorRunner) Pid() int { return r.pid }

func (r *executorRunner) Wait(ctx context.Context) (*Exit, error) {
	ps, err := r.exec.Wait(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to wait for the task process: %w", err)
	}
	return &Exit{ExitCode: ps.ExitCode, Signal: ps.Signal, OOMKilled: ps.OOMKilled, Time: ps.Time}, nil
}

func (r *executorRunner) Shutdown(signal string, grace time.Duration) error {
	if err := r.exec.Shutdown(signal, grace); err != nil {
		if r.client.Exited() {
			return nil
		}
		return fmt.Errorf("failed to shut down the task process: %w", err)
	}
	return nil
}

func (r *executorRunner) Signal(sig os.Signal) error {
	if err := r.exec.Signal(sig); err != nil {
		return fmt.Errorf("failed to signal the task process: %w", err)
	}
	return nil
}

func (r *executorRunner) Stats(ctx context.Context, interval time.Duration) (<-chan *drivers.TaskResourceUsage, error) {
	return r.exec.Stats(ctx, interval)
}

func (r *executorRunner) Exec(deadline time.Time, cmd string, args []string) ([]byte, int, error) {
	return r.exec.Exec(deadline, cmd, args)
}

func (r *executorRunner) ExecStreaming(ctx context.Context, cmd []string, tty bool, stream drivers.ExecTaskStream) error {
	return r.exec.ExecStreaming(ctx, cmd, tty, stream)
}

func (r *executorRunner) Reattach() *pstructs.ReattachConfig {
	return pstructs.ReattachConfigFromGoPlugin(r.client.ReattachConfig())
}

func (r *executorRunner) Close() {
	if !r.client.Exited() {
		_ = r.exec.Shutdown("", 0)
	}
	r.client.Kill()
}
