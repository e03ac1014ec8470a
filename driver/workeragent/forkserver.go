package workeragent

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// forkServerScript is the node's warm interpreter: it imports the modules
// named in its arguments after the first (its socket's path) once, when
// the driver starts, then serves on the
// listening Unix socket it gets as fd 3 until fd 4 (its lifeline from the
// driver) reads end of file. For each connection (one agent asking for a
// standby: a JSON line of the modules it wants and four file descriptors,
// its standby's stdin, stdout, stderr and ready pipe) it forks a child;
// before the child goes on it is moved into the caller's cgroups and takes
// the caller's user, groups, umask, resource limits, nice value, affinity
// and OOM score (from the kernel's credentials of the socket's peer and
// its /proc, never from anything the caller says), and keeps none of the
// server's descriptors, so it is the caller's process as much as one the
// caller started; then it is the standby (standbyBody) on those
// descriptors. A caller in other namespaces than the server's is refused.
// The server answers "pid N" or "error WHY", and later "exit CODE" when
// the child ends (it is the child's parent). docs/driver.md has what each
// check is for.
const forkServerScript = `import importlib, json, os, re, resource, select, selectors, signal, socket, stat, struct, sys, time
SOCKET = sys.argv[1]
for name in sys.argv[2:]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
MAX_CHILDREN = 64
MAX_PER_USER = 32
# Connections accepted and not yet heard from: each waits for its request
# at most REQUEST_WAIT seconds, without holding the others.
MAX_PENDING = 256
MAX_PENDING_PER_USER = 16
REQUEST_WAIT = 2
SO_PEERPIDFD = getattr(socket, "SO_PEERPIDFD", 77)
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
LIMITS = {"Max cpu time": "CPU", "Max file size": "FSIZE", "Max data size": "DATA", "Max stack size": "STACK",
          "Max core file size": "CORE", "Max resident set": "RSS", "Max processes": "NPROC", "Max open files": "NOFILE",
          "Max locked memory": "MEMLOCK", "Max address space": "AS", "Max file locks": "LOCKS",
          "Max pending signals": "SIGPENDING", "Max msgqueue size": "MSGQUEUE", "Max nice priority": "NICE",
          "Max realtime priority": "RTPRIO", "Max realtime timeout": "RTTIME"}
listener = socket.socket(fileno=3)
listener.setblocking(False)
LIFELINE = 4
os.set_blocking(LIFELINE, False)
wake_r, wake_w = os.pipe()
os.set_blocking(wake_r, False)
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *a: None)
signal.set_wakeup_fd(wake_w)
children = {}  # pid -> (connection, uid)
pending = {}  # connection -> (deadline, uid)
sel = selectors.DefaultSelector()
sel.register(listener, selectors.EVENT_READ)
sel.register(LIFELINE, selectors.EVENT_READ)
sel.register(wake_r, selectors.EVENT_READ)

def mounts():
    out = []
    with open("/proc/self/mountinfo") as f:
        for line in f:
            left, _, right = line.partition(" - ")
            fields, rfields = left.split(), right.split()
            if len(fields) < 5 or len(rfields) < 3:
                continue
            if rfields[0] == "cgroup2":
                out.append((None, fields[3], fields[4]))
            elif rfields[0] == "cgroup":
                out.append((set(rfields[2].split(",")), fields[3], fields[4]))
    return out

def cgroups(pid):
    found = {}
    with open("/proc/%d/cgroup" % pid) as f:
        for line in f:
            hid, ctrls, path = line.rstrip("\n").split(":", 2)
            found[ctrls] = path
    return found

def cgroup_dirs(pid):
    theirs, ours, dirs = cgroups(pid), cgroups(os.getpid()), []
    table = mounts()
    for ctrls, path in theirs.items():
        if ours.get(ctrls) == path:
            continue
        want = None if ctrls == "" else set(ctrls.split(","))
        for have, root, point in table:
            if (want is None and have is None) or (want is not None and have is not None and want <= have):
                if root != "/" and not (path == root or path.startswith(root + "/")):
                    raise OSError("cgroup %s of the caller is outside the mount" % path)
                rel = path[len(root):] if root != "/" else path
                dirs.append(point + rel)
                break
        else:
            raise OSError("no mount of cgroup %r" % ctrls)
    return dirs

def same_namespaces(pid):
    for ns in ("mnt", "net", "pid", "ipc", "uts", "user", "cgroup"):
        if os.readlink("/proc/%d/ns/%s" % (pid, ns)) != os.readlink("/proc/self/ns/" + ns):
            return ns
    return None

def proc_status(pid):
    fields = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            name, _, value = line.partition(":")
            fields[name] = value.split()
    return fields

def limits(pid):
    out = []
    with open("/proc/%d/limits" % pid) as f:
        for line in f:
            r = getattr(resource, "RLIMIT_" + LIMITS.get(line[:26].strip(), "-"), None)
            if r is not None:
                soft, hard = (resource.RLIM_INFINITY if v == "unlimited" else int(v) for v in line[26:].split()[:2])
                out.append((r, (soft, hard)))
    return out

def peer_pidfd(conn, pid):
    # The kernel's handle on the peer itself (Linux 6.5), else one opened
    # now: a pid a process that has gone left to another is caught below
    # by the owner's check, not by this handle.
    try:
        return conn.getsockopt(socket.SOL_SOCKET, SO_PEERPIDFD)
    except OSError:
        return os.pidfd_open(pid)

def answer(conn, line):
    try:
        conn.sendall(line.encode() + b"\n")
    except OSError:
        pass

def reap():
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        conn, _ = children.pop(pid, (None, None))
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        answer(conn, "exit %d" % (128 - code if code < 0 else code))
        conn.close()

def caller(conn):
    # Everything the standby takes from its caller, read from the kernel:
    # never what the caller says.
    pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    pidfd = peer_pidfd(conn, pid)
    try:
        ns = same_namespaces(pid)
        if ns:
            raise ValueError("the caller is in another %s namespace" % ns)
        c = {"uid": uid, "gid": gid,
             "dirs": cgroup_dirs(pid),
             "limits": limits(pid),
             "nice": os.getpriority(os.PRIO_PROCESS, pid),
             "affinity": os.sched_getaffinity(pid)}
        with open("/proc/%d/oom_score_adj" % pid) as f:
            c["oom"] = f.read().strip()
        status = proc_status(pid)  # last: its user is checked below
        c["groups"] = [int(g) for g in status.get("Groups", [])]
        c["umask"] = int((status.get("Umask") or ["022"])[0], 8)
        # What /proc said is the caller's only if it is still there (the
        # handle is of the caller, whatever has its pid) and still the
        # kernel's user and group of the connection.
        ids = status.get("Uid", [])[1:2] + status.get("Gid", [])[1:2]
        signal.pidfd_send_signal(pidfd, 0)
        if ids != [str(uid), str(gid)]:
            raise ProcessLookupError()
    except ProcessLookupError:
        raise ValueError("the caller is gone")
    finally:
        os.close(pidfd)
    return c

def accept():
    try:
        conn, _ = listener.accept()
    except OSError:
        return
    try:
        _, uid, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
    except OSError:
        conn.close()
        return
    if len(pending) >= MAX_PENDING or sum(1 for _, u in pending.values() if u == uid) >= MAX_PENDING_PER_USER:
        answer(conn, "error busy: too many connections waiting")
        conn.close()
        return
    conn.setblocking(False)
    pending[conn] = (time.monotonic() + REQUEST_WAIT, uid)
    sel.register(conn, selectors.EVENT_READ)

def expire():
    now = time.monotonic()
    for conn, (deadline, _) in list(pending.items()):
        if deadline <= now:
            del pending[conn]
            sel.unregister(conn)
            answer(conn, "error no request within %d s" % REQUEST_WAIT)
            conn.close()

def serve(conn):
    # Readable: the request line and its descriptors came in one message.
    del pending[conn]
    sel.unregister(conn)
    fds = []
    try:
        msg, fds, _, _ = socket.recv_fds(conn, 4096, 4)
        conn.settimeout(2)
        if len(fds) != 4 or not msg.endswith(b"\n"):
            raise ValueError("want one request line and 4 file descriptors")
        for fd in fds:
            mode = os.fstat(fd).st_mode
            if not (stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or stat.S_ISCHR(mode)):
                raise ValueError("want pipes, sockets or character devices")
        modules = json.loads(msg)["modules"]
        if not isinstance(modules, list) or len(modules) > 64 or not all(isinstance(m, str) and len(m) <= 200 and MODULE.match(m) for m in modules):
            raise ValueError("modules: want at most 64 dotted names")
        if len(children) >= MAX_CHILDREN:
            raise ValueError("busy: %d standbys running" % len(children))
        c = caller(conn)
        if sum(1 for _, u in children.values() if u == c["uid"]) >= MAX_PER_USER:
            raise ValueError("busy: %d standbys of uid %d running" % (MAX_PER_USER, c["uid"]))
        if os.geteuid() != 0 and (c["uid"], c["gid"]) != (os.geteuid(), os.getegid()):
            raise ValueError("cannot run as uid %d: the server is not root" % c["uid"])
    except Exception as e:
        for fd in fds:
            os.close(fd)
        answer(conn, "error %s" % str(e).replace("\n", " "))
        conn.close()
        return
    go_r, go_w = os.pipe()
    ok_r, ok_w = os.pipe()
    child = os.fork()
    if child == 0:
        try:
            become(c, fds, go_r, go_w, ok_r, ok_w, conn)
        except BaseException:
            os._exit(1)
        # The standby's program ends the interpreter as its own would
        # (its exceptions, SystemExit and atexit handlers as usual).
        run_standby(modules)
        sys.exit(0)
    os.close(go_r)
    os.close(ok_w)
    for fd in fds:
        os.close(fd)
    try:
        for d in c["dirs"]:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(child))
        os.write(go_w, b"g")
        # The child says when it is in its own session with the caller's
        # user: only then is it the caller's to signal. A caller that
        # freezes or stops it holds it, not the server: no more than 5 s.
        ready, _, _ = select.select([ok_r], [], [], 5)
        if not ready or os.read(ok_r, 1) != b"k":
            raise OSError("it did not start within 5 s")
    except OSError as e:
        os.kill(child, signal.SIGKILL)  # reaped by reap(), whenever it ends
        answer(conn, "error failed to start the standby: %s" % str(e).replace("\n", " "))
        conn.close()
        return
    finally:
        os.close(go_w)
        os.close(ok_r)
    children[child] = (conn, c["uid"])
    answer(conn, "pid %d" % child)

def become(c, fds, go_r, go_w, ok_r, ok_w, conn):
    # The server's own descriptors go first (the selector's epoll among
    # them: a standby must not reach the server's state).
    sel.close()
    listener.close()
    for other, _ in children.values():
        other.close()
    for other in pending:
        other.close()
    conn.close()
    signal.set_wakeup_fd(-1)
    for fd in (go_w, ok_r, wake_r, wake_w, LIFELINE):
        os.close(fd)
    if os.read(go_r, 1) != b"g":
        os._exit(1)
    os.close(go_r)
    for sig in (signal.SIGCHLD, signal.SIGHUP, signal.SIGQUIT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    os.setsid()
    os.umask(c["umask"])
    os.sched_setaffinity(0, c["affinity"])
    os.setpriority(os.PRIO_PROCESS, 0, c["nice"])
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write(c["oom"])
    for r, lim in c["limits"]:
        try:
            resource.setrlimit(r, lim)
        except (OSError, ValueError):
            pass  # above the server's own hard limit: the lower one stays
    if os.geteuid() == 0:
        os.setgroups(c["groups"])
        os.setgid(c["gid"])
        os.setuid(c["uid"])
        # setuid made it not dumpable (its /proc root's): it is the
        # caller's process, as one it started would be.
        import ctypes
        if ctypes.CDLL(None, use_errno=True).prctl(4, 1, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
            raise OSError("prctl")
    for i, fd in enumerate(fds):
        os.dup2(fd, i)
    os.write(ok_w, b"k")
    for name in os.listdir("/proc/self/fd"):
        if int(name) > 3:
            try:
                os.close(int(name))
            except OSError:
                pass
    os.chdir("/")
    # The server's random state is every fork's: draw new seeds.
    if "random" in sys.modules:
        sys.modules["random"].seed()
    if "numpy.random" in sys.modules:
        sys.modules["numpy.random"].seed()

def run_standby(modules):
    exec(STANDBY, {"__name__": "__standby__", "modules": modules})

while True:
    wait = None
    if pending:
        wait = max(0, min(d for d, _ in pending.values()) - time.monotonic())
    for key, _ in sel.select(wait):
        if key.fileobj is listener:
            accept()
        elif key.fileobj in pending:
            serve(key.fileobj)
        elif key.fileobj == LIFELINE:
            try:
                if not os.read(LIFELINE, 64):
                    # The driver is gone (stopped, or killed with no
                    # word): no more standbys, and no socket left behind.
                    sel.unregister(listener)
                    sel.unregister(LIFELINE)
                    listener.close()
                    # Each on its own: the driver may have removed either.
                    for remove, path in ((os.unlink, SOCKET), (os.rmdir, os.path.dirname(SOCKET))):
                        try:
                            remove(path)
                        except OSError:
                            pass
            except BlockingIOError:
                pass
        else:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
    expire()
    reap()
    if listener.fileno() < 0 and not children:
        sys.exit(0)
`

