package lab

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"
)

// listenEnv makes the test binary listen on the address it names and
// accept until killed (TestPartitionHeal's process on a host).
const listenEnv = "LAB_TEST_LISTEN"

// listenScenario is the test binary as a process on a lab host.
func listenScenario() int {
	l, err := net.Listen("tcp", os.Getenv(listenEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	for {
		c, err := l.Accept()
		if err != nil {
			return 1
		}
		c.Close()
	}
}

// procState is a process's state letter in /proc (R, S, T, ...).
func procState(t *testing.T, pid int) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	must.NoError(t, err)
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])[0]
}

// waitState waits until the process's state is (or, with not, is no
// longer) want: a signal is delivered asynchronously.
func waitState(t *testing.T, pid int, want string, not bool) {
	t.Helper()
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		return (procState(t, pid) == want) != not
	}), wait.Timeout(5*time.Second), wait.Gap(10*time.Millisecond)))
}

// A frozen agent is stopped (SIGSTOP) until thawed; freezing or thawing
// twice, an unknown host or agent, and an agent not running are errors
// that name the host; Stop's undoFaults thaws what a test left frozen.
func TestFreezeThaw(t *testing.T) {
	dir := t.TempDir()
	p, err := startProcess("consul", "sleep", []string{"60"}, dir, nil, dir)
	must.NoError(t, err)
	t.Cleanup(func() { _ = p.stop(time.Second) })
	c := &MultiHost{Hosts: []*Host{{Name: "node2", consul: p}}}
	pid := p.Pid()

	must.NoError(t, c.Freeze("node2", AgentConsul))
	waitState(t, pid, "T", false)
	must.NoError(t, c.Thaw("node2", AgentConsul))
	waitState(t, pid, "T", true)

	errs := []struct {
		name string
		do   func() error
		want string
	}{
		{"thaw a running agent", func() error { return c.Thaw("node2", AgentConsul) }, "failed to thaw consul on host node2: it is not frozen"},
		{"unknown host", func() error { return c.Freeze("node9", AgentConsul) }, "failed to freeze consul on host node9: no such host"},
		{"unknown agent", func() error { return c.Freeze("node2", "vault") }, `unknown agent "vault"`},
		{"agent not running", func() error { return c.Freeze("node2", AgentNomad) }, "failed to freeze nomad on host node2: its nomad agent is not running"},
	}
	for _, tc := range errs {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.do()
			must.Error(t, err)
			must.StrContains(t, err.Error(), tc.want)
		})
	}

	must.NoError(t, c.Freeze("node2", AgentConsul))
	err = c.Freeze("node2", AgentConsul)
	must.Error(t, err)
	must.StrContains(t, err.Error(), "it is frozen already")
	c.undoFaults(context.Background())
	waitState(t, pid, "T", true)
	must.False(t, p.Exited())
}

// A partitioned host is cut off (nothing reaches its address) while its
// processes run on; healed, it answers again. Needs root (namespaces).
func TestPartitionHeal(t *testing.T) {
	if err := CheckNetns(); err != nil {
		t.Skipf("cannot make network namespaces here: %v", err)
	}
	n, err := claimNetwork()
	must.NoError(t, err)
	t.Cleanup(n.destroy)
	prefix := fmt.Sprintf("%s.%d.", netPrefix, n.index)
	hosts := []Host{{Name: "node1", Address: prefix + "2", index: 0}, {Name: "node2", Address: prefix + "3", index: 1}}
	ctx := context.Background()
	must.NoError(t, n.create(ctx, hosts, prefix+"1", 24))

	addr := net.JoinHostPort(hosts[1].Address, "4999")
	t.Setenv(listenEnv, addr)
	bin, err := os.Executable()
	must.NoError(t, err)
	ip, argv := inNamespace(namespaceName(n.index, "node2"), "node2", bin)
	dir := t.TempDir()
	p, err := startProcess("listener", ip, argv, dir, nil, dir)
	must.NoError(t, err)
	t.Cleanup(func() { _ = p.stop(time.Second) })
	c := &MultiHost{net: n, Hosts: []*Host{&hosts[0], &hosts[1]}}

	reachable := func() error {
		conn, err := net.DialTimeout("tcp", addr, 500*time.Millisecond)
		if err == nil {
			conn.Close()
		}
		return err
	}
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(reachable), wait.Timeout(10*time.Second), wait.Gap(100*time.Millisecond)))

	must.NoError(t, c.Partition(ctx, "node2"))
	must.Error(t, reachable(), must.Sprint("a partitioned host answered"))
	must.False(t, p.Exited(), must.Sprint("a partition killed a process on the host"))
	err = c.Partition(ctx, "node2")
	must.Error(t, err)
	must.StrContains(t, err.Error(), "failed to partition host node2: it is partitioned already")

	must.NoError(t, c.Heal(ctx, "node2"))
	must.Wait(t, wait.InitialSuccess(wait.ErrorFunc(reachable), wait.Timeout(10*time.Second), wait.Gap(100*time.Millisecond)))
	err = c.Heal(ctx, "node2")
	must.Error(t, err)
	must.StrContains(t, err.Error(), "failed to heal host node2: it is not partitioned")
	err = c.Partition(ctx, "node7")
	must.Error(t, err)
	must.StrContains(t, err.Error(), "failed to partition host node7: no such host")
}
