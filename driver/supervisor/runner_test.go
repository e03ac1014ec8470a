package supervisor

import (
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

// The task runs with its environment, user and working directory, its
// output in the paths Nomad gives (a FIFO, as logmon's, and a file).
func TestRunner_EnvUserDirOutput(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("runs the task as another user: needs root")
	}
	nobody, err := user.Lookup("nobody")
	if err != nil {
		t.Skip("no user nobody")
	}
	cmd := shCommand(t, `echo "$GREETING from $(id -u) in $(pwd) as $USER"; echo oops >&2; exit 0`)
	cmd.Env = append(cmd.Env, "GREETING=hello")
	cmd.User = "nobody"
	cmd.Dir = filepath.Join(cmd.TaskDir, "local")
	must.NoError(t, os.Mkdir(cmd.Dir, 0o755))
	fifo := filepath.Join(cmd.TaskDir, "stdout.fifo")
	must.NoError(t, syscall.Mkfifo(fifo, 0o600))
	cmd.StdoutPath = fifo
	// logmon's side: a reader opened first.
	reader, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	must.NoError(t, err)
	defer reader.Close()

	r := start(t, cmd)
	exit := wait(t, r, 20*time.Second)
	must.Eq(t, 0, exit.ExitCode)
	must.Positive(t, r.Pid())
	out := make([]byte, 4096)
	_ = reader.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _ := reader.Read(out)
	must.Eq(t, "hello from "+nobody.Uid+" in "+cmd.Dir+" as nobody\n", string(out[:n]))
	must.Eq(t, "oops\n", waitFile(t, cmd.StderrPath, 5*time.Second))

	// The supervisor's files are its own.
	info, err := os.Stat(filepath.Join(cmd.TaskDir, StateDirName))
	must.NoError(t, err)
	must.Eq(t, os.FileMode(0o700), info.Mode().Perm())
}

// Exit codes and signals are reported as a shell reports them.
func TestRunner_ExitCodes(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		script string
		code   int
		signal int
	}{
		{"success", "exit 0", 0, 0},
		{"failure", "exit 3", 3, 0},
		{"signal", "kill -USR1 $$", 128 + int(syscall.SIGUSR1), int(syscall.SIGUSR1)},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			r := start(t, shCommand(t, c.script))
			exit := wait(t, r, 20*time.Second)
			must.Eq(t, c.code, exit.ExitCode)
			must.Eq(t, c.signal, exit.Signal)
			must.False(t, exit.Time.IsZero())
		})
	}
}

// A task that cannot start fails New with why.
func TestRunner_StartFailure(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "true")
	cmd.Path = "/no/such/program"
	_, err := New(hclog.NewNullLogger(), testConfig(t), cmd)
	must.ErrorContains(t, err, `failed to find "/no/such/program"`)

	cmd = shCommand(t, "true")
	cmd.User = "no-such-user-here"
	_, err = New(hclog.NewNullLogger(), testConfig(t), cmd)
	must.ErrorContains(t, err, `failed to find user "no-such-user-here"`)
}

// Signal reaches the task process; after its exit it says so.
func TestRunner_Signal(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "")
	got, ready := filepath.Join(cmd.TaskDir, "got"), filepath.Join(cmd.TaskDir, "ready")
	cmd.Args[1] = `trap 'echo usr1 > ` + got + `; exit 5' USR1; echo ready > ` + ready + `; while :; do sleep 0.05; done`
	r := start(t, cmd)
	waitFile(t, ready, 10*time.Second)
	must.NoError(t, r.Signal(syscall.SIGUSR1))
	must.Eq(t, "usr1\n", waitFile(t, got, 10*time.Second))
	must.Eq(t, 5, wait(t, r, 10*time.Second).ExitCode)
	must.ErrorIs(t, r.Signal(syscall.SIGUSR1), ErrExited)
}

// shutdownScript starts, beside its own loop, a child that ignores SIGTERM
// and a grandchild in a session of its own (out of the process group),
// writes the three pids to pids, and traps SIGTERM as trap says.
func shutdownScript(pids, trap string) string {
	return trap + `
sh -c 'trap "" TERM; echo $$ >> ` + pids + `; while :; do sleep 0.05; done' &
setsid sh -c 'echo $$ >> ` + pids + `; while :; do sleep 0.05; done' &
echo $$ >> ` + pids + `
while :; do sleep 0.05; done`
}

// treeCommand runs shutdownScript in cg; pids is its pid file.
func treeCommand(t *testing.T, cg Cgroup, trap string) (cmd Command, pids string) {
	t.Helper()
	cmd = shCommand(t, "")
	cmd.Cgroup = cg
	pids = filepath.Join(cmd.TaskDir, "pids")
	cmd.Args[1] = shutdownScript(pids, trap)
	return cmd, pids
}

