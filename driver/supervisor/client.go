package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
)

// supervisorRunner is the driver's side of a task's supervisor.
type supervisorRunner struct {
	logger hclog.Logger
	cfg    Config
	state  State

	mu     sync.Mutex
	exit   *Exit // once known
	closed bool
}

// New starts a supervisor for cmd and returns once the task has started
// (or failed to). The supervisor's directory, StateDirName in the task dir,
// holds its log.
func New(logger hclog.Logger, cfg Config, cmd Command) (Runner, error) {
	if cfg.Binary == "" {
		return nil, errors.New("failed to start task: no supervisor binary")
	}
	if cmd.TaskDir == "" {
		return nil, errors.New("failed to start task: no task dir")
	}
	dir := filepath.Join(cmd.TaskDir, StateDirName)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to make the supervisor's directory: %w", err)
	}
	if err := awaitLastSupervisor(dir); err != nil {
		return nil, fmt.Errorf("failed to start task: %w", err)
	}
	// A task restarted in the same dir: the last run's exit is not this one's.
	if err := os.Remove(filepath.Join(dir, exitFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("failed to remove the last run's exit file: %w", err)
	}
	log, err := os.OpenFile(filepath.Join(dir, logFileName), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("failed to open the supervisor's log: %w", err)
	}
	defer log.Close()
	specR, specW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("failed to start the supervisor: %w", err)
	}
	defer specW.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		specR.Close()
		return nil, fmt.Errorf("failed to start the supervisor: %w", err)
	}
	defer readyR.Close()

	c := exec.Command(cfg.Binary, "supervise", "-dir", dir)
	c.Stdin, c.Stdout, c.Stderr = specR, readyW, log
	// A session of its own: the driver's and the client's signals and
	// exits do not reach it.
	c.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	err = c.Start()
	specR.Close()
	readyW.Close()
	if err != nil {
		return nil, fmt.Errorf("failed to start the supervisor: %w", err)
	}
	// Reaped here while this driver lives; by init (or a subreaper) after.
	go func() { _ = c.Wait() }()

	st, err := awaitStart(c.Process, specW, readyR, cmd, cfg.startTimeout())
	if err != nil {
		_ = c.Process.Kill()
		return nil, fmt.Errorf("failed to start task: %w%s", err, logTail(filepath.Join(dir, logFileName)))
	}
	r := &supervisorRunner{logger: logger, cfg: cfg, state: State{
		Dir:             dir,
		Pid:             st.Pid,
		PidStart:        st.Start,
		SupervisorPid:   c.Process.Pid,
		SupervisorStart: startTime(c.Process.Pid),
		Cgroup:          cmd.Cgroup,
	}}
	logger.Debug("task started", "pid", st.Pid, "supervisor_pid", c.Process.Pid)
	return r, nil
}

