// Package horovod is the driver binary's launch subcommand: the launcher
// task's process for launcher = "horovod". It runs horovodrun as its
// child, passes on the signals the task gets (StopTask's SIGTERM reaches
// horovodrun, which stops its workers so training can commit), and when
// horovodrun succeeds it tells the job's worker agents that training is
// over, so the worker tasks complete and the batch job ends. It exits with
// horovodrun's exit code, or with drain.ExitInfrastructure when the
// cluster, not the training script, ended the run: every worker command
// that failed was lost (the ssh shim's outcomes file, Classify), or the
// launcher was fenced (its Fence, fence.New: cut off from the Nomad
// servers, it stops training before they give the job to another
// launcher).
package horovod

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/sshshim"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// forwarded are the signals passed on to horovodrun.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Run runs argv and returns the exit code the launcher exits with:
// horovodrun's, or drain.ExitInfrastructure when it failed for the
// cluster's sake (Classify) or was fenced (Fence), which tells the planner
// to run the job again from its checkpoint.
func Run(task *taskfile.Task, argv []string, stdout, stderr io.Writer, logger hclog.Logger) int {
	return (&Supervisor{Task: task, Logger: logger}).Run(argv, stdout, stderr)
}

// Supervisor runs horovodrun for the launcher task.
type Supervisor struct {
	Task   *taskfile.Task
	Logger hclog.Logger
	// Fence, if set, is started beside horovodrun and closes its channel
	// when the launcher must stop training (it no longer owns the job).
	Fence func(ctx context.Context) <-chan string
}

// Run runs argv (see the package's Run).
func (s *Supervisor) Run(argv []string, stdout, stderr io.Writer) int {
	task, logger := s.Task, s.Logger
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "error: no command to supervise")
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = stdout, stderr
	// Its own process group, which a fence kills whole.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "error: failed to start %s: %v\n", argv[0], err)
		return 127
	}
	var signalled, fenced atomic.Bool
	go func() {
		for sig := range sigs {
			signalled.Store(true)
			_ = cmd.Process.Signal(sig)
		}
	}()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if s.Fence != nil {
		fence := s.Fence(ctx)
		go func() {
			select {
			case why, ok := <-fence:
				if !ok {
					return
				}
				fenced.Store(true)
				logger.Error("fenced: stopping training, another launcher may run the job", "reason", why)
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			case <-ctx.Done():
			}
		}()
	}
	err := cmd.Wait()
	cancel()
	code := exitCode(cmd, err)
	logger.Info("launcher exited", "exit_code", code)
	switch {
	case code == 0:
		FinishWorkers(task, logger)
	case fenced.Load():
		code = drain.ExitInfrastructure
	case !signalled.Load():
		outcomes, err := sshshim.ReadOutcomes(task.OutcomesFile)
		if err != nil {
			logger.Warn("failed to read the workers' outcomes", "error", err)
		}
		if cause, why := Classify(outcomes); cause == sshshim.CauseInfrastructure {
			logger.Warn("training failed for the cluster's sake, not the script's: the job may run again from its checkpoint",
				"exit_code", code, "reason", why)
			code = drain.ExitInfrastructure
		}
	}
	return code
}

// Classify says why a horovodrun that failed did, from the worker
// commands that failed (the outcomes file, oldest first): the cluster's
// when every one of them failed for it (agents lost or unreachable,
// processes killed) or failed on its own within drain.LossWindow after one
// that was lost (the survivors' collectives fail without it), else the
// script's, which is also the answer when no worker command failed
// (horovodrun's own failure proves nothing of the cluster). why sums it
// up.
func Classify(outcomes []sshshim.Outcome) (cause, why string) {
	if len(outcomes) == 0 {
		return sshshim.CauseScript, "no worker command failed"
	}
	var lost time.Time
	after := 0
	for _, o := range outcomes {
		switch {
		case o.Cause == sshshim.CauseInfrastructure:
			lost = o.Time
		case drain.AfterLoss(lost, o.Time):
			after++
		default:
			return sshshim.CauseScript, fmt.Sprintf("the training program exited %d on %s", o.Code, o.Host)
		}
	}
	last := outcomes[len(outcomes)-1]
	why = fmt.Sprintf("%d worker commands lost (the last on %s, exit %d)", len(outcomes)-after, last.Host, last.Code)
	if after > 0 {
		why += fmt.Sprintf(", %d failed after a loss", after)
	}
	return sshshim.CauseInfrastructure, why
}

// FinishWorkers tells every worker agent discovery has seen that training
// is over. Agents that are gone are skipped.
func FinishWorkers(task *taskfile.Task, logger hclog.Logger) {
	hosts, err := sshshim.ReadHosts(task.HostsFile)
	if err != nil {
		logger.Warn("no workers to finish", "error", err)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var wg sync.WaitGroup
	for host, addr := range hosts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := workeragent.Finish(ctx, addr, task.Token, 3*time.Second); err != nil {
				logger.Info("did not finish worker", "host", host, "address", addr, "error", err)
				return
			}
			logger.Info("finished worker", "host", host, "address", addr)
		}()
	}
	wg.Wait()
}

func exitCode(cmd *exec.Cmd, err error) int {
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		return 127
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}
