// Package subcmd holds the subcommands of the nomad-driver-horovod binary
// besides serving the plugin: the parts of the driver that run inside
// tasks. main calls Run before plugins.Serve.
//
//	launch            -task-file F -- CMD   (the launcher process for launcher = "horovod")
//	discover          -task-file F          (the launcher's host discovery script)
//	ssh-shim          -task-file F -- ARGS  (the `ssh` on the launcher's PATH)
//	worker-agent      -task-file F -listen A (a worker task's process)
//	torchrun-launcher -task-file F          (the launcher process for launcher = "torchrun")
//	supervise         -dir D                (every task's supervisor: driver/supervisor)
package subcmd

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/discover"
	"github.com/schedulearn/schedulearn/driver/fence"
	"github.com/schedulearn/schedulearn/driver/horovod"
	"github.com/schedulearn/schedulearn/driver/sshshim"
	"github.com/schedulearn/schedulearn/driver/supervisor"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/torchrun"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// Names of the subcommands.
var names = map[string]func(args []string, stdin io.Reader, stdout, stderr io.Writer) int{
	"launch":            runLaunch,
	"discover":          runDiscover,
	"ssh-shim":          runSSHShim,
	"worker-agent":      runWorkerAgent,
	"torchrun-launcher": runTorchrunLauncher,
	"supervise":         supervisor.Supervise,
}

// Run runs the subcommand args[1] names, if it is one, and returns true
// with its exit code; otherwise it returns false.
func Run(args []string) (bool, int) {
	if len(args) < 2 {
		return false, 0
	}
	fn, ok := names[args[1]]
	if !ok {
		return false, 0
	}
	return true, fn(args[2:], os.Stdin, os.Stdout, os.Stderr)
}

// parseTask parses a subcommand's flags (fs, to which it adds -task-file)
// and reads the task file the driver wrote. When t is nil the subcommand
// exits with code; the error is printed.
func parseTask(fs *flag.FlagSet, args []string, stderr io.Writer) (t *taskfile.Task, code int) {
	fs.SetOutput(stderr)
	path := fs.String("task-file", "", "the task file the driver wrote")
	if err := fs.Parse(args); err != nil {
		return nil, 2
	}
	if *path == "" {
		fmt.Fprintln(stderr, "error: -task-file is required")
		return nil, 1
	}
	t, err := taskfile.Read(*path)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return nil, 1
	}
	return t, 0
}

func runLaunch(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("launch", flag.ContinueOnError)
	t, code := parseTask(fs, args, stderr)
	if t == nil {
		return code
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "horovod-launcher", Output: stderr, Level: hclog.Info})
	sup := &horovod.Supervisor{Task: t, Logger: logger}
	f, err := taskFence(t)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	sup.Fence = f
	return sup.Run(fs.Args(), stdout, stderr)
}

// taskFence is the task's fence (fence.New over the job's secret
// variable), or nil without fence_after.
func taskFence(t *taskfile.Task) (func(context.Context) <-chan string, error) {
	if t.FenceAfter <= 0 {
		return nil, nil
	}
	nomad, err := discover.NewNomad(t)
	if err != nil {
		return nil, err
	}
	return fence.New(nomad.Reachable, t.FenceAfter, time.Now), nil
}

func runDiscover(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("discover", flag.ContinueOnError)
	t, code := parseTask(fs, args, stderr)
	if t == nil {
		return code
	}
	d, err := discover.New(t)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	d.Logger = hclog.New(&hclog.LoggerOptions{Name: "horovod-discover", Output: stderr, Level: hclog.Info})
	if err := d.Run(context.Background(), stdout); err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	return 0
}