// awaitLastSupervisor lets the supervisor of the task's last run in dir
// (a restart) finish; one whose task still runs is an error.
func awaitLastSupervisor(dir string) error {
	resp, answered := hello(dir)
	if !answered {
		return nil // no supervisor in dir: nothing to wait for
	}
	if !resp.Exited {
		return fmt.Errorf("a supervisor already runs a task (pid %d) in %s", resp.Pid, dir)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		if !supervisorListens(dir) {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("the supervisor of the task's last run in %s did not end", dir)
}

// hello asks the supervisor in dir who it is; answered is false when none
// answers (there is none, or it has gone).
func hello(dir string) (resp *response, answered bool) {
	resp, err := call(dir, &request{Op: opHello}, 5*time.Second)
	return resp, err == nil
}

// supervisorListens says whether a supervisor still takes connections in
// dir.
func supervisorListens(dir string) bool {
	conn, err := dial(dir, time.Second)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func (c Config) startTimeout() time.Duration {
	if c.StartTimeout > 0 {
		return c.StartTimeout
	}
	return DefaultStartTimeout
}

// awaitStart hands the supervisor its spec and reads its started line.
func awaitStart(p *os.Process, specW, readyR *os.File, cmd Command, timeout time.Duration) (*started, error) {
	if err := json.NewEncoder(specW).Encode(spec{Command: cmd}); err != nil {
		return nil, fmt.Errorf("failed to hand the supervisor the task: %w", err)
	}
	specW.Close()
	_ = readyR.SetReadDeadline(time.Now().Add(timeout))
	var st started
	if err := json.NewDecoder(readyR).Decode(&st); err != nil {
		if errors.Is(err, os.ErrDeadlineExceeded) {
			return nil, fmt.Errorf("the supervisor (pid %d) did not start the task within %v", p.Pid, timeout)
		}
		return nil, fmt.Errorf("the supervisor (pid %d) exited before starting the task", p.Pid)
	}
	if st.Error != "" {
		return nil, errors.New(st.Error)
	}
	return &st, nil
}

// logTail is the end of the supervisor's log, for an error message.
func logTail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	if len(b) > 1024 {
		b = b[len(b)-1024:]
	}
	return "; supervisor log: " + string(bytes.TrimSpace(b))
}

// Recover reattaches to the supervisor of a task started earlier, perhaps
// by another instance of the driver. A task that exited meanwhile is
// recovered with its exit. One whose supervisor is gone without an exit
// (killed) is lost: what is left of it is killed and ErrNoProcess
// returned.
func Recover(logger hclog.Logger, cfg Config, st *State) (Runner, error) {
	if st == nil || st.Dir == "" {
		return nil, errors.New("failed to recover task: no supervisor state")
	}
	r := &supervisorRunner{logger: logger, cfg: cfg, state: *st}
	resp, err := call(st.Dir, &request{Op: opHello}, 10*time.Second)
	if err == nil {
		if resp.Pid != st.Pid {
			return nil, fmt.Errorf("failed to recover task: its supervisor runs pid %d, not %d", resp.Pid, st.Pid)
		}
		if !resp.Exited {
			return r, nil
		}
		// Exited, its supervisor finishing: the exit file tells the rest.
		err = ErrExited
	}
	exit, ok, rerr := readExit(st.Dir)
	if rerr != nil {
		return nil, fmt.Errorf("failed to recover task: %w", rerr)
	}
	if ok {
		r.exit = exit
		return r, nil
	}
	r.cleanup()
	return nil, fmt.Errorf("failed to recover task: %w: its supervisor is gone and left no exit status (%w)", ErrNoProcess, err)
}

func (r *supervisorRunner) Pid() int { return r.state.Pid }

func (r *supervisorRunner) State() *State {
	st := r.state
	return &st
}

func (r *supervisorRunner) knownExit() *Exit {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.exit
}

func (r *supervisorRunner) setExit(e *Exit) *Exit {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.exit == nil {
		r.exit = e
	}
	return r.exit
}

func (r *supervisorRunner) Wait(ctx context.Context) (*Exit, error) {
	if e := r.knownExit(); e != nil {
		return e, nil
	}
	conn, err := dial(r.state.Dir, 10*time.Second)
	if err == nil {
		exit, werr := r.waitOn(ctx, conn)
		if exit != nil {
			return r.setExit(exit), nil
		}
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		err = werr
	}
	// The supervisor is gone: its exit file says how the task ended.
	exit, ok, rerr := readExit(r.state.Dir)
	if rerr != nil {
		return nil, rerr
	}
	if ok {
		return r.setExit(exit), nil
	}
	r.cleanup()
	return nil, fmt.Errorf("%w: its supervisor exited without its exit status (%w); what was left of it is killed", ErrNoProcess, err)
}

// waitOn asks the supervisor on conn for the exit and waits for it.
func (r *supervisorRunner) waitOn(ctx context.Context, conn net.Conn) (*Exit, error) {
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := json.NewEncoder(conn).Encode(&request{Op: opWait}); err != nil {
		return nil, err
	}
	var resp response
	if err := json.NewDecoder(conn).Decode(&resp); err != nil {
		return nil, err
	}
	if resp.Exit == nil {
		return nil, errors.New("the supervisor answered without an exit")
	}
	return resp.Exit, nil
}

// cleanup kills what is left of a task whose supervisor is gone: its
// cgroup's processes, and its process group while its leader lives.
func (r *supervisorRunner) cleanup() {
	if err := r.state.Cgroup.Kill(); err != nil {
		r.logger.Warn("failed to kill the task's cgroup", "error", err)
	}
	if alive(r.state.Pid, r.state.PidStart) {
		_ = syscall.Kill(-r.state.Pid, syscall.SIGKILL)
		_ = syscall.Kill(r.state.Pid, syscall.SIGKILL)
	}
}

// gone is what a request that needs the supervisor returns when it is
// not there: ErrExited after an exit, else err.
func (r *supervisorRunner) gone(err error) error {
	if r.knownExit() != nil {
		return ErrExited
	}
	if _, ok, _ := readExit(r.state.Dir); ok {
		return ErrExited
	}
	return err
}

func (r *supervisorRunner) Shutdown(sig syscall.Signal, grace time.Duration) error {
	resp, err := call(r.state.Dir, &request{Op: opShutdown, Signal: int(sig), Grace: grace}, grace+30*time.Second)
	if err != nil {
		if errors.Is(r.gone(err), ErrExited) {
			return nil
		}
		// No supervisor and no exit: the task is lost; stop what is left.
		r.logger.Warn("the task's supervisor is gone; killing what is left of the task", "error", err)
		r.cleanup()
		return nil
	}
	if err := resp.err(); err != nil {
		return fmt.Errorf("failed to shut down the task: %w", err)
	}
	return nil
}

func (r *supervisorRunner) Signal(sig syscall.Signal) error {
	resp, err := call(r.state.Dir, &request{Op: opSignal, Signal: int(sig)}, 10*time.Second)
	if err != nil {
		return fmt.Errorf("failed to signal the task: %w", r.gone(err))
	}
	if err := resp.err(); err != nil {
		return fmt.Errorf("failed to signal the task: %w", err)
	}
	return nil
}

func (r *supervisorRunner) Stats(ctx context.Context, interval time.Duration) (<-chan *Usage, error) {
	return stream(ctx, newSampler(r.state.Cgroup, r.state.Pid, r.state.PidStart, r.cfg.Compute), interval), nil
}

func (r *supervisorRunner) Exec(deadline time.Time, argv []string) ([]byte, int, error) {
	timeout := 10 * time.Second
	if !deadline.IsZero() {
		timeout += time.Until(deadline)
	} else {
		timeout = 0
	}
	resp, err := call(r.state.Dir, &request{Op: opExec, Argv: argv, Deadline: deadline}, timeout)
	if err != nil {
		return nil, 0, fmt.Errorf("failed to exec in the task: %w", r.gone(err))
	}
	if err := resp.err(); err != nil {
		return nil, 0, fmt.Errorf("failed to exec in the task: %w", err)
	}
	return resp.Output, resp.Code, nil
}

func (r *supervisorRunner) Close() {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return
	}
	r.closed = true
	r.mu.Unlock()
	if _, err := call(r.state.Dir, &request{Op: opShutdown}, 30*time.Second); err != nil {
		r.cleanup()
	}
	if err := os.Remove(filepath.Join(r.state.Dir, exitFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		r.logger.Warn("failed to remove the task's exit file", "error", err)
	}
}
