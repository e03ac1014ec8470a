package forkserver_test

// The fork server's tests run it with the worker agent's standby program
// and ask it as the agent does (workeragent.Standby), so they are an
// external test package: workeragent imports forkserver.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/forkserver"
	"github.com/schedulearn/schedulearn/driver/workeragent"
)

// startForkServer starts a fork server with modules and waits until it
// serves; it is killed, with whatever it forked, when the test ends.
func startForkServer(t *testing.T, modules ...string) (*forkserver.Server, string) {
	t.Helper()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3")
	}
	return startForkServerWith(t, python, modules...)
}

func startForkServerWith(t *testing.T, python string, modules ...string) (*forkserver.Server, string) {
	t.Helper()
	// In a directory of its own under DefaultParent (as the driver's),
	// which every user can reach; Kill removes it.
	fs := &forkserver.Server{Python: python, Modules: modules, Program: workeragent.StandbyProgram(), Env: []string{"PATH=/usr/bin:/bin"}}
	must.NoError(t, fs.Start())
	t.Cleanup(fs.Kill)
	select {
	case <-fs.Ready():
	case <-time.After(time.Minute):
		t.Fatal("the fork server never served")
	}
	must.True(t, fs.IsReady())
	return fs, python
}

// forkedStandby is a standby with decimal preloaded that fs forked (the
// test fails if fs did not), stopped when the test ends.
func forkedStandby(t *testing.T, fs *forkserver.Server, python string) *workeragent.Standby {
	t.Helper()
	standby := &workeragent.Standby{Python: python, Modules: []string{"decimal"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin"}, Server: fs.Socket()}
	must.NoError(t, standby.Start())
	t.Cleanup(standby.Stop)
	must.True(t, standby.Forked(), must.Sprint(standby.ForkError()))
	return standby
}

// runExit has the agent serving standby run a script that prints whether
// decimal was imported and exits with code, as its first command; it
// returns the exit code the agent reports and the script's output.
func runExit(t *testing.T, standby *workeragent.Standby, python string, code int) (int, string) {
	t.Helper()
	addr := serve(t, &workeragent.Server{Token: "tok", Dir: standby.Dir, Env: standby.Env, Logger: hclog.NewNullLogger(), Standby: standby})
	script := filepath.Join(standby.Dir, "exit.py")
	must.NoError(t, os.WriteFile(script, []byte(fmt.Sprintf("import sys\nprint('decimal' in sys.modules)\nsys.exit(%d)\n", code)), 0o644))
	var stdout, stderr bytes.Buffer
	got, err := workeragent.Run(context.Background(), addr, "tok", python+" "+script, nil, &stdout, &stderr, 5e9)
	must.NoError(t, err, must.Sprint(stderr.String()))
	return got, stdout.String()
}

// serve runs the worker agent srv on a port of its own until the test
// ends and returns its address.
func serve(t *testing.T, srv *workeragent.Server) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ctx, l)
	}()
	t.Cleanup(func() { cancel(); <-served })
	return l.Addr().String()
}

// A standby forked from the node's warm interpreter runs the agent's first
// Python command as the agent's own standby does: with the server's
// modules already imported (and the ones only the agent asked for), the
// command's argv, environment, directory, stdin, stdout, stderr and exit
// code; the next command runs cold.
func TestForkServer_StandbyRunsFirstPythonCommand(t *testing.T) {
	fs, python := startForkServer(t, "decimal")
	dir := t.TempDir()
	script := filepath.Join(dir, "train.py")
	must.NoError(t, os.WriteFile(script, []byte(`import os, sys
print("warm" if "decimal" in sys.modules else "cold", "fractions" in sys.modules, sys.argv[1:], os.environ["WHO"], os.getcwd() == os.environ["WANT_DIR"])
if "decimal" in sys.modules:
    print("the agent's child:", os.getppid() == int(os.environ["AGENT"]))
print(sys.stdin.read().strip(), file=sys.stderr)
sys.exit(int(os.environ.get("CODE", "0")))
`), 0o644))
	env := []string{"PATH=/usr/bin:/bin", "WHO=agent", "WANT_DIR=" + dir, fmt.Sprintf("AGENT=%d", os.Getpid())}
	ready := make(chan struct{})
	standby := &workeragent.Standby{Python: python, Modules: []string{"decimal", "fractions"}, Dir: dir, Env: env, Server: fs.Socket(),
		Ready: func() { close(ready) }}
	must.NoError(t, standby.Start())
	t.Cleanup(standby.Stop)
	must.NoError(t, standby.ForkError())
	must.True(t, standby.Forked())
	select {
	case <-ready:
	case <-time.After(time.Minute):
		t.Fatal("the standby never said it was ready")
	}
	addr := serve(t, &workeragent.Server{Token: "tok", Dir: dir, Env: env, Logger: hclog.NewNullLogger(), Standby: standby})
	for _, want := range []string{"warm True ['--lr', '0.1'] agent True\nthe agent's child: False\n", "cold False ['--lr', '0.1'] agent True\n"} {
		var stdout, stderr bytes.Buffer
		code, err := workeragent.Run(context.Background(), addr, "tok", "env CODE=3 PYTHONUNBUFFERED=1 "+python+" "+script+" --lr 0.1",
			strings.NewReader("from stdin\n"), &stdout, &stderr, 5e9)
		must.NoError(t, err)
		must.Eq(t, 3, code)
		// The forked standby is the server's child, not the agent's.
		must.Eq(t, want, stdout.String())
		must.Eq(t, "from stdin\n", stderr.String())
	}
}

