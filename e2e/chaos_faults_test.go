//go:build e2e

package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/internal/lab"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
)

// chaosFault is one fault as injected: its target, when, the jobs it
// touched, and how to undo it.
type chaosFault struct {
	plan     chaosFaultPlan
	target   string // a host, a planner's host, or a worker allocation
	injected time.Time
	undone   time.Time // zero: not yet (or nothing to undo)
	affected []string  // planner job IDs
	// tookLeader: the fault took the leading planner away (a leader
	// kill, or a host-down or partition of the host it ran on).
	tookLeader bool
	skipped    string // why it was not injected (nothing to inject it into)
	undo       func(ctx context.Context) error
}

// errChaosNoTarget: nothing runs that the fault could hit now.
var errChaosNoTarget = errors.New("no target")

// inject injects a fault of plan's kind, its target chosen with plan.pick
// among what runs now.
func (r *chaosRun) inject(ctx context.Context, plan chaosFaultPlan) *chaosFault {
	f := &chaosFault{plan: plan}
	var err error
	switch plan.kind {
	case faultWorkerKill:
		err = r.killWorker(ctx, f)
	case faultHostDown:
		err = r.hostFault(ctx, f, r.cl.c.TakeDown, func(ctx context.Context, host string) error {
			if err := r.cl.c.BringUp(ctx, host); err != nil {
				return err
			}
			return r.cl.restartPlannersOn(host) // node2's planner went down with it
		})
	case faultPartition:
		err = r.hostFault(ctx, f, r.cl.c.Partition, r.cl.c.Heal)
	case faultConsulFreeze:
		err = r.freezeConsul(ctx, f)
	case faultLeaderKill:
		err = r.killLeader(ctx, f)
	case faultNomadRestart:
		err = r.restartNomad(ctx, f)
	}
	if errors.Is(err, errChaosNoTarget) {
		f.skipped = "nothing to inject it into"
	} else if err != nil {
		f.skipped = err.Error()
	}
	return f
}

// killWorker SIGKILLs one running worker task (Nomad's alloc signal).
func (r *chaosRun) killWorker(ctx context.Context, f *chaosFault) error {
	allocs, err := chaosAllocs(ctx, r.cl.nomad)
	if err != nil {
		return err
	}
	var workers []*nomadapi.AllocationListStub
	for _, a := range allocs {
		if strings.HasPrefix(a.TaskGroup, "worker-") && a.ClientStatus == nomadapi.AllocClientStatusRunning {
			workers = append(workers, a)
		}
	}
	if len(workers) == 0 {
		return errChaosNoTarget
	}
	slices.SortFunc(workers, func(a, b *nomadapi.AllocationListStub) int { return strings.Compare(a.ID, b.ID) })
	victim := workers[f.plan.pick%uint64(len(workers))]
	a, _, err := r.cl.nomad.Allocations().Info(victim.ID, (&nomadapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return fmt.Errorf("failed to read allocation %s: %w", victim.ID, err)
	}
	f.target = fmt.Sprintf("%s on %s", victim.Name, victim.NodeName)
	f.affected = []string{strings.TrimPrefix(victim.JobID, nomadjob.JobPrefix)}
	f.injected = time.Now()
	if err := r.cl.nomad.Allocations().Signal(a, (&nomadapi.QueryOptions{}).WithContext(ctx), nomadjob.WorkerTask, "SIGKILL"); err != nil {
		return fmt.Errorf("failed to signal worker %s: %w", victim.ID, err)
	}
	return nil
}

// hostFault cuts off (do) a client host and undoes it after the hold: half
// the time a host that runs a launcher, else either client host.
func (r *chaosRun) hostFault(ctx context.Context, f *chaosFault, do, undo func(context.Context, string) error) error {
	hosts := []string{"node2", "node3"}
	if launchers := r.launcherHosts(ctx); f.plan.pick%2 == 0 && len(launchers) > 0 {
		hosts = launchers
	}
	host := hosts[(f.plan.pick/2)%uint64(len(hosts))]
	return r.hostFaultOn(ctx, f, host, do, undo)
}

func (r *chaosRun) hostFaultOn(ctx context.Context, f *chaosFault, host string, do, undo func(context.Context, string) error) error {
	f.target = host
	f.affected = r.jobsOn(ctx, host)
	leader, _ := r.leaders.current()
	f.tookLeader = leader == host
	f.injected = time.Now()
	if err := do(ctx, host); err != nil {
		return err
	}
	f.undo = func(ctx context.Context) error { return undo(ctx, host) }
	return nil
}

// freezeConsul stops a host's Consul agent (node1's is the server the
// planners' store lives on).
func (r *chaosRun) freezeConsul(ctx context.Context, f *chaosFault) error {
	host := r.cl.c.Hosts[f.plan.pick%uint64(len(r.cl.c.Hosts))].Name
	on := host
	if r.cl.c.Host(host).Servers {
		on = "" // the store: every job's records
	}
	f.target = host
	f.affected = r.jobsOn(ctx, on)
	f.injected = time.Now()
	if err := r.cl.c.Freeze(host, lab.AgentConsul); err != nil {
		return err
	}
	f.undo = func(context.Context) error { return r.cl.c.Thaw(host, lab.AgentConsul) }
	return nil
}

// killLeader SIGKILLs the leading planner; the undo starts it again.
func (r *chaosRun) killLeader(ctx context.Context, f *chaosFault) error {
	// A leader's status may be slow to answer on a loaded machine: wait
	// a little for the tracker to see one.
	leader, _ := r.leaders.current()
	for deadline := time.Now().Add(15 * time.Second); leader == "" && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		leader, _ = r.leaders.current()
	}
	if leader == "" {
		return errChaosNoTarget
	}
	var p *chaosPlanner
	for _, c := range r.cl.planners {
		if c.spec.Host.Name == leader {
			p = c
		}
	}
	f.target = leader
	f.affected = r.jobsOn(ctx, "")
	f.tookLeader = true
	f.injected = time.Now()
	if err := p.proc().Signal(syscall.SIGKILL); err != nil {
		return fmt.Errorf("failed to kill the planner on %s: %w", leader, err)
	}
	f.undo = func(context.Context) error { return r.cl.restartPlannersOn(leader) }
	return nil
}

