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
// named in its arguments once, when the driver starts, then serves on the
// listening Unix socket it gets as fd 3 until fd 4 (its lifeline from the
// driver) reads end of file. For each connection (one agent asking for a
// standby: a JSON line of the modules it wants and four file descriptors,
// its standby's stdin, stdout, stderr and ready pipe) it forks a child;
// before the child goes on it is moved into the caller's cgroups and takes
// the caller's user, groups and umask (the kernel's credentials of the
// socket's peer, not anything the caller says), so it is the caller's
// process as much as one the caller started; then it is the standby
// (standbyBody) on those descriptors. A caller in other namespaces than
// the server's is refused. The server answers "pid N" or "error WHY",
// and later "exit CODE" when the child ends (it is the child's parent).
const forkServerScript = `import importlib, json, os, re, selectors, signal, socket, struct, sys
for name in sys.argv[1:]:
    try:
        importlib.import_module(name)
    except BaseException:
        pass
MAX_CHILDREN = 64
MODULE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*\Z")
listener = socket.socket(fileno=3)
LIFELINE = 4
wake_r, wake_w = os.pipe()
os.set_blocking(wake_w, False)
signal.signal(signal.SIGCHLD, lambda *a: None)
signal.set_wakeup_fd(wake_w)
children = {}
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
    for ns in ("mnt", "net", "pid", "ipc", "uts", "user"):
        if os.readlink("/proc/%d/ns/%s" % (pid, ns)) != os.readlink("/proc/self/ns/" + ns):
            return ns
    return None

def status_field(pid, name):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(name + ":"):
                return line.split(":", 1)[1].split()
    return []

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
        conn = children.pop(pid, None)
        if conn is None:
            continue
        code = os.waitstatus_to_exitcode(status)
        answer(conn, "exit %d" % (128 - code if code < 0 else code))
        conn.close()

def serve(conn):
    fds = []
    try:
        conn.settimeout(5)
        msg, fds, _, _ = socket.recv_fds(conn, 4096, 4)
        pid, uid, gid = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i")))
        if len(fds) != 4 or not msg.endswith(b"\n"):
            raise ValueError("want one request line and 4 file descriptors")
        modules = json.loads(msg)["modules"]
        if not isinstance(modules, list) or len(modules) > 64 or not all(isinstance(m, str) and len(m) <= 200 and MODULE.match(m) for m in modules):
            raise ValueError("modules: want at most 64 dotted names")
        if len(children) >= MAX_CHILDREN:
            raise ValueError("busy: %d standbys running" % len(children))
        ns = same_namespaces(pid)
        if ns:
            raise ValueError("the caller is in another %s namespace" % ns)
        if os.geteuid() != 0 and (uid, gid) != (os.geteuid(), os.getegid()):
            raise ValueError("cannot run as uid %d: the server is not root" % uid)
        dirs = cgroup_dirs(pid)
        groups = [int(g) for g in status_field(pid, "Groups")]
        umask = int((status_field(pid, "Umask") or ["022"])[0], 8)
        # The kernel took uid and gid when the caller connected; what
        # /proc says is of whatever has that pid now. A caller gone and
        # its pid taken by another user's process would lend us that
        # process's groups: its user must be the caller's.
        ids = status_field(pid, "Uid")[1:2] + status_field(pid, "Gid")[1:2]
        if ids != [str(uid), str(gid)]:
            raise ValueError("the caller is gone")
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
            os.close(go_w)
            os.close(ok_r)
            listener.close()
            for c in children.values():
                c.close()
            conn.close()
            signal.set_wakeup_fd(-1)
            signal.signal(signal.SIGCHLD, signal.SIG_DFL)
            os.close(wake_r)
            os.close(wake_w)
            os.close(LIFELINE)
            if os.read(go_r, 1) != b"g":
                os._exit(1)
            os.close(go_r)
            os.setsid()
            os.umask(umask)
            if os.geteuid() == 0:
                os.setgroups(groups)
                os.setgid(gid)
                os.setuid(uid)
            for i, fd in enumerate(fds):
                os.dup2(fd, i)
            for fd in fds:
                if fd > 3:
                    os.close(fd)
            os.chdir("/")
            os.write(ok_w, b"k")
            os.close(ok_w)
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
        for d in dirs:
            with open(os.path.join(d, "cgroup.procs"), "w") as f:
                f.write(str(child))
        os.write(go_w, b"g")
        os.close(go_w)
        go_w = -1
        # The child answers once it is in its own session with the
        # caller's user: only then is it the caller's to signal.
        if os.read(ok_r, 1) != b"k":
            raise OSError("it exited before it was ready")
    except OSError as e:
        if go_w >= 0:
            os.close(go_w)
        os.close(ok_r)
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        answer(conn, "error failed to start the standby: %s" % str(e).replace("\n", " "))
        conn.close()
        return
    os.close(ok_r)
    children[child] = conn
    answer(conn, "pid %d" % child)

def run_standby(modules):
    exec(STANDBY, {"__name__": "__standby__", "modules": modules})

while True:
    for key, _ in sel.select():
        if key.fileobj is listener:
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            serve(conn)
        elif key.fileobj == LIFELINE:
            if not os.read(LIFELINE, 64):
                sel.unregister(listener)
                sel.unregister(LIFELINE)
                listener.close()
        else:
            try:
                os.read(wake_r, 512)
            except BlockingIOError:
                pass
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
	// directory under the system's temporary directory.
	Dir string
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
func (f *ForkServer) Start() error {
	for _, kv := range f.Env {
		if k, _, _ := strings.Cut(kv, "="); StartupVar(k) {
			return fmt.Errorf("fork server: %s would change the interpreter's startup for its children", k)
		}
	}
	dir := f.Dir
	if dir == "" {
		d, err := os.MkdirTemp("", "horovod-forkserver-")
		if err != nil {
			return fmt.Errorf("fork server: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	f.Dir = dir
	// Any user's task may connect (and gets a process of its own user, in
	// its own cgroups): the directory is searchable, not listable.
	if err := os.Chmod(dir, 0o711); err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	f.socket = filepath.Join(dir, "standby.sock")
	_ = os.Remove(f.socket)
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: f.socket, Net: "unix"})
	if err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	if err := os.Chmod(f.socket, 0o666); err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	lf, err := l.File()
	if err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	defer lf.Close()
	lifeR, lifeW, err := os.Pipe()
	if err != nil {
		return fmt.Errorf("fork server: %w", err)
	}
	defer lifeR.Close()
	script := strings.Replace(forkServerScript, "\ndef run_standby", "\nSTANDBY = "+pythonString(standbyBody)+"\n\ndef run_standby", 1)
	cmd := exec.Command(f.Python, append([]string{"-c", script}, f.Modules...)...)
	cmd.Dir = "/"
	cmd.Env = f.Env
	cmd.Stdout, cmd.Stderr = f.Log, f.Log
	cmd.ExtraFiles = []*os.File{lf, lifeR}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		lifeW.Close()
		return fmt.Errorf("fork server: failed to start %s: %w", f.Python, err)
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

// wait returns the standby's exit code as the server tells it; if the
// server is gone (the driver restarted it), 255 once the process is.
func (p *forked) wait() int {
	line, err := p.status.ReadString('\n')
	p.conn.Close()
	code := 255
	if err == nil {
		if n, ok := strings.CutPrefix(strings.TrimSpace(line), "exit "); ok {
			if c, err := strconv.Atoi(n); err == nil {
				code = c
			}
		}
	} else if p.pidfd >= 0 {
		// Readable once the process has ended (and never another's: the
		// descriptor is of that process, whatever later takes its pid).
		fds := []unix.PollFd{{Fd: int32(p.pidfd), Events: unix.POLLIN}}
		for {
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				break
			}
		}
	}
	if p.pidfd >= 0 {
		unix.Close(p.pidfd)
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
