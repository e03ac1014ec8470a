package lab

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

func TestOrphans(t *testing.T) {
	zombies := []zombie{{pid: 10, session: 1}, {pid: 11, session: 1}, {pid: 12, session: 2}, {pid: 13, session: 2}}
	cases := []struct {
		name   string
		own    map[int]bool
		pidfds bool
		want   []int
	}{
		{"pidfds: every zombie but our own children", map[int]bool{11: true, 13: true}, true, []int{10, 12}},
		{"pidfds: nothing of ours", nil, true, []int{10, 11, 12, 13}},
		{"no pidfds: only other sessions, never an agent", map[int]bool{13: true}, false, []int{12}},
		{"no pidfds: every other session's zombie", nil, false, []int{12, 13}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.want, orphans(zombies, tc.own, tc.pidfds, 1))
		})
	}
}

func TestPidfdPid(t *testing.T) {
	cases := []struct {
		name   string
		fdinfo string
		pid    int
		ok     bool
	}{
		{"running", "pos:\t0\nflags:\t02000002\nmnt_id:\t15\nino:\t1057\nPid:\t4242\nNSpid:\t4242\n", 4242, true},
		{"reaped", "pos:\t0\nflags:\t02000002\nPid:\t-1\nNSpid:\t-1\n", 0, false},
		{"not a pidfd", "pos:\t0\nflags:\t0100002\nmnt_id:\t30\n", 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "fdinfo")
			must.NoError(t, os.WriteFile(path, []byte(tc.fdinfo), 0o644))
			pid, ok := pidfdPid(path)
			must.Eq(t, tc.ok, ok)
			if ok {
				must.Eq(t, tc.pid, pid)
			}
		})
	}
}

// A child started with os/exec and not yet waited for is our own.
func TestOwnChildren_ExecChild(t *testing.T) {
	if !pidfdsWork() {
		t.Skip("os/exec holds no pidfds here; the reaper takes only other sessions' zombies")
	}
	cmd := exec.Command("sleep", "30")
	must.NoError(t, cmd.Start())
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	must.True(t, ownChildren()[cmd.Process.Pid])
}

// The lab's process is a subreaper: an orphan that exits is reaped, and a
// child the lab started keeps its exit status for its own Wait, through
// every pass of the reaper. A process of its own plays the lab
// (subreaperScenario).
func TestReapOrphans_SubreaperKeepsOwnChildren(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), subreaperEnv+"=1")
	out, err := cmd.CombinedOutput()
	t.Logf("scenario:\n%s", out)
	must.NoError(t, err)
	must.StrContains(t, string(out), "own child exit status 7")
	must.StrContains(t, string(out), "orphans reaped 4 of 4")
	must.StrContains(t, string(out), "zombies left 0")
}

// subreaperScenario runs as its own process: it becomes a subreaper,
// reaps, and reports what it saw; non-zero when something went wrong.
func subreaperScenario() int {
	if err := runSubreaperScenario(); err != nil {
		fmt.Println("FAIL:", err)
		return 1
	}
	return 0
}

func runSubreaperScenario() error {
	becomeSubreaper()
	stop := make(chan struct{})
	defer close(stop)
	go reapOrphans(stop)

	// Our own child, a zombie until its Wait: the reaper must leave it.
	own := exec.Command("sh", "-c", "exit 7")
	if err := own.Start(); err != nil {
		return fmt.Errorf("failed to start own child: %w", err)
	}
	if err := waitFor(5*time.Second, func() bool { st, ok := readStat(own.Process.Pid); return ok && st.zombie }); err != nil {
		return fmt.Errorf("own child did not exit: %w", err)
	}

	// Orphans: the shells exit at once, their children are reparented
	// here and exit later, in this session and in one of their own (as
	// Nomad's executors), and a double fork.
	script := `sleep 0.1 >/dev/null 2>&1 & echo $!
setsid sleep 0.2 >/dev/null 2>&1 & echo $!
(sleep 0.1 >/dev/null 2>&1 & echo $!)
(sh -c 'sleep 0.3' >/dev/null 2>&1 & echo $!)`
	out, err := exec.Command("sh", "-c", script).Output()
	if err != nil {
		return fmt.Errorf("failed to start orphans: %w", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(out)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			return fmt.Errorf("failed to read orphan pid %q: %w", f, err)
		}
		pids = append(pids, pid)
	}
	gone := func() int {
		n := 0
		for _, pid := range pids {
			if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); errors.Is(err, os.ErrNotExist) {
				n++
			}
		}
		return n
	}
	if err := waitFor(10*time.Second, func() bool { return gone() == len(pids) }); err != nil {
		fmt.Printf("orphans reaped %d of %d\n", gone(), len(pids))
		return fmt.Errorf("orphans not reaped: %w", err)
	}
	fmt.Printf("orphans reaped %d of %d\n", gone(), len(pids))

	// A backstop pass too, then the own child's status is still there.
	time.Sleep(reapInterval + 500*time.Millisecond)
	err = own.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return fmt.Errorf("own child's Wait lost its status: %w", err)
	}
	fmt.Printf("own child exit status %d\n", exit.ExitCode())
	fmt.Printf("zombies left %d\n", len(zombieChildren(os.Getpid())))
	return nil
}

func waitFor(d time.Duration, cond func() bool) error {
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			return fmt.Errorf("not within %v", d)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}