// An agent whose standby the server cannot fork (no server there, or an
// environment that changes the interpreter's startup) starts its own.
func TestForkServer_AgentFallsBack(t *testing.T) {
	fs, python := startForkServer(t, "decimal")
	for name, c := range map[string]struct{ socket, env string }{
		"no server":         {filepath.Join(t.TempDir(), "none.sock"), "X=1"},
		"a startup setting": {fs.Socket(), "PYTHONPATH=/elsewhere"},
	} {
		t.Run(name, func(t *testing.T) {
			standby := &workeragent.Standby{Python: python, Modules: []string{"decimal"}, Dir: t.TempDir(), Env: []string{"PATH=/usr/bin:/bin", c.env}, Server: c.socket}
			must.NoError(t, standby.Start())
			t.Cleanup(standby.Stop)
			must.False(t, standby.Forked())
			must.Error(t, standby.ForkError())
		})
	}
}

// The server refuses what is not a request for a standby, and says why.
func TestForkServer_RefusesBadRequests(t *testing.T) {
	fs, _ := startForkServer(t)
	files := make([]*os.File, 4)
	for i := range files {
		r, w, err := os.Pipe()
		must.NoError(t, err)
		t.Cleanup(func() { r.Close(); w.Close() })
		files[i] = w
	}
	for name, c := range map[string]struct {
		modules []string
		want    string
	}{
		"a module name that is not one": {[]string{"os; import shutil"}, "modules"},
		"too many modules":              {make([]string, 65), "modules"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := forkserver.Fork(fs.Socket(), c.modules, [4]*os.File(files), 5*time.Second)
			must.ErrorContains(t, err, c.want)
		})
	}
	t.Run("no descriptors", func(t *testing.T) {
		conn, err := net.Dial("unix", fs.Socket())
		must.NoError(t, err)
		defer conn.Close()
		_, err = conn.Write([]byte(`{"modules": []}` + "\n"))
		must.NoError(t, err)
		line, _ := bufio.NewReader(conn).ReadString('\n')
		must.StrHasPrefix(t, "error want one request line and 4 file descriptors", line)
	})
}

// Stopping the server removes its socket at once, but a standby already
// forked still runs its command to the end and its agent still gets the
// exit code.
func TestForkServer_StopKeepsForkedStandbys(t *testing.T) {
	fs, python := startForkServer(t, "decimal")
	standby := forkedStandby(t, fs, python)
	fs.Stop()
	_, err := os.Stat(fs.Socket())
	must.True(t, os.IsNotExist(err))
	code, stdout := runExit(t, standby, python, 7)
	must.Eq(t, 7, code)
	must.Eq(t, "True\n", stdout)
	select {
	case <-fs.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the stopped server did not exit after its last standby")
	}
}

// forkCallerScript asks the fork server at argv[1] for a standby, passing
// on its own stdin, stdout and stderr, and exits with the standby's exit
// code (99: refused, the server's answer on stderr). With argv[3] a cgroup
// directory it first moves itself there, takes the supplementary groups
// [65533], nice 5, oom_score_adj 300 and 64 open files at most, and then
// the user and group argv[2].
const forkCallerScript = `import json, os, resource, socket, sys
sock, ids, cgdir = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if cgdir != "-":
    with open(os.path.join(cgdir, "cgroup.procs"), "w") as f:
        f.write(str(os.getpid()))
    os.setgroups([65533])
    os.setpriority(os.PRIO_PROCESS, 0, 5)
    with open("/proc/self/oom_score_adj", "w") as f:
        f.write("300")
    resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))
    os.setgid(ids)
    os.setuid(ids)
r, w = os.pipe()
c = socket.socket(socket.AF_UNIX)
c.connect(sock)
socket.send_fds(c, [json.dumps({"modules": []}).encode() + b"\n"], [0, 1, 2, w])
os.close(w)
f = c.makefile()
print(f.readline().strip(), file=sys.stderr)
line = f.readline().split()
sys.exit(int(line[1]) if line and line[0] == "exit" else 99)
`

