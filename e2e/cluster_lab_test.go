//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/command"
	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
)

// twoHosts is the smallest multi-host lab: two hosts with two simulated
// A100s each, in pool a100.
func twoHosts() []lab.NodeSpec {
	return []lab.NodeSpec{
		{Name: "node1", Pool: "a100", GPU: lab.GPUSpec{Count: 2}},
		{Name: "node2", Pool: "a100", GPU: lab.GPUSpec{Count: 2}},
	}
}

// A multi-host lab rendered by Terraform comes up: each host is its own
// Nomad node with its own address on the bridge, its own hostname, node
// pool and simulated GPUs with UUIDs of its own, and a Consul agent that
// registers its pool service. Stopping it removes every namespace, link,
// process and directory it made, and a second lab starts on the same
// network afterwards.
func TestClusterLab_ComesUpAndCleansUp(t *testing.T) {
	cfg := testlab.MultiHostConfig(t, twoHosts())
	var namespaces []string
	var runDir string
	for run := 1; run <= 2; run++ {
		c, err := lab.StartMultiHost(context.Background(), cfg)
		must.NoError(t, err, must.Sprintf("run %d", run))
		runDir = c.RunDir()
		namespaces = nil
		for _, h := range c.Hosts {
			namespaces = append(namespaces, h.Namespace)
		}
		func() {
			defer func() { must.NoError(t, c.Stop()) }()
			nomad, err := c.NomadClient()
			must.NoError(t, err)
			nodes, _, err := nomad.Nodes().List(&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}})
			must.NoError(t, err)
			must.Len(t, 2, nodes)
			uuids := map[string]string{}
			for _, stub := range nodes {
				h := c.Host(stub.Name)
				must.NotNil(t, h, must.Sprintf("node %s is no host of the lab", stub.Name))
				must.Eq(t, nomadapi.NodeStatusReady, stub.Status)
				must.Eq(t, h.Address, stub.Address, must.Sprint("the node advertises its host's address"))
				must.Eq(t, "a100", stub.NodePool)
				node, _, err := nomad.Nodes().Info(stub.ID, nil)
				must.NoError(t, err)
				must.Eq(t, stub.Name, node.Attributes["unique.hostname"], must.Sprint("the host's own hostname"))
				for _, d := range node.NodeResources.Devices {
					for _, inst := range d.Instances {
						must.MapNotContainsKey(t, uuids, inst.ID, must.Sprint("GPU UUIDs are distinct across hosts"))
						uuids[inst.ID] = stub.Name
					}
				}
			}
			must.MapLen(t, 4, uuids)

			consul, err := c.ConsulClient()
			must.NoError(t, err)
			entries, _, err := consul.Health().Service("schedulearn-pool", "a100", true, nil)
			must.NoError(t, err)
			must.Len(t, 2, entries, must.Sprint("both hosts register the pool service"))
		}()
	}

	out, err := exec.Command("ip", "netns", "list").Output()
	must.NoError(t, err)
	for _, ns := range namespaces {
		must.StrNotContains(t, string(out), ns)
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	must.NoError(t, err)
	index := strings.TrimPrefix(strings.Split(namespaces[0], "-")[0], "sl")
	must.StrNotContains(t, string(links), "slb"+index+":")
	must.StrNotContains(t, string(links), "slv"+index+"-")
	_, err = os.Stat(runDir)
	must.True(t, os.IsNotExist(err), must.Sprintf("run dir %s is left", runDir))
	must.SliceEmpty(t, labProcesses(t, runDir))
}

// A host whose agent cannot start is named, with its agent's output, and
// nothing of the lab is left behind.
func TestClusterLab_HostFailureNamesHost(t *testing.T) {
	cfg := testlab.MultiHostConfig(t, twoHosts())
	cfg.HostNomadConfig = map[string]string{"node2": "client {\n  not_an_option = true\n}\n"}
	cfg.ReadyTimeout = 2 * time.Minute
	_, err := lab.StartMultiHost(context.Background(), cfg)
	must.Error(t, err)
	must.StrContains(t, err.Error(), "host node2")
	must.StrContains(t, err.Error(), "not_an_option", must.Sprint("the agent's own message"))
	entries, _ := os.ReadDir(cfg.StateDir)
	must.SliceEmpty(t, entries, must.Sprint("the failed run's state is removed"))
}

// labProcesses lists the processes whose command line names dir.
func labProcesses(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	must.NoError(t, err)
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(b), dir) {
			out = append(out, e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
		}
	}
	return out
}

