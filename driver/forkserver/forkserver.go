// Package forkserver is the node's warm interpreter: a Python process the
// horovod task driver starts once per client (Server), which imports the
// modules a training imports (torch, horovod.torch: seconds) once and then
// forks, for each worker agent that asks over its Unix socket, a child
// that has them already and is the caller's process (its user, groups,
// cgroups, limits), not the server's. Fork is the asking side: the worker
// agent's standby (driver/workeragent) calls it, and falls back to an
// interpreter of its own when the server cannot serve it.
//
// The protocol, one Unix-socket connection per child:
//
//	agent  -> server  {"modules": [...]}\n, with 4 file descriptors
//	                  (SCM_RIGHTS: the child's stdin, stdout, stderr
//	                  and ready pipe)
//	server -> agent   "pid N\n", or "error WHY\n" and the end
//	server -> agent   "exit CODE\n" once the child has ended
//
// What the child runs is the program the server is given
// (Server.Program: the worker agent's standby, workeragent.StandbyProgram),
// with the global modules set to those its caller asked for. This package
// knows nothing of that program's own protocol, nor imports anything else
// of the module.
package forkserver

import (
	"bufio"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// serverScript is the node's warm interpreter: it imports the modules
// named in its arguments after the first (its socket's path) once, when
// the driver starts, then serves on the listening Unix socket it gets as
// fd 3 until fd 4 (its lifeline from the driver) reads end of file. For
// each connection (one agent asking for a standby: a JSON line of the
// modules it wants and four file descriptors, its standby's stdin, stdout,
// stderr and ready pipe) it forks a child; before the child goes on it is
// moved into the caller's cgroups and takes the caller's user, groups,
// umask, resource limits, nice value, affinity and OOM score (from the
// kernel's credentials of the socket's peer and its /proc, never from
// anything the caller says), and keeps none of the server's descriptors,
// so it is the caller's process as much as one the caller started; then
// it runs Server.Program on those descriptors. A caller in other
// namespaces than the server's is refused. The server answers "pid N" or
// "error WHY", and later "exit CODE" when the child ends (it is the
// child's parent). docs/driver.md has what each check is for.
//
//go:embed forkserver.py
var serverScript string

// programLine is the line of serverScript that Server.Program replaces
// when the server starts.
const programLine = "STANDBY = \"\"\n"

// Server is a node's warm interpreter, run by the driver: it imports the
// modules a training imports (torch, horovod.torch: seconds) once, and
// forks, for each worker agent that asks (Fork), a standby that has them
// already, so that a worker joining a running job starts its training
// process without those seconds even when the worker's allocation is new
// (the agent's own standby starts with the agent, and its imports are what
// a grow waits for). The agent finds the socket in its task file
// (taskfile.Task.StandbyServer) and falls back to a standby of its own
// when the server cannot serve it.
type Server struct {
	Python  string   // the interpreter
	Modules []string // imported once, at Start
	// Program is the Python each child runs once it is the caller's,
	// with the global modules set to the modules its caller asked for
	// (the worker agent's standby: workeragent.StandbyProgram). Required.
	Program string
	// Dir holds the socket; made, and removed by Stop. Empty: a new
	// directory under Parent.
	Dir string
	// Parent is where Start makes Dir when it is empty, and removes what
	// servers killed with their driver left there. Empty: DefaultParent
	// (where a temporary directory's cleaner does not remove a socket in
	// use for days), or the system's temporary directory where /run
	// cannot be written.
	Parent string
	// Env is the server's environment (its children's until their
	// command's applies); it must not hold the driver's secrets, and the
	// interpreter's startup variables (PYTHON*, LD_*) in it are refused.
	Env []string
	// Log takes the server's own output (nil: discarded).
	Log io.Writer

	socket   string
	cmd      *exec.Cmd
	lifeline *os.File
	ready    chan struct{}
	done     chan struct{}
	stopOnce sync.Once
}

// Start starts the server; Ready is closed once its modules are imported.
// A server that cannot start leaves no socket or directory behind.
func (f *Server) Start() (err error) {
	if f.Program == "" {
		return errors.New("fork server: no program for its children")
	}
	for _, kv := range f.Env {
		if k, _, _ := strings.Cut(kv, "="); StartupVar(k) {
			return fmt.Errorf("fork server: %s would change the interpreter's startup for its children", k)
		}
	}
	defer func() {
		if err != nil {
			err = fmt.Errorf("fork server: %w", err)
		}
	}()
	if f.Dir == "" {
		parent := f.Parent
		if parent == "" {
			if parent = DefaultParent; os.MkdirAll(parent, 0o711) != nil {
				parent = os.TempDir()
			}
		} else if err := os.MkdirAll(parent, 0o711); err != nil {
			return err
		}
		sweepStale(parent, time.Minute)
		if f.Dir, err = os.MkdirTemp(parent, dirPrefix); err != nil {
			return err
		}
	} else if err := os.MkdirAll(f.Dir, 0o700); err != nil {
		return err
	}
	f.socket = filepath.Join(f.Dir, socketName)
	defer func() {
		if err != nil {
			_ = os.Remove(f.socket)
			_ = os.Remove(f.Dir)
		}
	}()
	// Any user's task may connect (and gets a process of its own user, in
	// its own cgroups): the directory is searchable, not listable.
	if err := os.Chmod(f.Dir, 0o711); err != nil {
		return err
	}
	_ = os.Remove(f.socket)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.socket, Net: "unix"})
	if err != nil {
		return err
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if err := os.Chmod(f.socket, 0o666); err != nil {
		return err
	}
	lf, err := l.File()
	if err != nil {
		return err
	}
	defer lf.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer lifeR.Close()
	script := strings.Replace(serverScript, programLine, "STANDBY = "+pythonString(f.Program)+"\n", 1)
	cmd := exec.Command(f.Python, append([]string{"-c", script, f.socket}, f.Modules...)...)
	cmd.Dir = "/"
	cmd.Env = f.Env
	cmd.Stdout, cmd.Stderr = f.Log, f.Log
	cmd.ExtraFiles = []*os.File{lf, lifeR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lifeW.Close()
		return fmt.Errorf("failed to start %s: %w", f.Python, err)
	}
	f.cmd, f.lifeline = cmd, lifeW
	f.ready, f.done = make(chan struct{}), make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(f.done)
	}()
	go f.probe()
	return nil
}