// The standby the server forks is the caller's process: its user, groups,
// cgroup, scheduling priority, OOM score adjustment and resource limits
// are the caller's (the kernel's credentials of the socket's peer, and the
// peer's own), not the server's (root's); it can be traced and dumped as
// a process its user started; it holds no descriptor of the server's.
func TestForkServer_ChildTakesTheCallersUserAndCgroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: the server forks as root and the caller is another user")
	}
	own, err := os.ReadFile("/proc/self/cgroup")
	must.NoError(t, err)
	var pids string
	for _, line := range strings.Split(string(own), "\n") {
		if parts := strings.SplitN(line, ":", 3); len(parts) == 3 && parts[1] == "pids" {
			pids = filepath.Join("/sys/fs/cgroup/pids", parts[2])
		}
	}
	if pids == "" {
		t.Skip("no cgroup v1 pids controller to make a cgroup in")
	}
	cg := filepath.Join(pids, fmt.Sprintf("schedulearn-forkserver-test-%d", os.Getpid()))
	if err := os.Mkdir(cg, 0o755); err != nil {
		t.Skipf("cannot make a cgroup: %v", err)
	}
	t.Cleanup(func() {
		// Its processes have exited by then (the caller waited for the standby).
		deadline := time.Now().Add(10 * time.Second)
		for os.Remove(cg) != nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
	})
	// An interpreter every user can run (not one under root's home).
	python := "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skip("no /usr/bin/python3")
	}
	fs, _ := startForkServerWith(t, python, "decimal")

	dir, err := os.MkdirTemp("", "forkserver-probe-") // the caller's user reaches it
	must.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	must.NoError(t, os.Chmod(dir, 0o755))
	probe := filepath.Join(dir, "probe.py")
	must.NoError(t, os.WriteFile(probe, []byte(`import ctypes, os, resource
print(os.getuid(), os.getgid(), os.getgroups(), [l.split(":")[2] for l in open("/proc/self/cgroup").read().split("\n") if ":pids:" in l])
print(os.getpriority(os.PRIO_PROCESS, 0), open("/proc/self/oom_score_adj").read().strip(), resource.getrlimit(resource.RLIMIT_NOFILE))
fds = os.listdir("/proc/self/fd")
print("dumpable", ctypes.CDLL(None).prctl(3, 0, 0, 0, 0), "fds", sorted(int(f) for f in fds)[:4], len(fds))
`), 0o644))
	req := fmt.Sprintf(`{"argv": [%q], "env": {"PATH": "/usr/bin:/bin"}, "dir": %q}`+"\n", probe, dir)
	cmd := exec.Command(python, "-c", forkCallerScript, fs.Socket(), "65534", cg)
	cmd.Stdin = strings.NewReader(req)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	must.NoError(t, cmd.Run(), must.Sprint(stderr.String()))
	rel := strings.TrimPrefix(cg, "/sys/fs/cgroup/pids")
	// Four descriptors: stdin, stdout, stderr and the ready pipe.
	must.Eq(t, fmt.Sprintf("65534 65534 [65533] ['%s']\n5 300 (64, 64)\ndumpable 1 fds [0, 1, 2, 3] 4\n", rel), stdout.String(), must.Sprint(stderr.String()))
	must.StrHasPrefix(t, "pid ", stderr.String())
}

// A caller in another namespace than the server's (here its own UTS
// namespace) is refused: the standby would run where the caller is not.
func TestForkServer_RefusesAnotherNamespace(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Geteuid() != 0 {
		t.Skip("needs root and unshare")
	}
	fs, python := startForkServer(t)
	cmd := exec.Command(unshare, "--uts", python, "-c", forkCallerScript, fs.Socket(), "0", "-")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	err = cmd.Run()
	var exit *exec.ExitError
	must.True(t, errors.As(err, &exit), must.Sprint(err))
	must.Eq(t, 99, exit.ExitCode())
	must.StrContains(t, stderr.String(), "error the caller is in another uts namespace")
}