// The lab runs two planners on the Consul store, as the planner-job module
// does: one leads, the other stands by. SIGKILLed, the leader is replaced
// within 10 s; the lab's proxy (SCHEDULEARN_ADDR) follows, so the CLI reads
// and writes through it before and after; the killed planner is waited
// for, an orphan that exits on a host is reaped, and the lab's process has
// no zombie children.
func TestClusterLab_PlannerFailover(t *testing.T) {
	cfg := testlab.MultiHostConfig(t, twoHosts())
	cfg.PlannerRound = "1s"
	c := testlab.StartMultiHost(t, cfg)
	root := testlab.Root(t)
	planners, err := command.StartClusterPlanners(context.Background(), c, filepath.Join(root, "bin", "schedulearn"), plannerToken, filepath.Join(t.TempDir(), "deliveries"))
	must.NoError(t, err)
	t.Cleanup(func() {
		for _, p := range planners {
			testlab.DumpLog(t, p.Host+"-planner", p.Proc.Logs())
		}
	})
	must.Eq(t, []string{"node1", "node2"}, []string{planners[0].Host, planners[1].Host})
	must.Eq(t, []bool{true, true}, []bool{c.Host("node1").Planner, c.Host("node2").Planner})
	leader, err := command.WaitClusterLeader(context.Background(), planners, 30*time.Second)
	must.NoError(t, err)
	lead, standby := planners[leader], planners[1-leader]
	st, err := httpGetJSON(standby.Addr + "/v1/status")
	must.NoError(t, err)
	must.Eq(t, false, st["is_leader"], must.Sprint("one leader only"))
	must.StrContains(t, fmt.Sprint(st["leader"]), strings.TrimPrefix(lead.Addr, "http://"), must.Sprint("the standby names the leader"))

	proxy := c.PlannerProxy()
	must.StrContains(t, proxy.Addr, c.BridgeAddress())
	// The planners advertise the proxy to training tasks, which reach it
	// from their hosts.
	out, err := exec.Command("ip", "netns", "exec", c.Host("node2").Namespace, filepath.Join(root, "bin", "schedulearn"),
		"policy", "list", "-address", proxy.Addr, "-token", plannerToken).CombinedOutput()
	must.NoError(t, err, must.Sprintf("the proxy from node2: %s", out))
	p := &plannerProc{t: t, root: root, addr: proxy.Addr}
	cliOK := func(args ...string) string {
		t.Helper()
		out, code := p.cli(args...)
		must.Zero(t, code, must.Sprintf("schedulearn %v: %s", args, out))
		return out
	}
	must.StrContains(t, cliOK("node", "list"), "node2")
	cliOK("policy", "set", "fifo") // a write: only the leader takes it

	must.NoError(t, lead.Proc.Signal(syscall.SIGKILL))
	killed := time.Now()
	var took time.Duration
	waitUntil(t, 30*time.Second, func() error {
		leads, err := lab.PlannerLeads(context.Background(), standby.Addr)
		if err != nil || !leads {
			return fmt.Errorf("%s does not lead yet (%w)", standby.Host, err)
		}
		took = time.Since(killed)
		return nil
	})
	t.Logf("failover: %s leads %.1fs after %s's planner was SIGKILLed", standby.Host, took.Seconds(), lead.Host)
	must.Less(t, 10*time.Second, took, must.Sprint("the standby leads within 10 s"))
	waitUntil(t, 5*time.Second, func() error {
		if proxy.Target() != standby.Addr {
			return fmt.Errorf("the proxy forwards to %q", proxy.Target())
		}
		return nil
	})
	must.StrContains(t, cliOK("node", "list"), "node1")
	must.StrContains(t, cliOK("policy", "set", "elastic-fifo"), "elastic-fifo")

	// An orphan on a host: the shell exits at once; its child, reparented
	// to the lab's process (a subreaper), exits later and is reaped.
	sh, err := c.StartOn(c.Host("node2"), "orphan", "/bin/sh", "-c", "sleep 0.5 >/dev/null 2>&1 & echo $!")
	must.NoError(t, err)
	var orphan string
	waitUntil(t, 10*time.Second, func() error {
		if orphan = strings.TrimSpace(sh.Logs()); orphan == "" {
			return fmt.Errorf("the orphan's shell has not said its pid yet")
		}
		return nil
	})
	waitUntil(t, 10*time.Second, func() error {
		if _, err := os.Stat(filepath.Join("/proc", orphan)); err == nil {
			return fmt.Errorf("orphan %s is still there (running or a zombie)", orphan)
		}
		return nil
	})

	// The killed planner is waited for by the lab (not left a zombie, nor
	// reaped by the orphan reaper before its own Wait), and nothing else
	// of the lab's is a zombie.
	waitUntil(t, 10*time.Second, func() error {
		if !lead.Proc.Exited() {
			return fmt.Errorf("the killed planner has not been waited for")
		}
		if z := zombieChildren(); len(z) > 0 {
			return fmt.Errorf("zombie children of the lab's process: %v", z)
		}
		return nil
	})
}

