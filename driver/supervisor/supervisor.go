package supervisor

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	"golang.org/x/sys/unix"
)

// spec is what the driver hands a supervisor on its stdin.
type spec struct {
	Command Command
}

// started is the supervisor's one line on its stdout: the task's pid and
// start time, or why it did not start.
type started struct {
	Pid   int    `json:"pid,omitempty"`
	Start uint64 `json:"start,omitempty"`
	Error string `json:"error,omitempty"`
}

// Supervise is the supervisor process (the `supervise -dir DIR`
// subcommand): it reads a spec from stdin, starts the task, says so on
// stdout, then serves the socket in DIR until the task has exited and
// every connection is answered. It logs to stderr.
func Supervise(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("dir", "", "the supervisor's directory (socket, exit file)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: "supervisor", Output: stderr, Level: hclog.Debug})
	fail := func(err error) int {
		logger.Error("task not started", "error", err)
		_ = json.NewEncoder(stdout).Encode(started{Error: err.Error()})
		return 1
	}
	if *dir == "" {
		return fail(errors.New("-dir is required"))
	}
	var sp spec
	if err := json.NewDecoder(stdin).Decode(&sp); err != nil {
		return fail(fmt.Errorf("failed to read the task's spec: %w", err))
	}
	// No terminal, but a stray interrupt or hangup must not end the only
	// process that knows how the task ends (the handler, unlike an ignored
	// disposition, is not inherited by the task).
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGHUP, syscall.SIGINT)
	go func() {
		for sig := range sigs {
			logger.Info("ignored signal", "signal", sig)
		}
	}()

	s, err := newSupervisor(logger, *dir, sp.Command)
	if err != nil {
		return fail(err)
	}
	if err := s.startTask(); err != nil {
		s.closeListener()
		return fail(err)
	}
	logger.Info("task started", "pid", s.pid, "path", s.cmd.Path)
	if err := json.NewEncoder(stdout).Encode(started{Pid: s.pid, Start: s.start}); err != nil {
		logger.Warn("failed to tell the driver the task started", "error", err)
	}
	// Nothing more goes to stdout: the driver stops reading it.
	if f, ok := stdout.(*os.File); ok {
		if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
			_ = unix.Dup3(int(null.Fd()), int(f.Fd()), 0)
			null.Close()
		}
	}
	go s.reap()
	s.serve()
	logger.Info("supervisor done", "exit_code", s.exit.ExitCode, "signal", s.exit.Signal)
	return 0
}

// supervisor is the parent of one task process.
type supervisor struct {
	logger hclog.Logger
	dir    string
	cmd    Command

	path     string   // the resolved program
	env      []string // the task's environment, with the user's
	cred     *syscall.Credential
	joiner   *v1Joiner // cgroup v1
	cgroupFD int       // cgroup v2, or -1
	listener *net.UnixListener
	socket   os.FileInfo // the socket file, as bound

	// startMu serialises starting processes: on v1 the supervisor is in
	// the task's cgroups meanwhile, and a netns start holds a thread.
	startMu sync.Mutex

	task      *exec.Cmd
	pid       int
	start     uint64
	oomBefore int64

	// reapMu guards reaped: the process group is killed only while its
	// leader is not reaped (its id cannot be reused before).
	reapMu sync.Mutex
	reaped bool

	exited chan struct{} // closed once exit is set and written
	exit   *Exit
	conns  sync.WaitGroup
}