// A standby whose server died (a driver killed with it) still runs its
// command to the end; its agent, told no exit code, reports 255 once the
// process has ended, and does not hang.
func TestForkServer_ServerGoneExitUnknown(t *testing.T) {
	fs, python := startForkServer(t, "decimal")
	standby := forkedStandby(t, fs, python)
	fs.Kill()
	code, stdout := runExit(t, standby, python, 3)
	must.Eq(t, 255, code)
	must.Eq(t, "True\n", stdout)
}

// A connection that sends nothing holds no one else: agents asking behind
// three of them get their standbys at once, and each idle one is told, after
// its 2 s, that no request came.
func TestForkServer_IdleConnectionsHoldNoOne(t *testing.T) {
	fs, python := startForkServer(t, "decimal")
	var idle []net.Conn
	for range 3 {
		c, err := net.Dial("unix", fs.Socket())
		must.NoError(t, err)
		t.Cleanup(func() { c.Close() })
		idle = append(idle, c)
	}
	// Served one at a time, these three would hold an agent 6 s.
	start := time.Now()
	forkedStandby(t, fs, python)
	must.Less(t, 2*time.Second, time.Since(start))
	for _, c := range idle {
		must.NoError(t, c.SetDeadline(time.Now().Add(30*time.Second)))
		line, _ := bufio.NewReader(c).ReadString('\n')
		must.Eq(t, "error no request within 2 s\n", line)
	}
}

// A driver killed without a word (its lifeline closes, Stop never runs)
// leaves no socket behind: the server removes it, and its directory.
func TestForkServer_DriverGoneRemovesSocket(t *testing.T) {
	fs, _ := startForkServer(t)
	fs.CloseLifeline()
	select {
	case <-fs.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the server did not exit when its driver went")
	}
	_, err := os.Stat(fs.Dir)
	must.True(t, os.IsNotExist(err), must.Sprintf("%s is still there: %v", fs.Dir, err))
}

// A driver and its server killed together leave their socket directory;
// the next server started in the same parent removes it, and only what
// no server serves: not a live server's, not one just made, not another
// kind of directory or file.
func TestForkServer_SweepsStaleDirectories(t *testing.T) {
	parent := t.TempDir()
	dir := func(name string) string {
		d := filepath.Join(parent, name)
		must.NoError(t, os.Mkdir(d, 0o711))
		return d
	}
	listen := func(d string) *net.UnixListener {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: filepath.Join(d, "standby.sock"), Net: "unix"})
		must.NoError(t, err)
		l.SetUnlinkOnClose(false)
		return l
	}
	dead := dir(forkserver.DirPrefix + "1")
	listen(dead).Close() // the socket stays, and refuses
	empty := dir(forkserver.DirPrefix + "2")
	live := dir(forkserver.DirPrefix + "3")
	l := listen(live)
	defer l.Close()
	notSocket := dir(forkserver.DirPrefix + "4")
	must.NoError(t, os.WriteFile(filepath.Join(notSocket, "standby.sock"), nil, 0o600))
	other := dir("other")
	stale := []string{dead, empty, live, notSocket, other}
	want := map[string]bool{dead: false, empty: false, live: true, notSocket: true, other: true}
	if os.Geteuid() == 0 {
		othersUser := dir(forkserver.DirPrefix + "6") // in a shared /tmp: not ours to remove
		must.NoError(t, os.Chown(othersUser, 65534, 65534))
		stale, want[othersUser] = append(stale, othersUser), true
	}
	old := time.Now().Add(-time.Hour)
	for _, d := range stale {
		must.NoError(t, os.Chtimes(d, old, old))
	}
	want[dir(forkserver.DirPrefix+"5")] = true // fresh

	forkserver.SweepStale(parent, time.Minute)
	for d, kept := range want {
		_, err := os.Stat(d)
		must.Eq(t, kept, err == nil, must.Sprintf("%s: %v", filepath.Base(d), err))
	}
}

// A server with nothing for its children to run, or with a variable in
// its environment that would change every child's startup, does not
// start, and leaves nothing behind.
func TestForkServer_StartRefuses(t *testing.T) {
	for name, c := range map[string]struct {
		program, env, want string
	}{
		"no program":        {"", "PATH=/usr/bin:/bin", "no program"},
		"a startup setting": {workeragent.StandbyProgram(), "PYTHONPATH=/elsewhere", "PYTHONPATH"},
	} {
		t.Run(name, func(t *testing.T) {
			parent := t.TempDir()
			fs := &forkserver.Server{Python: "python3", Program: c.program, Parent: parent, Env: []string{c.env}}
			must.ErrorContains(t, fs.Start(), c.want)
			entries, err := os.ReadDir(parent)
			must.NoError(t, err)
			must.SliceEmpty(t, entries)
		})
	}
}