// zombieChildren lists the zombies whose parent is this process (which
// runs the lab, a subreaper).
func zombieChildren() []string { return zombieChildrenOf(os.Getpid()) }

// zombieChildrenOf lists the zombies whose parent is pid.
func zombieChildrenOf(pid int) []string {
	self := strconv.Itoa(pid)
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) > 1 && f[0] == "Z" && f[1] == self {
			out = append(out, e.Name()+" "+s[:i+1])
		}
	}
	return out
}

// The host of the leading planner goes down (its link cut and everything
// on it killed, as a machine that loses power): its planner can neither
// release the lock nor let its check expire (the check lives on that
// host's Consul agent, which went down with it), so the session ends when
// the standby finds its beat stopped (7 s), or with the host's node health
// (serfHealth), which the Consul server marks critical once gossip finds
// the host gone (9-10 s). The standby leads within 15 s;
// the lab's proxy follows it, so reads and writes through it work again;
// the host comes back, its planner with it, and stands by.
func TestClusterLab_LeaderHostDown(t *testing.T) {
	cfg := testlab.MultiHostConfig(t, twoHosts())
	cfg.PlannerRound = "1s"
	c := testlab.StartMultiHost(t, cfg)
	root := testlab.Root(t)
	bin := filepath.Join(root, "bin", "schedulearn")
	deliveries := filepath.Join(t.TempDir(), "deliveries")
	planners, err := command.StartClusterPlanners(context.Background(), c, bin, plannerToken, deliveries)
	must.NoError(t, err)
	procs := []*lab.Process{planners[0].Proc, planners[1].Proc}
	t.Cleanup(func() {
		for i, p := range procs {
			testlab.DumpLog(t, fmt.Sprintf("planner-%d", i), p.Logs())
		}
	})
	node1, node2 := planners[0], planners[1]
	leads := func(p command.ClusterPlanner) func() error {
		return func() error {
			ok, err := lab.PlannerLeads(context.Background(), p.Addr)
			switch {
			case err != nil:
				return fmt.Errorf("%s does not answer: %w", p.Host, err)
			case !ok:
				return fmt.Errorf("%s does not lead", p.Host)
			}
			return nil
		}
	}
	// node2 leads: node1 (the servers' host) cannot be taken down.
	leader, err := command.WaitClusterLeader(context.Background(), planners, 30*time.Second)
	must.NoError(t, err)
	if leader == 0 {
		must.NoError(t, node1.Proc.Signal(syscall.SIGKILL))
		waitUntil(t, 30*time.Second, leads(node2))
		p, err := command.StartClusterPlanner(context.Background(), c, c.Planners()[0], bin, plannerToken, deliveries, "")
		must.NoError(t, err)
		procs = append(procs, p)
	}
	proxy := &plannerProc{t: t, root: root, addr: c.PlannerProxy().Addr}
	waitUntil(t, 5*time.Second, func() error {
		if c.PlannerProxy().Target() != node2.Addr {
			return fmt.Errorf("the proxy forwards to %q", c.PlannerProxy().Target())
		}
		return nil
	})

	must.NoError(t, c.TakeDown(context.Background(), "node2"))
	down := time.Now()
	var took time.Duration
	waitUntil(t, 60*time.Second, func() error {
		if err := leads(node1)(); err != nil {
			return err
		}
		took = time.Since(down)
		return nil
	})
	t.Logf("failover: node1 leads %.1fs after node2, the leader's host, went down", took.Seconds())
	must.Less(t, 15*time.Second, took, must.Sprint("the standby leads within 15 s of the leader's host going down"))
	waitUntil(t, 5*time.Second, func() error {
		if c.PlannerProxy().Target() != node1.Addr {
			return fmt.Errorf("the proxy forwards to %q", c.PlannerProxy().Target())
		}
		return nil
	})
	for _, args := range [][]string{{"job", "list"}, {"policy", "set", "fifo"}} {
		out, code := proxy.cli(args...)
		must.Zero(t, code, must.Sprintf("schedulearn %v through the proxy after the failover: %s", args, out))
	}

	must.NoError(t, c.BringUp(context.Background(), "node2"))
	p, err := command.StartClusterPlanner(context.Background(), c, c.Planners()[1], bin, plannerToken, deliveries, "")
	must.NoError(t, err)
	procs = append(procs, p)
	st, err := httpGetJSON(node2.Addr + "/v1/status")
	must.NoError(t, err)
	must.Eq(t, false, st["is_leader"], must.Sprint("the planner back on node2 stands by"))
	must.NoError(t, leads(node1)())
}