func newSupervisor(logger hclog.Logger, dir string, cmd Command) (*supervisor, error) {
	s := &supervisor{logger: logger, dir: dir, cmd: cmd, env: cmd.Env, cgroupFD: -1, exited: make(chan struct{})}
	if s.cmd.Dir == "" {
		s.cmd.Dir = cmd.TaskDir
	}
	var err error
	if s.path, err = lookupProgram(cmd.TaskDir, cmd.Path); err != nil {
		return nil, err
	}
	if cmd.User != "" {
		if err := s.setUser(cmd.User); err != nil {
			return nil, err
		}
	}
	if err := s.setCgroup(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("failed to make the supervisor's directory: %w", err)
	}
	// Bound by a name relative to dir, so a long task dir does not
	// overflow a socket address.
	if err := os.Chdir(dir); err != nil {
		return nil, fmt.Errorf("failed to enter the supervisor's directory: %w", err)
	}
	_ = os.Remove(socketName)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: socketName, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("failed to listen on the supervisor socket: %w", err)
	}
	// Removed by closeListener, only while it is this one's: a task
	// restarted in the same dir has a new supervisor on the same path.
	l.SetUnlinkOnClose(false)
	s.listener = l
	s.socket, _ = os.Stat(socketName)
	return s, nil
}

// closeListener stops new connections and removes the socket if it is
// still this supervisor's.
func (s *supervisor) closeListener() {
	s.listener.Close()
	if now, err := os.Stat(socketName); err == nil && s.socket != nil && os.SameFile(now, s.socket) {
		_ = os.Remove(socketName)
	}
}

// setUser makes processes run as name (a user name or uid) with its
// groups, and sets USER, LOGNAME and HOME as Nomad's executor does.
func (s *supervisor) setUser(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		if _, numErr := strconv.Atoi(name); numErr != nil {
			return fmt.Errorf("failed to find user %q: %w", name, err)
		}
		if u, err = user.LookupId(name); err != nil {
			return fmt.Errorf("failed to find user %q: %w", name, err)
		}
	}
	uid, err := strconv.ParseUint(u.Uid, 10, 32)
	if err != nil {
		return fmt.Errorf("failed to read the uid of %q: %w", name, err)
	}
	gid, err := strconv.ParseUint(u.Gid, 10, 32)
	if err != nil {
		return fmt.Errorf("failed to read the gid of %q: %w", name, err)
	}
	cred := &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	gids, err := u.GroupIds()
	if err != nil {
		return fmt.Errorf("failed to read the groups of %q: %w", name, err)
	}
	for _, g := range gids {
		if n, err := strconv.ParseUint(g, 10, 32); err == nil {
			cred.Groups = append(cred.Groups, uint32(n))
		}
	}
	s.cred = cred
	s.env = append(append([]string(nil), s.env...), "USER="+u.Username, "LOGNAME="+u.Username, "HOME="+u.HomeDir)
	return nil
}

// setCgroup writes the task's limits and prepares to start processes in
// its cgroup.
func (s *supervisor) setCgroup() error {
	cg := s.cmd.Cgroup
	if cg.IsZero() {
		return nil
	}
	if err := cg.apply(s.cmd.Resources); err != nil {
		return err
	}
	s.oomBefore = cg.oomKills()
	if cg.V2 != "" {
		fd, err := unix.Open(cg.V2, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return fmt.Errorf("failed to open the task's cgroup: %w", err)
		}
		s.cgroupFD = fd
		return nil
	}
	j, err := newV1Joiner(cg)
	if err != nil {
		return err
	}
	s.joiner = j
	return nil
}

// lookupProgram finds the task's program as Nomad's executor does: in
// the task dir's local/, the task dir, as an absolute path, on PATH.
func lookupProgram(taskDir, name string) (string, error) {
	if name == "" {
		return "", errors.New("no program to run")
	}
	if !filepath.IsAbs(name) && taskDir != "" {
		for _, p := range []string{filepath.Join(taskDir, "local", name), filepath.Join(taskDir, name)} {
			if info, err := os.Stat(p); err == nil && !info.IsDir() {
				return p, nil
			}
		}
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("failed to find %q: %w", name, err)
	}
	return p, nil
}