func runSSHShim(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("ssh-shim", flag.ContinueOnError)
	// Failures end like ssh's own: the launcher reads 255 as "unreachable".
	t, _ := parseTask(fs, args, stderr)
	if t == nil {
		return sshshim.ExitConnection
	}
	inv, err := sshshim.ParseArgs(fs.Args())
	if err != nil {
		fmt.Fprintf(stderr, "ssh: %v\n", err)
		return sshshim.ExitConnection
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	defer stop()
	code := sshshim.Run(ctx, inv, t.HostsFile, t.OutcomesFile, t.Token, stdin, stdout, stderr)
	if ctx.Err() != nil {
		return 128 + int(syscall.SIGTERM)
	}
	return code
}

func runWorkerAgent(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("worker-agent", flag.ContinueOnError)
	listen := fs.String("listen", "", "address to listen on (NOMAD_ADDR_<port>)")
	t, code := parseTask(fs, args, stderr)
	if t == nil {
		return code
	}
	if t.Token == "" {
		fmt.Fprintf(stderr, "error: refusing to start: %v\n", workeragent.ErrNoToken)
		return 1
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "horovod-worker-agent", Output: stderr, Level: hclog.Info})
	dir, _ := os.Getwd()
	status := func(running, started int) {
		if t.StatusFile == "" {
			return
		}
		err := taskfile.WriteJSON(t.StatusFile, drain.AgentStatus{Updated: time.Now().UTC(), Running: running, Started: started})
		if err != nil {
			logger.Warn("failed to write status", "error", err)
		}
	}
	srv := &workeragent.Server{Token: t.Token, Dir: dir, Env: workeragent.Environ(), Logger: logger, OnChange: status,
		Stdout: stdout, Stderr: stderr}
	l, err := workeragent.Listen(*listen)
	if err != nil {
		logger.Error("failed to start", "error", err)
		return 1
	}
	if len(t.Preload) > 0 && t.Python != "" {
		standby := &workeragent.Standby{Python: t.Python, Modules: t.Preload, Dir: dir, Env: srv.Env, Server: t.StandbyServer,
			Ready: func() { logger.Info("standby interpreter ready") }}
		if err := standby.Start(); err != nil {
			logger.Warn("no standby interpreter; commands start cold", "error", err)
		} else {
			srv.Standby = standby
			defer standby.Stop()
			if err := standby.ForkError(); err != nil {
				logger.Warn("the warm interpreter did not fork the standby; started one", "error", err)
			}
			logger.Info("standby interpreter started", "python", t.Python, "preload", strings.Join(t.Preload, ","), "forked", standby.Forked())
		}
	}
	status(0, 0)
	logger.Info("listening", "address", l.Addr().String(), "alloc_id", t.AllocID)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, fenced := fenceContext(ctx, t, logger)
	srv.Fenced = fenced
	if err := srv.Serve(ctx, l); err != nil {
		logger.Error("agent stopped", "error", err)
		return 1
	}
	if fenced() {
		// Its commands are stopped: a host back from a partition brings no
		// stale worker back into the job.
		return drain.ExitInfrastructure
	}
	logger.Info("stopped")
	return 0
}

// fenceContext is ctx, ended when the task's fence fires; fenced says
// whether it did.
func fenceContext(ctx context.Context, t *taskfile.Task, logger hclog.Logger) (context.Context, func() bool) {
	f, err := taskFence(t)
	if err != nil || f == nil {
		if err != nil {
			logger.Warn("no fence", "error", err)
		}
		return ctx, func() bool { return false }
	}
	ctx, cancel := context.WithCancel(ctx)
	var fired atomic.Bool
	go func() {
		if why, ok := <-f(ctx); ok {
			fired.Store(true)
			logger.Error("fenced: stopping the worker's commands", "reason", why)
			cancel()
		}
	}()
	return ctx, fired.Load
}

func runTorchrunLauncher(args []string, _ io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("torchrun-launcher", flag.ContinueOnError)
	t, code := parseTask(fs, args, stderr)
	if t == nil {
		return code
	}
	d, err := discover.New(t)
	if err != nil {
		fmt.Fprintf(stderr, "error: %v\n", err)
		return 1
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "horovod-torchrun-launcher", Output: stderr, Level: hclog.Info})
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	ctx, fenced := fenceContext(ctx, t, logger)
	l := &torchrun.Launcher{Task: t, Discovery: d, Logger: logger, Stdout: stdout, Stderr: stderr}
	code = l.Run(ctx)
	if fenced() {
		return drain.ExitInfrastructure
	}
	return code
}
