# The horovod task driver's fork server (driver/forkserver, Go package
# forkserver: forkserver.go says what it does and docs/driver.md what each
# check is for). Run by the driver as "python3 -c <this> SOCKET MODULE...".
import importlib, json, os, re, resource, select, selectors, signal, socket, stat, struct, sys, time
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

# The children's program (Server.Program: the worker agent's standby,
# standby.py after the port guard): Start puts it in place of this line
# (forkserver.go, programLine).
STANDBY = ""


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