// startTask starts the task: its own process group, its output to its
// log paths, its user, directory, cgroup and network namespace.
func (s *supervisor) startTask() error {
	stdout, err := openOutput(s.cmd.StdoutPath)
	if err != nil {
		return err
	}
	defer stdout.Close()
	stderr, err := openOutput(s.cmd.StderrPath)
	if err != nil {
		return err
	}
	defer stderr.Close()
	c := &exec.Cmd{
		Path:        s.path,
		Args:        append([]string{s.path}, s.cmd.Args...),
		Env:         s.env,
		Dir:         s.cmd.Dir,
		Stdout:      stdout,
		Stderr:      stderr,
		SysProcAttr: &syscall.SysProcAttr{Setpgid: true},
	}
	if err := s.startProcess(c); err != nil {
		return fmt.Errorf("failed to start %s: %w", s.path, err)
	}
	s.task, s.pid = c, c.Process.Pid
	s.start = startTime(s.pid)
	return nil
}

// openOutput opens a task's output: a FIFO logmon reads (which blocks
// until it does), or a file, appended to. "" is /dev/null.
func openOutput(path string) (*os.File, error) {
	if path == "" {
		path = os.DevNull
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("failed to open the task's output: %w", err)
	}
	return f, nil
}

// startProcess starts c as the task's user, in its cgroup and network
// namespace.
func (s *supervisor) startProcess(c *exec.Cmd) error {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if c.SysProcAttr == nil {
		c.SysProcAttr = &syscall.SysProcAttr{}
	}
	c.SysProcAttr.Credential = s.cred
	if s.cgroupFD >= 0 {
		c.SysProcAttr.UseCgroupFD = true
		c.SysProcAttr.CgroupFD = s.cgroupFD
	}
	if s.joiner != nil {
		if err := s.joiner.join(); err != nil {
			return err
		}
		defer s.joiner.leave()
	}
	return inNetNS(s.cmd.NetNS, c.Start)
}

// inNetNS runs f on a thread in the network namespace at path, so a
// process f starts is born there.
func inNetNS(path string, f func() error) error {
	if path == "" {
		return f()
	}
	errc := make(chan error, 1)
	go func() {
		// The thread stays locked, and so ends with this goroutine, unless
		// it is back in its own namespace.
		runtime.LockOSThread()
		own, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("failed to open this thread's network namespace: %w", err)
			return
		}
		defer unix.Close(own)
		target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			errc <- fmt.Errorf("failed to open the task's network namespace: %w", err)
			return
		}
		defer unix.Close(target)
		if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
			errc <- fmt.Errorf("failed to enter the task's network namespace: %w", err)
			return
		}
		err = f()
		if unix.Setns(own, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
		errc <- err
	}()
	return <-errc
}

// reap waits for the task to exit, kills what is left of its tree, and
// records how it ended.
func (s *supervisor) reap() {
	// Not reaped yet: the process group's id is still the task's.
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, s.pid, &info, unix.WEXITED|unix.WNOWAIT, nil)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	s.reapMu.Lock()
	_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	_ = s.task.Wait()
	s.reaped = true
	s.reapMu.Unlock()
	s.killCgroup()
	exit := exitOf(s.task.ProcessState)
	if n := s.cmd.Cgroup.oomKills(); n >= 0 && s.oomBefore >= 0 && n > s.oomBefore {
		exit.OOMKilled = true
	}
	if err := writeExit(s.dir, exit); err != nil {
		s.logger.Error("failed to record the task's exit", "error", err)
	}
	s.logger.Info("task exited", "exit_code", exit.ExitCode, "signal", exit.Signal, "oom_killed", exit.OOMKilled)
	s.exit = exit
	close(s.exited)
}

// exitOf is how a process ended: a signal's number as Signal and 128 + it
// as the exit code.
func exitOf(ps *os.ProcessState) *Exit {
	e := &Exit{ExitCode: -1, Time: time.Now().UTC()}
	if ps == nil {
		return e
	}
	e.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		e.Signal = int(ws.Signal())
		e.ExitCode = 128 + e.Signal
	}
	return e
}

// killTree kills the task's process group (while its leader is not
// reaped) and its cgroup.
func (s *supervisor) killTree() {
	s.reapMu.Lock()
	if !s.reaped {
		_ = syscall.Kill(-s.pid, syscall.SIGKILL)
	}
	s.reapMu.Unlock()
	s.killCgroup()
}

