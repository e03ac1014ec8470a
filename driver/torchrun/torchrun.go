// Package torchrun is the launcher for launcher = "torchrun", the
// restart-based baseline that in-place rescaling is measured against.
// torchrun runs one agent per node, so the launcher does what horovodrun
// does for Horovod: it hosts the c10d rendezvous store (a TCPStore in a
// Python child), follows the same host discovery, and runs torchrun on
// every discovered worker through the worker's agent. A new worker's
// torchrun joins the rendezvous and every node's workers restart with the
// new world size; a drained worker's session is dropped, its torchrun is
// killed, and the others restart without it.
package torchrun

import (
	"context"
	"fmt"
	"io"
	"maps"
	"net"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/discover"
	"github.com/schedulearn/schedulearn/driver/horovod"
	"github.com/schedulearn/schedulearn/driver/sshshim"
	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// storeScript hosts the c10d store until it is signalled.
const storeScript = `
import datetime, signal, sys
import torch.distributed as dist
store = dist.TCPStore("0.0.0.0", int(sys.argv[1]), None, True, datetime.timedelta(seconds=600), False)
print("c10d store listening on port", sys.argv[1], flush=True)
signal.sigwait([signal.SIGTERM, signal.SIGINT])
`

// Launcher runs torchrun on the job's workers.
type Launcher struct {
	Task      *taskfile.Task
	Discovery *discover.Discovery
	Logger    hclog.Logger
	Stdout    io.Writer
	Stderr    io.Writer
	// Period is how often it runs discovery (default discover.Period, as
	// horovodrun).
	Period time.Duration

	endpoint string
	// failingSince is when discovery began to fail, zero while it reads.
	failingSince time.Time
}

type session struct {
	cancel  context.CancelFunc
	removed bool
}

type ended struct {
	host string
	code int
	err  error
}

// Run runs until training ends on the workers, and returns the launcher's
// exit code.
func (l *Launcher) Run(ctx context.Context) int {
	if l.Period == 0 {
		l.Period = discover.Period
	}
	stopStore, err := l.startStore(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return 128 + int(syscall.SIGTERM)
		}
		l.Logger.Error("failed to start the c10d store", "port", l.Task.RdzvPort, "error", err)
		return 1
	}
	defer stopStore()

	var mu sync.Mutex
	out := &lockedWriter{mu: &mu, w: l.Stdout}
	errOut := &lockedWriter{mu: &mu, w: l.Stderr}
	sessions := map[string]*session{}
	endedCh := make(chan ended)
	var st runState
	tick := time.NewTicker(l.Period)
	defer tick.Stop()

	for {
		if !st.ending() && ctx.Err() == nil {
			l.reconcile(ctx, sessions, endedCh, out, errOut)
		}
		if (st.ending() || ctx.Err() != nil) && len(sessions) == 0 {
			if ctx.Err() != nil {
				return 128 + int(syscall.SIGTERM)
			}
			if st.exitCode == 0 {
				horovod.FinishWorkers(l.Task, l.Logger)
			}
			return st.exitCode
		}
		select {
		case <-ctx.Done():
			for _, s := range sessions {
				s.cancel()
			}
			tick.Stop()
			for len(sessions) > 0 {
				e := <-endedCh
				delete(sessions, e.host)
			}
		case e := <-endedCh:
			s := sessions[e.host]
			delete(sessions, e.host)
			if s == nil || s.removed {
				l.Logger.Info("torchrun stopped on a removed worker", "host", e.host)
				continue
			}
			if st.record(e, time.Now(), l.Logger) == runFailed {
				for _, other := range sessions {
					other.cancel()
				}
			}
		case <-tick.C:
		}
	}
}

// runState is what a run has seen of its workers' torchruns that ended.
type runState struct {
	lost     time.Time // when the run last lost a worker's torchrun
	finished bool      // a worker's torchrun finished training
	exitCode int       // the launcher's exit code so far
}