// DefaultParent is where fork servers' socket directories go unless told.
const DefaultParent = "/run/schedulearn-standby"

// dirPrefix names a fork server's socket directory, socketName its
// socket in it; MaxParentLen keeps the socket's path within a Unix socket
// address (108 bytes).
const (
	dirPrefix    = "horovod-forkserver-"
	socketName   = "standby.sock"
	MaxParentLen = 107 - len("/"+dirPrefix+"4294967295/"+socketName)
)

// sweepStale removes the socket directories in parent that no server
// serves: a driver and its server killed together (a power cut, a test
// lab's teardown) leave theirs. Only directories of this process's user
// (parent may be a shared temporary directory), older than minAge, whose
// socket is gone or refuses connections; only the socket and the
// directory, through a handle on the directory (a name swapped for a link
// meanwhile leads nowhere else).
func sweepStale(parent string, minAge time.Duration) {
	entries, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range entries {
		if e.IsDir() && strings.HasPrefix(e.Name(), dirPrefix) {
			sweepOne(filepath.Join(parent, e.Name()), minAge)
		}
	}
}

func sweepOne(dir string, minAge time.Duration) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || int(st.Uid) != os.Geteuid() || time.Since(time.Unix(st.Mtim.Unix())) < minAge {
		return
	}
	var sock unix.Stat_t
	switch err := unix.Fstatat(fd, socketName, &sock, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		if sock.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return
		}
		conn, err := net.DialTimeout("unix", fmt.Sprintf("/proc/self/fd/%d/%s", fd, socketName), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || unix.Unlinkat(fd, socketName, 0) != nil {
			return
		}
	case !errors.Is(err, unix.ENOENT):
		return
	}
	_ = unix.Rmdir(dir)
}

// probe closes ready once the server answers (it accepts only once its
// imports are done): a request without descriptors, which it refuses.
func (f *Server) probe() {
	for {
		select {
		case <-f.done:
			return
		default:
		}
		conn, err := net.DialTimeout("unix", f.socket, time.Second)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(10 * time.Minute))
			_, _ = conn.Write([]byte("{}\n"))
			line, _ := bufio.NewReader(conn).ReadString('\n')
			conn.Close()
			if strings.HasPrefix(line, "error ") {
				close(f.ready)
				return
			}
		}
		select {
		case <-f.done:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Pid is the server's process ID (the parent of the standbys it forks).
func (f *Server) Pid() int { return f.cmd.Process.Pid }

// Socket is the path agents connect to.
func (f *Server) Socket() string { return f.socket }

// Done is closed when the server has exited.
func (f *Server) Done() <-chan struct{} { return f.done }

// Ready is closed once the server's modules are imported and it serves.
func (f *Server) Ready() <-chan struct{} { return f.ready }

// IsReady says whether the server serves now.
func (f *Server) IsReady() bool {
	select {
	case <-f.ready:
		select {
		case <-f.done:
			return false
		default:
			return true
		}
	default:
		return false
	}
}

// Stop stops serving and removes the socket. Standbys forked already (in
// their tasks' cgroups) are not touched: the server lives on, without a
// socket, until the last of them ends and it has told its agent the exit
// code.
func (f *Server) Stop() {
	f.stopOnce.Do(func() {
		if f.cmd == nil {
			return
		}
		f.lifeline.Close()
		_ = os.Remove(f.socket)
		_ = os.Remove(f.Dir)
	})
}

// Kill ends the server (tests); the standbys it forked, each in a session
// of its own, are their agents' to stop.
func (f *Server) Kill() {
	f.Stop()
	if f.cmd == nil {
		return
	}
	_ = syscall.Kill(-f.cmd.Process.Pid, syscall.SIGKILL)
	<-f.done
}

// pythonString is s as a Python string literal (a JSON string is one).
func pythonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// StartupVar says whether the interpreter or the dynamic linker reads k
// at startup, so that an interpreter started ahead of its command (the
// server, and every child it forks) cannot take it from the command: the
// server refuses them in its environment, and the worker agent's standby
// does not take a command that changes them. PYTHONUNBUFFERED and
// PYTHONDONTWRITEBYTECODE aside: the standby's program applies them to
// each command (workeragent.StandbyProgram).
func StartupVar(k string) bool {
	if k == "PYTHONUNBUFFERED" || k == "PYTHONDONTWRITEBYTECODE" {
		return false
	}
	return strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "LD_")
}