// restartNomad restarts the servers' Nomad agent (the Nomad server, and
// node1's client): it returns once node1 is ready again. Launchers and
// workers cut off from the servers for longer than their fence (4 s)
// stop, and the planner runs their jobs again.
func (r *chaosRun) restartNomad(ctx context.Context, f *chaosFault) error {
	f.target = r.cl.c.Hosts[0].Name
	f.affected = r.jobsOn(ctx, "")
	f.injected = time.Now()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	defer cancel()
	err := r.cl.c.RestartNomad(ctx, f.target)
	f.undone = time.Now() // back (the report measures from the injection)
	return err
}

// chaosAllocs lists every allocation with its allocated resources.
func chaosAllocs(ctx context.Context, nomad *nomadapi.Client) ([]*nomadapi.AllocationListStub, error) {
	q := (&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}}).WithContext(ctx)
	allocs, _, err := nomad.Allocations().List(q)
	if err != nil {
		return nil, fmt.Errorf("failed to list allocations: %w", err)
	}
	return allocs, nil
}

// jobsOn lists the planner jobs with a live allocation on host (any host
// when host is empty), sorted.
func (r *chaosRun) jobsOn(ctx context.Context, host string) []string {
	allocs, err := chaosAllocs(ctx, r.cl.nomad)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range allocs {
		live := a.ClientStatus == nomadapi.AllocClientStatusRunning || a.ClientStatus == nomadapi.AllocClientStatusPending
		id := strings.TrimPrefix(a.JobID, nomadjob.JobPrefix)
		if live && a.DesiredStatus == nomadapi.AllocDesiredStatusRun && (host == "" || a.NodeName == host) && !slices.Contains(out, id) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// launcherHosts lists the client hosts (not the servers') that run a
// launcher now.
func (r *chaosRun) launcherHosts(ctx context.Context) []string {
	allocs, err := chaosAllocs(ctx, r.cl.nomad)
	if err != nil {
		return nil
	}
	var out []string
	for _, a := range allocs {
		if a.TaskGroup == nomadjob.LauncherGroup && a.ClientStatus == nomadapi.AllocClientStatusRunning &&
			!r.cl.c.Host(a.NodeName).Servers && !slices.Contains(out, a.NodeName) {
			out = append(out, a.NodeName)
		}
	}
	slices.Sort(out)
	return out
}

// chaosDetectWithin bounds detection: the planner's word on a fault must
// come within this long after the fault's hold (its health watch acts 2
// minutes after a stall at most, docs/policies.md).
const chaosDetectWithin = 2 * time.Minute

// detect is the planner's own first word of f after its injection: the
// event's time and a summary ("" and zero: none).
func (r *chaosRun) detect(f *chaosFault) (time.Time, string) {
	if f.plan.kind == faultLeaderKill {
		if at := r.leaders.firstLeaderAfter(f.injected, f.target); !at.IsZero() {
			return at, "leader change"
		}
		return time.Time{}, ""
	}
	// What the planner says later than this is another fault's doing.
	until := f.injected.Add(f.plan.hold + chaosDetectWithin)
	for _, e := range r.events.since(f.injected) {
		if e.Time.After(until) {
			break
		}
		if chaosDetects(f, e, r.cl.nodeIDs[f.target]) {
			return e.Time, e.Type
		}
	}
	return time.Time{}, ""
}

// chaosDetects says whether event e is the planner's word on fault f:
// node-lost or consul-agents down for a host cut off, dependency-down for
// a frozen Consul agent or the Nomad server restarting (or a health or
// requeue event of a job it ran), a health or requeue event of the job
// whose worker was killed.
func chaosDetects(f *chaosFault, e chaosEvent, nodeID string) bool {
	names := func(s string) bool {
		return strings.Contains(s, f.target) || nodeID != "" && strings.Contains(s, nodeID)
	}
	switch f.plan.kind {
	case faultWorkerKill:
		return slices.Contains(f.affected, e.Job) && slices.Contains([]string{"job-health", "job-requeued", "node-lost"}, e.Type)
	case faultHostDown, faultPartition:
		return e.Type == "node-lost" && (names(e.Message) || names(e.Node)) ||
			e.Type == "dependency-down" && names(e.Message)
	case faultNomadRestart:
		// A restart shorter than two of the watch's checks is no outage to
		// it; what the planner says then is its jobs' fate.
		return e.Type == "dependency-down" && strings.HasPrefix(e.Message, "nomad ") ||
			slices.Contains(f.affected, e.Job) && slices.Contains([]string{"job-health", "job-requeued"}, e.Type)
	case faultConsulFreeze:
		if f.target == "node1" {
			return e.Type == "dependency-down" && strings.HasPrefix(e.Message, "consul ")
		}
		return e.Type == "dependency-down" && strings.HasPrefix(e.Message, "consul-agents") && names(e.Message)
	}
	return false
}