// ending says whether the run is ending (a worker finished training, or
// the run failed): the launcher starts no more torchruns and returns once
// the last one ended.
func (st *runState) ending() bool { return st.finished || st.exitCode != 0 }

// What the run does after a worker's torchrun ended.
const (
	runGoesOn = iota
	runFinishing
	runFailed
)

// record takes a worker's torchrun that ended (not one the launcher
// removed) and says what the run does: goes on without a lost worker
// (its agent unreachable, killed, or fenced: torchrun re-rendezvouses
// with the others), finishes (training is done: wait for the others),
// or fails (stop the others; exitCode says why, runFailure). A torchrun
// that fails after another finished training is a late joiner (a worker
// started by a grow as training ended: the rendezvous closed under it,
// RendezvousClosedError): the run still succeeded.
func (st *runState) record(e ended, now time.Time, logger hclog.Logger) int {
	switch {
	case e.err != nil:
		logger.Warn("lost a worker's torchrun", "host", e.host, "error", e.err)
		st.lost = now
		return runGoesOn
	case sshshim.Cause(e.code, true) == sshshim.CauseInfrastructure:
		// Killed, or stopped by its agent's fence: the worker is lost, not
		// failed; torchrun goes on with the others.
		logger.Warn("lost a worker's torchrun: killed, or its agent fenced", "host", e.host, "exit_code", e.code)
		st.lost = now
		return runGoesOn
	case e.code == 0:
		logger.Info("torchrun finished on a worker", "host", e.host)
		st.finished = true
		return runFinishing
	case st.finished && st.exitCode == 0:
		logger.Warn("torchrun failed on a worker after training finished on another: a late joiner, the run succeeded",
			"host", e.host, "exit_code", e.code)
		return runFinishing
	default:
		st.exitCode = runFailure(e.code, st.lost, now)
		logger.Error("torchrun failed on a worker", "host", e.host, "exit_code", e.code, "launcher_exit", st.exitCode)
		return runFailed
	}
}

// runFailure is the launcher's exit code when a worker's torchrun exited
// code (not 0). A torchrun its agent's fence stopped (drain.ExitInfrastructure)
// or a signal killed failed for the cluster's sake, and so did one that
// failed within drain.LossWindow after the run lost a worker (its host cut off
// or down: the survivors' rendezvous cannot complete without it, and
// their torchrun exits 1, as the chaos run saw after a partition): the
// launcher then exits drain.ExitInfrastructure and the planner runs the
// job again from its checkpoint. Otherwise the script failed: its code.
func runFailure(code int, lost, now time.Time) int {
	if code == drain.ExitInfrastructure || code > 128 || drain.AfterLoss(lost, now) {
		return drain.ExitInfrastructure
	}
	return code
}

// storeReadyLine starts the line storeScript prints once its store
// listens.
const storeReadyLine = "c10d store listening on port"

// storeStartTimeout bounds how long the store may take to listen (its
// Python imports torch first).
var storeStartTimeout = 5 * time.Minute

// startStore starts the c10d store and returns once it listens, so that
// no worker's torchrun is pointed at a port the store did not get (where
// another job's store may be listening); stop stops it.
func (l *Launcher) startStore(ctx context.Context) (stop func(), err error) {
	port := strconv.Itoa(l.Task.RdzvPort)
	store := exec.Command(l.Task.Python, "-c", storeScript, port)
	ready := &lineWatcher{w: l.Stdout, prefix: storeReadyLine, seen: make(chan struct{})}
	store.Stdout, store.Stderr = ready, l.Stderr
	store.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := store.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- store.Wait() }()
	stop = func() {
		_ = syscall.Kill(-store.Process.Pid, syscall.SIGTERM)
		if err := <-exited; err != nil {
			l.Logger.Debug("c10d store stopped", "port", port, "error", err)
		}
	}
	timeout := time.NewTimer(storeStartTimeout)
	defer timeout.Stop()
	select {
	case <-ready.seen:
		return stop, nil
	case err := <-exited:
		exited <- err
		return nil, fmt.Errorf("the store exited before it listened on port %s (%w): is the port taken? rdzv_port_label gives each job a port of its own", port, err)
	case <-timeout.C:
		err = fmt.Errorf("the store did not listen on port %s within %v", port, storeStartTimeout)
	case <-ctx.Done():
		err = ctx.Err()
	}
	stop()
	return nil, err
}

