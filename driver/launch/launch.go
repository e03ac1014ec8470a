// Package launch is the driver binary's launch subcommand: the launcher
// task's process for launcher = "horovod". It runs horovodrun as its
// child, passes on the signals the task gets (StopTask's SIGTERM reaches
// horovodrun, which stops its workers so training can commit), and when
// horovodrun succeeds it tells
// the job's worker agents that training is over, so the worker tasks
// complete and the batch job ends. It exits with horovodrun's exit code.
// After a failure the agents keep running: the launcher task may be
// restarted by its restart policy, or the job is stopped.
package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/jobstate"
	"github.com/schedulearn/schedulearn/driver/sshshim"
	"github.com/schedulearn/schedulearn/driver/workeragent"
)

// forwarded are the signals passed on to horovodrun.
var forwarded = []os.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

// Run runs argv and returns the exit code the launcher exits with.
func Run(task *jobstate.Task, argv []string, stdout, stderr io.Writer, logger hclog.Logger) int {
	if len(argv) == 0 {
		fmt.Fprintln(stderr, "error: no command to supervise")
		return 2
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin = os.Stdin
	cmd.Stdout, cmd.Stderr = stdout, stderr
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, forwarded...)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "error: failed to start %s: %v\n", argv[0], err)
		return 127
	}
	go func() {
		for s := range sigs {
			_ = cmd.Process.Signal(s)
		}
	}()
	err := cmd.Wait()
	code := exitCode(cmd, err)
	logger.Info("launcher exited", "exit_code", code)
	if code == 0 {
		FinishWorkers(task, logger)
	}
	return code
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

// FinishWorkers tells every worker agent discovery has seen that training
// is over. Agents that are gone are skipped.
func FinishWorkers(task *jobstate.Task, logger hclog.Logger) {
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