// ForkServer is a node's warm interpreter, run by the driver: it imports
// the modules a training imports (torch, horovod.torch: seconds) once, and
// forks, for each worker agent that asks, a standby that has them
// already, so that a worker joining a running job starts its training
// process without those seconds even when the worker's allocation is new
// (the agent's own standby starts with the agent, and its imports are what
// a grow waits for). The agent finds the socket in its task file
// (jobstate.Task.StandbyServer) and falls back to a standby of its own
// when the server cannot serve it.
type ForkServer struct {
	Python  string   // the interpreter
	Modules []string // imported once, at Start
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
func (f *ForkServer) Start() (err error) {
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
	f.socket = filepath.Join(f.Dir, "standby.sock")
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
	script := strings.Replace(forkServerScript, "\ndef run_standby", "\nSTANDBY = "+pythonString(standbyBody)+"\n\ndef run_standby", 1)
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

// dirPrefix names a fork server's socket directory; MaxParentLen keeps
// its socket's path within a Unix socket address (108 bytes).
const (
	dirPrefix    = "horovod-forkserver-"
	MaxParentLen = 107 - len("/"+dirPrefix+"4294967295/standby.sock")
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
	switch err := unix.Fstatat(fd, "standby.sock", &sock, unix.AT_SYMLINK_NOFOLLOW); {
	case err == nil:
		if sock.Mode&unix.S_IFMT != unix.S_IFSOCK {
			return
		}
		conn, err := net.DialTimeout("unix", fmt.Sprintf("/proc/self/fd/%d/standby.sock", fd), time.Second)
		if err == nil {
			conn.Close()
			return
		}
		if !errors.Is(err, syscall.ECONNREFUSED) || unix.Unlinkat(fd, "standby.sock", 0) != nil {
			return
		}
	case !errors.Is(err, unix.ENOENT):
		return
	}
	_ = unix.Rmdir(dir)
}

// probe closes ready once the server answers (it accepts only once its
// imports are done): a request without descriptors, which it refuses.
func (f *ForkServer) probe() {
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
func (f *ForkServer) Pid() int { return f.cmd.Process.Pid }

// Socket is the path agents connect to.
func (f *ForkServer) Socket() string { return f.socket }

// Done is closed when the server has exited.
func (f *ForkServer) Done() <-chan struct{} { return f.done }

// Ready is closed once the server's modules are imported and it serves.
func (f *ForkServer) Ready() <-chan struct{} { return f.ready }

// IsReady says whether the server serves now.
func (f *ForkServer) IsReady() bool {
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
func (f *ForkServer) Stop() {
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
func (f *ForkServer) Kill() {
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
// at startup (PYTHONUNBUFFERED and PYTHONDONTWRITEBYTECODE aside: the
// standby applies them to each command, standbyBody).
func StartupVar(k string) bool {
	if k == "PYTHONUNBUFFERED" || k == "PYTHONDONTWRITEBYTECODE" {
		return false
	}
	return strings.HasPrefix(k, "PYTHON") || strings.HasPrefix(k, "LD_")
}

// forked is a standby the fork server forked for this agent: not its
// child, so its exit code comes from the server, on the connection.
type forked struct {
	pid    int
	pidfd  int // the standby's, taken when the server named it: -1 if none
	conn   *net.UnixConn
	status *bufio.Reader
	copies sync.WaitGroup // stdout and stderr, read to their end
}

func (p *forked) processID() int { return p.pid }

// wait returns the standby's exit code as the server tells it. It does
// not trust the server alone: a server gone (the driver restarted it) or
// hung says nothing, and then the code is 255 once the process has ended
// (its pidfd, which is of that process whatever later takes its pid).
func (p *forked) wait() int {
	told := make(chan string, 1)
	go func() {
		line, _ := p.status.ReadString('\n') // "" once the connection ends
		told <- line
	}()
	var ended chan struct{}
	if p.pidfd >= 0 {
		ended = make(chan struct{})
		go func() {
			defer close(ended)
			fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
			for {
				if _, err := unix.Poll(fds, -1); err != unix.EINTR {
					return
				}
			}
		}()
	}
	var line string
	select {
	case line = <-told:
	case <-ended:
		// The server reaps it and tells at once.
		select {
		case line = <-told:
		case <-time.After(5 * time.Second):
		}
	}
	p.conn.Close()
	if ended != nil {
		<-ended // at once, unless the server went before the process
		unix.Close(p.pidfd)
	}
	code := 255
	if n, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
		if c, err := strconv.Atoi(n); err == nil {
			code = c
		}
	}
	// Output held open by children the command left behind is not waited for.
	done := make(chan struct{})
	go func() { p.copies.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	return code
}

// forkStandby asks the fork server at socket for a standby with modules,
// on the given stdin, stdout, stderr and ready pipe ends.
func forkStandby(socket string, modules []string, files [4]*os.File, timeout time.Duration) (*forked, error) {
	conn, err := net.DialTimeout("unix", socket, timeout)
	if err != nil {
		return nil, err
	}
	uc := conn.(*net.UnixConn)
	_ = uc.SetDeadline(time.Now().Add(timeout))
	req, _ := json.Marshal(map[string][]string{"modules": modules})
	fds := make([]int, len(files))
	for i, f := range files {
		fds[i] = int(f.Fd())
	}
	if _, _, err := uc.WriteMsgUnix(append(req, '\n'), syscall.UnixRights(fds...), nil); err != nil {
		uc.Close()
		return nil, err
	}
	status := bufio.NewReader(io.LimitReader(uc, 4096))
	line, err := status.ReadString('\n')
	if err != nil {
		uc.Close()
		return nil, fmt.Errorf("no answer from the fork server: %w", err)
	}
	line = strings.TrimSpace(line)
	n, ok := strings.CutPrefix(line, "pid ")
	pid, perr := strconv.Atoi(n)
	if !ok || perr != nil || pid <= 1 {
		uc.Close()
		return nil, errors.New(strings.TrimPrefix(line, "error "))
	}
	_ = uc.SetDeadline(time.Time{})
	// The server is its parent and waits for it: the pid is the standby's
	// until the server has told us its exit code.
	pidfd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		pidfd = -1
	}
	return &forked{pid: pid, pidfd: pidfd, conn: uc, status: status}, nil
}
