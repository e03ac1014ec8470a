// Package leakcheck finds the processes a test binary started and left
// running, reports them and stops them, so a test run leaves the machine as
// it found it whether it passes or fails.
//
// Main marks the test binary's environment with a value of its own. Every
// process started from it inherits the mark (Nomad agents, go-plugin
// plugins and executors copy their parent's environment), and tests add Mark
// to environments they build from scratch (task environments). After the
// tests, any process still carrying the mark was left behind: Main waits a
// little for it to go (executors shut down asynchronously), then kills it
// and fails the run.
package leakcheck

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// EnvName is the variable that carries the mark.
const EnvName = "SCHEDULEARN_TEST_RUN"

// Grace is how long Main waits for marked processes to exit by themselves.
var Grace = 15 * time.Second

// Main runs the tests, then fails the run if any process it started is
// still running (and stops those). Use it as TestMain's exit code:
//
//	func TestMain(m *testing.M) { os.Exit(leakcheck.Main(m)) }
func Main(m *testing.M) int {
	// A mark of its own, also in a test binary started by another one's
	// tests: each checks what it started itself.
	mark := newMark()
	os.Setenv(EnvName, mark)
	code := m.Run()
	if left := Wait(mark, Grace); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "leakcheck: %d process(es) started by these tests were still running after them (killed now):\n", len(left))
		for _, p := range left {
			fmt.Fprintf(os.Stderr, "    pid %d: %s\n", p.Pid, p.Cmdline)
		}
		Kill(left)
		if code == 0 {
			fmt.Fprintln(os.Stderr, "FAIL: leaked processes")
			code = 1
		}
	}
	return code
}

// Mark is this run's mark (EnvName's value), for environments built from
// scratch. It is empty outside Main.
func Mark() string { return os.Getenv(EnvName) }

func newMark() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return fmt.Sprintf("%d-%s", os.Getpid(), hex.EncodeToString(b))
}

// Process is a marked process.
type Process struct {
	Pid     int
	Cmdline string
}

// Find lists the running processes (zombies excluded) whose environment
// carries mark, other than this one.
func Find(mark string) []Process {
	want := []byte(EnvName + "=" + mark)
	entries, _ := os.ReadDir("/proc")
	var found []Process
	self := os.Getpid()
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		if !hasEntry(env, want) || zombie(pid) {
			continue
		}
		cmd, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		cmdline := strings.TrimSpace(strings.ReplaceAll(string(cmd), "\x00", " "))
		if len(cmdline) > 200 {
			cmdline = cmdline[:200] + "..."
		}
		found = append(found, Process{Pid: pid, Cmdline: cmdline})
	}
	sort.Slice(found, func(i, j int) bool { return found[i].Pid < found[j].Pid })
	return found
}

// hasEntry reports whether the NUL-separated environment holds want exactly.
func hasEntry(env, want []byte) bool {
	for _, kv := range bytes.Split(env, []byte{0}) {
		if bytes.Equal(kv, want) {
			return true
		}
	}
	return false
}

func zombie(pid int) bool {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return true
	}
	// pid (comm) state ...: the state follows the last ')'.
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

// Wait polls until no process carries mark or grace has passed, and returns
// those still running.
func Wait(mark string, grace time.Duration) []Process {
	deadline := time.Now().Add(grace)
	for {
		left := Find(mark)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Kill sends SIGKILL to each process and waits briefly for them to go.
func Kill(ps []Process) {
	for _, p := range ps {
		_ = syscall.Kill(p.Pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(5 * time.Second)
	for _, p := range ps {
		for time.Now().Before(deadline) && !zombie(p.Pid) {
			time.Sleep(20 * time.Millisecond)
		}
	}
}