// Shutdown sends the signal, waits the grace, and kills the whole tree:
// a child that ignores SIGTERM and, through the cgroup, a grandchild that
// left the process group.
func TestRunner_ShutdownKillsTree(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name   string
		cgroup func(*testing.T) Cgroup
		trap   string
		grace  time.Duration
		signal int // how the task process ends
		code   int
	}{
		{"v1, task exits on SIGTERM", testCgroupV1, `trap 'exit 0' TERM`, 10 * time.Second, 0, 0},
		{"v1, task ignores SIGTERM", testCgroupV1, `trap '' TERM`, 300 * time.Millisecond, 9, 137},
		{"v2, task ignores SIGTERM", testCgroupV2, `trap '' TERM`, 300 * time.Millisecond, 9, 137},
		{"v1, no grace", testCgroupV1, `trap 'exit 0' TERM`, 0, 9, 137},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			cmd, pidFile := treeCommand(t, c.cgroup(t), c.trap)
			r := start(t, cmd)
			pids := pidsIn(t, pidFile, 3)
			for _, pid := range pids {
				must.True(t, cgroupHas(t, cmd.Cgroup, pid), must.Sprintf("pid %d is not in the task's cgroup", pid))
			}

			began := time.Now()
			must.NoError(t, r.Shutdown(syscall.SIGTERM, c.grace))
			must.Less(t, c.grace+5*time.Second, time.Since(began))
			exit := wait(t, r, 5*time.Second)
			must.Eq(t, c.signal, exit.Signal)
			must.Eq(t, c.code, exit.ExitCode)
			waitGone(t, pids, 5*time.Second)
			left, err := cmd.Cgroup.Pids()
			must.NoError(t, err)
			must.SliceEmpty(t, left)
			// Once exited, shutting down again is done at once.
			must.NoError(t, r.Shutdown(syscall.SIGTERM, time.Second))
		})
	}
}

// Without a cgroup the process group is killed: the child that ignores
// SIGTERM goes too.
func TestRunner_ShutdownWithoutCgroup(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "")
	pidFile := filepath.Join(cmd.TaskDir, "pids")
	cmd.Args[1] = `sh -c 'trap "" TERM; echo $$ >> ` + pidFile + `; while :; do sleep 0.05; done' &
echo $$ >> ` + pidFile + `
trap 'exit 0' TERM
while :; do sleep 0.05; done`
	r := start(t, cmd)
	pids := pidsIn(t, pidFile, 2)
	must.NoError(t, r.Shutdown(syscall.SIGTERM, 5*time.Second))
	must.Eq(t, 0, wait(t, r, 5*time.Second).ExitCode)
	waitGone(t, pids, 5*time.Second)
}

// The task's memory and cpu limits are written into its cgroup; one that
// runs out of memory is reported OOM-killed.
func TestRunner_Limits(t *testing.T) {
	t.Parallel()
	cmd := shCommand(t, "")
	cmd.Cgroup = testCgroupV1(t)
	cmd.Resources = Resources{MemoryLimit: 48 << 20, MemoryReserve: 32 << 20, CPUShares: 300}
	ready := filepath.Join(cmd.TaskDir, "ready")
	cmd.Args[1] = `echo > ` + ready + `; exec tail /dev/zero`
	r := start(t, cmd)
	waitFile(t, ready, 10*time.Second)
	read := func(ctrl, file string) string {
		b, err := os.ReadFile(filepath.Join(cmd.Cgroup.V1[ctrl], file))
		must.NoError(t, err)
		return strings.TrimSpace(string(b))
	}
	must.Eq(t, "50331648", read("memory", "memory.limit_in_bytes"))
	must.Eq(t, "33554432", read("memory", "memory.soft_limit_in_bytes"))
	must.Eq(t, "300", read("cpu", "cpu.shares"))

	// tail keeps the last lines of /dev/zero, which has none: its buffer
	// grows without end.
	exit := wait(t, r, 60*time.Second)
	if swapOn() {
		t.Logf("swap is on: the task may be slow to be OOM-killed; exit %+v", exit)
		return
	}
	must.True(t, exit.OOMKilled, must.Sprintf("exit %+v", exit))
	must.Eq(t, 9, exit.Signal)
}

func swapOn() bool {
	b, err := os.ReadFile("/proc/swaps")
	return err == nil && strings.Count(string(b), "\n") > 1
}

// A task in a network namespace (group networking) runs there.
func TestRunner_NetworkNamespace(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	holder := shCommand(t, "")
	ready := filepath.Join(holder.TaskDir, "ready")
	holder.Path = "/usr/bin/unshare"
	holder.Args = []string{"--net", "/bin/sh", "-c", "echo > " + ready + "; exec sleep 1000"}
	if _, err := os.Stat(holder.Path); err != nil {
		t.Skip("no unshare")
	}
	h := start(t, holder)
	waitFile(t, ready, 10*time.Second)
	ns := "/proc/" + strconv.Itoa(h.Pid()) + "/ns/net"
	want, err := os.Readlink(ns)
	must.NoError(t, err)
	own, err := os.Readlink("/proc/self/ns/net")
	must.NoError(t, err)
	must.NotEq(t, own, want)

	cmd := shCommand(t, "readlink /proc/self/ns/net; while :; do sleep 0.05; done")
	cmd.NetNS = ns
	r := start(t, cmd)
	must.Eq(t, want+"\n", waitFile(t, cmd.StdoutPath, 10*time.Second))
	// Execs run there too, and the supervisor stays in its own.
	out, code, err := r.Exec(time.Now().Add(5*time.Second), []string{"readlink", "/proc/self/ns/net"})
	must.NoError(t, err)
	must.Eq(t, 0, code)
	must.Eq(t, want+"\n", string(out))
	sup, err := os.Readlink("/proc/" + strconv.Itoa(r.State().SupervisorPid) + "/ns/net")
	must.NoError(t, err)
	must.Eq(t, own, sup)
	must.NoError(t, r.Shutdown(syscall.SIGTERM, time.Second))
}