// lineWatcher passes output on to w and closes seen once a line starting
// with prefix has gone through.
type lineWatcher struct {
	w      io.Writer
	prefix string
	seen   chan struct{}
	line   []byte // the start of the current line, up to len(prefix)
	done   bool
}

func (lw *lineWatcher) Write(p []byte) (int, error) {
	for _, b := range p {
		if lw.done {
			break
		}
		switch {
		case b == '\n':
			lw.line = lw.line[:0]
		case len(lw.line) < len(lw.prefix):
			lw.line = append(lw.line, b)
			if string(lw.line) == lw.prefix {
				lw.done = true
				close(lw.seen)
			}
		}
	}
	return lw.w.Write(p)
}

// reconcile starts torchrun on new workers and drops the sessions of
// workers that left discovery.
func (l *Launcher) reconcile(ctx context.Context, sessions map[string]*session, endedCh chan<- ended, out, errOut io.Writer) {
	hosts, err := l.Discovery.Refresh(ctx)
	if err != nil {
		// The sessions stay as they are (the last set) until discovery
		// reads again; said once per outage, not every period.
		if l.failingSince.IsZero() {
			l.failingSince = time.Now()
			l.Logger.Warn("failed to discover workers; keeping the last known hosts until discovery reads again", "error", err)
		}
		return
	}
	if !l.failingSince.IsZero() {
		l.Logger.Info("discovery reads the workers again", "stale_for", time.Since(l.failingSince).Round(time.Millisecond))
		l.failingSince = time.Time{}
	}
	for name, s := range sessions {
		if _, ok := hosts[name]; !ok && !s.removed {
			l.Logger.Info("worker left discovery, stopping its torchrun", "host", name)
			s.removed = true
			s.cancel()
		}
	}
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		if _, ok := sessions[name]; ok {
			continue
		}
		h := hosts[name]
		if l.endpoint == "" {
			ip, err := localIPFor(h.Address)
			if err != nil {
				l.Logger.Warn("failed to find the launcher's address", "error", err)
				return
			}
			l.endpoint = net.JoinHostPort(ip, strconv.Itoa(l.Task.RdzvPort))
		}
		sctx, cancel := context.WithCancel(ctx)
		sessions[name] = &session{cancel: cancel}
		command := l.command()
		l.Logger.Info("starting torchrun on a worker", "host", name, "address", h.Address)
		go func() {
			code, err := workeragent.Run(sctx, h.Address, l.Task.Token, command, nil,
				prefixWriter(out, name), prefixWriter(errOut, name), 10*time.Second)
			endedCh <- ended{host: name, code: code, err: err}
		}()
	}
}

// command is the shell command a worker's agent runs.
func (l *Launcher) command() string {
	var words []string
	if len(l.Task.TorchrunEnv) > 0 {
		words = append(words, "env")
		for _, k := range slices.Sorted(maps.Keys(l.Task.TorchrunEnv)) {
			words = append(words, shellQuote(k+"="+l.Task.TorchrunEnv[k]))
		}
	}
	for _, a := range l.Task.TorchrunCommand {
		words = append(words, shellQuote(strings.ReplaceAll(a, taskfile.RdzvEndpointPlaceholder, l.endpoint)))
	}
	return strings.Join(words, " ")
}

// localIPFor is this machine's address on the route to addr: where a
// worker reaches the launcher's store.
func localIPFor(addr string) (string, error) {
	c, err := net.Dial("udp", addr)
	if err != nil {
		return "", fmt.Errorf("failed to route to %s: %w", addr, err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).IP.String(), nil
}

func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// prefixWriter passes output through; torchrun already prefixes ranks.
func prefixWriter(w io.Writer, _ string) io.Writer { return w }