// killCgroup kills what is in the task's cgroup; not while a process is
// being started, when (on v1) the supervisor itself is in it.
func (s *supervisor) killCgroup() {
	s.startMu.Lock()
	defer s.startMu.Unlock()
	if err := s.cmd.Cgroup.Kill(); err != nil {
		s.logger.Warn("failed to kill what is left of the task", "error", err)
	}
}

// shutdown sends sig to the task, waits up to grace for it to exit, then
// kills the tree, and returns once it has exited.
func (s *supervisor) shutdown(sig syscall.Signal, grace time.Duration) error {
	select {
	case <-s.exited:
		return nil
	default:
	}
	if grace > 0 && sig != 0 {
		s.logger.Info("stopping the task", "signal", sig, "grace", grace)
		if err := s.task.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
			return fmt.Errorf("failed to signal the task: %w", err)
		}
		select {
		case <-s.exited:
		case <-time.After(grace):
			s.logger.Info("the task outlived its grace; killing it")
		}
	}
	s.killTree()
	select {
	case <-s.exited:
		return nil
	case <-time.After(15 * time.Second):
		return errors.New("failed to stop the task: it did not exit 15s after SIGKILL")
	}
}

// serve answers connections until the task has exited, then those open
// are finished.
func (s *supervisor) serve() {
	go func() {
		<-s.exited
		// New connections are refused from now on: the exit file answers.
		s.closeListener()
	}()
	for {
		conn, err := s.listener.AcceptUnix()
		if err != nil {
			break
		}
		if !trustedPeer(conn) {
			s.logger.Warn("refused a connection from another user")
			conn.Close()
			continue
		}
		s.conns.Add(1)
		go func() {
			defer s.conns.Done()
			defer conn.Close()
			s.handle(conn)
		}()
	}
	<-s.exited
	s.conns.Wait()
}

// trustedPeer says whether the process at the other end of conn runs as
// root or as the supervisor's user.
func trustedPeer(conn *net.UnixConn) bool {
	raw, err := conn.SyscallConn()
	if err != nil {
		return false
	}
	var cred *unix.Ucred
	ctlErr := raw.Control(func(fd uintptr) {
		cred, err = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	})
	if ctlErr != nil || err != nil {
		return false
	}
	return cred.Uid == 0 || int(cred.Uid) == os.Geteuid()
}

// handle answers one connection's request.
func (s *supervisor) handle(conn *net.UnixConn) {
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	dec := json.NewDecoder(conn)
	var req request
	if err := dec.Decode(&req); err != nil {
		return
	}
	_ = conn.SetReadDeadline(time.Time{})
	reply := func(r *response) { _ = json.NewEncoder(conn).Encode(r) }
	switch req.Op {
	case opHello:
		select {
		case <-s.exited:
			reply(&response{Pid: s.pid, Start: s.start, Exited: true})
		default:
			reply(&response{Pid: s.pid, Start: s.start})
		}
	case opWait:
		// The driver hangs up when it stops waiting.
		go func() {
			_, _ = io.Copy(io.Discard, conn)
		}()
		<-s.exited
		reply(&response{Exit: s.exit})
	case opSignal:
		reply(s.signal(syscall.Signal(req.Signal)))
	case opShutdown:
		if err := s.shutdown(syscall.Signal(req.Signal), req.Grace); err != nil {
			reply(&response{Error: err.Error()})
			return
		}
		reply(&response{})
	case opExec:
		reply(s.execute(req.Argv, req.Deadline))
	case opExecStream:
		s.execStream(conn, dec, req.Argv, req.TTY)
	default:
		reply(&response{Error: fmt.Sprintf("unknown request %q", req.Op)})
	}
}

func (s *supervisor) signal(sig syscall.Signal) *response {
	select {
	case <-s.exited:
		return &response{Exited: true}
	default:
	}
	if err := s.task.Process.Signal(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return &response{Exited: true}
		}
		return &response{Error: fmt.Sprintf("failed to signal the task: %v", err)}
	}
	return &response{}
}
