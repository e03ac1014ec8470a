//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/command"
	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/internal/testlab"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// chaosGPUs is each chaos host's simulated GPU count: node1 (the servers,
// a planner) two V100s in pool v100, node2 (a planner) and node3 two
// A100s each in pool a100.
const chaosGPUs = 2

// chaosQueues are the chaos planners' queues (docs/policies.md): two
// teams of 3 GPUs each, borrowing what the other leaves idle.
const chaosQueues = `
queue "a" {
  nominal = 3
}
queue "b" {
  nominal = 3
}
`

// chaosLab is the three-host lab the chaos run breaks: its two planners
// on the Consul store (one leads; the run kills it), and what the run
// needs to restart them.
type chaosLab struct {
	c       *lab.MultiHost
	nomad   *nomadapi.Client
	api     *client.Client // through the lab's planner proxy, as a user
	root    string
	dir     string
	nodeIDs map[string]string // host name -> Nomad node ID

	mu       sync.Mutex
	planners []*chaosPlanner
}

// chaosPlanner is one of the lab's planners, and the processes it ran
// as (a killed one is started again).
type chaosPlanner struct {
	spec  lab.PlannerSpec
	procs []*lab.Process // the last one is the current
}

func (p *chaosPlanner) proc() *lab.Process { return p.procs[len(p.procs)-1] }

func startChaosLab(t *testing.T) *chaosLab {
	t.Helper()
	bin := venvBin(t)
	cfg := testlab.MultiHostConfig(t, []lab.NodeSpec{
		{Name: "node1", Pool: "v100", GPU: lab.GPUSpec{Count: chaosGPUs, Model: "Tesla V100-SXM2-16GB", MemoryMiB: 16384}},
		{Name: "node2", Pool: "a100", GPU: lab.GPUSpec{Count: chaosGPUs}},
		{Name: "node3", Pool: "a100", GPU: lab.GPUSpec{Count: chaosGPUs}},
	})
	cfg.BinDirs = []string{bin}
	cfg.PlannerPolicy = "elastic-fifo"
	cfg.PlannerRound = "1s"
	c := testlab.StartMultiHost(t, cfg)
	nomad, err := c.NomadClient()
	must.NoError(t, err)
	api, err := client.New(client.Config{Address: c.PlannerProxy().Addr, Token: plannerToken, Timeout: 5 * time.Second})
	must.NoError(t, err)
	cl := &chaosLab{c: c, nomad: nomad, api: api, root: testlab.Root(t), dir: t.TempDir()}
	for _, spec := range c.Planners() {
		p := &chaosPlanner{spec: spec}
		cl.planners = append(cl.planners, p)
		must.NoError(t, cl.startPlanner(p))
	}
	t.Cleanup(func() {
		// Kept whether the run passed or not (.cache/e2e-logs): a slow
		// failover that broke no invariant is found in them.
		for _, h := range c.Hosts {
			testlab.SaveLog(t, h.Name+"-consul", c.Logs(h, lab.AgentConsul))
			testlab.SaveLog(t, h.Name+"-nomad", c.Logs(h, lab.AgentNomad))
		}
		for _, p := range cl.planners {
			for i, proc := range p.procs {
				name := fmt.Sprintf("%s-planner-%d", p.spec.Host.Name, i)
				if t.Failed() {
					testlab.DumpLog(t, name, proc.Logs()) // saves it too
				} else {
					testlab.SaveLog(t, name, proc.Logs())
				}
			}
		}
	})
	cl.nodeIDs = waitClusterNodes(t, c, nomad)
	return cl
}

// startPlanner starts p (again) with the chaos queues.
func (cl *chaosLab) startPlanner(p *chaosPlanner) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	proc, err := command.StartClusterPlanner(ctx, cl.c, p.spec, filepath.Join(cl.root, "bin", "schedulearn"),
		plannerToken, filepath.Join(cl.dir, "deliveries"), chaosQueues)
	if err != nil {
		return err
	}
	cl.mu.Lock()
	p.procs = append(p.procs, proc)
	cl.mu.Unlock()
	return nil
}

// restartPlannersOn starts again every planner on host (all hosts when
// host is empty) whose process has exited.
func (cl *chaosLab) restartPlannersOn(host string) error {
	for _, p := range cl.planners {
		if host != "" && p.spec.Host.Name != host || !p.proc().Exited() {
			continue
		}
		if err := cl.startPlanner(p); err != nil {
			return err
		}
	}
	return nil
}

// hostOf is the host name of a Nomad node ID (or the ID itself).
func (cl *chaosLab) hostOf(nodeID string) string {
	for name, id := range cl.nodeIDs {
		if id == nodeID {
			return name
		}
	}
	return nodeID
}

// leaderTracker polls the planners' /v1/status and remembers which
// leads and when that changed: the leader's term (the health watch counts
// from it), the windows with no leader, and the changes (a leader kill's
// detection).
type leaderTracker struct {
	cl *chaosLab

	mu      sync.Mutex
	leader  string    // the leading planner's host; "" none
	since   time.Time // when leader (or none) began
	changes []leaderChange
}

// leaderChange is one observed change of the leading planner.
type leaderChange struct {
	at       time.Time
	from, to string // hosts; "" none
}

func (lt *leaderTracker) run(ctx context.Context) {
	for ctx.Err() == nil {
		leader := ""
		for _, p := range lt.cl.planners {
			if leads, err := lab.PlannerLeads(ctx, p.spec.Address); err == nil && leads {
				leader = p.spec.Host.Name
				break
			}
		}
		lt.mu.Lock()
		if leader != lt.leader || lt.since.IsZero() {
			lt.changes = append(lt.changes, leaderChange{at: time.Now(), from: lt.leader, to: leader})
			lt.leader, lt.since = leader, time.Now()
		}
		lt.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// current is the leading planner's host ("" none) and since when.
func (lt *leaderTracker) current() (string, time.Time) {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	return lt.leader, lt.since
}

// timeline lists the changes of the leading planner, each as seconds
// from start (negative: before the schedule began) and the host that led
// from then ("none": no planner said it led).
func (lt *leaderTracker) timeline(start time.Time) string {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	var b strings.Builder
	for _, c := range lt.changes {
		to := c.to
		if to == "" {
			to = "none"
		}
		fmt.Fprintf(&b, "  %6.1fs %s\n", c.at.Sub(start).Seconds(), to)
	}
	return b.String()
}

// firstLeaderAfter is when a planner other than old first led after at.
func (lt *leaderTracker) firstLeaderAfter(at time.Time, old string) time.Time {
	lt.mu.Lock()
	defer lt.mu.Unlock()
	for _, c := range lt.changes {
		if c.at.After(at) && c.to != "" && c.to != old {
			return c.at
		}
	}
	return time.Time{}
}
