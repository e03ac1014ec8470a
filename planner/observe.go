package planner

import (
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Metrics records the planner's timings and counts. The planner knows
// only this interface; planner/metrics implements it with Prometheus, and
// nil records nothing. Implementations must be safe for concurrent use
// and quick (they are called inside the round).
type Metrics interface {
	// Round: a round took total, of which plan was the policy's planning.
	Round(total, plan time.Duration, failed bool)
	// Change: the actuator applied (or failed to apply) a change of kind
	// in d (grow and shrink include the drain of workers).
	Change(kind policy.ChangeKind, d time.Duration, failed bool)
	// ProgressReports: n progress reports were recorded.
	ProgressReports(n int)
	// Requeue: a job was requeued for a reason of kind (one of
	// structs.RequeueKinds).
	Requeue(kind string)
	// SweptRun: the run of a job that had ended was found going on, and
	// stopped (SweepRuns).
	SweptRun()
}

// Publisher takes the planner's stream events (planner/events.Broker).
type Publisher interface {
	Publish(evs ...structs.StreamEvent)
}

type noMetrics struct{}

func (noMetrics) Round(time.Duration, time.Duration, bool)      {}
func (noMetrics) Change(policy.ChangeKind, time.Duration, bool) {}
func (noMetrics) ProgressReports(int)                           {}
func (noMetrics) Requeue(string)                                {}
func (noMetrics) SweptRun()                                     {}
func (p *Planner) metrics() Metrics {
	if p.Metrics == nil {
		return noMetrics{}
	}
	return p.Metrics
}

// publishJob publishes the events j's record gained since it had from
// of them (Job.AllEvents: Job.Events is append-only, but for the oldest
// that Bound drops), with the job's state and GPUs.
func (p *Planner) publishJob(j *structs.Job, from int) {
	from = max(0, from-j.Dropped.Events) // an index into j.Events
	if p.Events == nil || from >= len(j.Events) {
		return
	}
	evs := make([]structs.StreamEvent, 0, len(j.Events)-from)
	for _, e := range j.Events[from:] {
		se := structs.StreamEvent{Time: e.Time, Type: structs.StreamType(e.Type), Job: j.ID, State: j.State,
			GPUs: j.GPUs(), Message: e.Message}
		if n := len(j.History); n > 0 && se.Type != structs.StreamJobSubmitted {
			se.Policy = j.History[n-1].Policy
		}
		evs = append(evs, se)
	}
	p.Events.Publish(evs...)
}

// observer is what the planner keeps between rounds for the stream and
// the dashboard: the nodes seen last round, and why each queued job
// waited after it.
type observer struct {
	mu    sync.Mutex
	nodes map[string]string // ID -> name, last round; nil before the first
	// The last round's snapshot and plan, from which Waits works out why
	// each queued job waits when asked (not every round: a queue of
	// thousands would cost a message each, each round).
	snap  *policy.Snapshot
	plan  *policy.Plan
	queue func() map[string]quota.Wait
	// reading counts the Waits calls in flight by the views they read
	// (a snapshot's Jobs, by its array): a round writes over a buffer of
	// views only when it is neither snap's nor read (unread).
	reading map[*policy.Job]int
	// waits is Waits' answer for the round noted last, once worked out
	// (nil before): every read of a page of jobs asks for it, and working
	// it out costs a pass over every queued job. round counts the rounds
	// noted, so that an answer worked out for an older one is not kept.
	waits map[string]structs.Wait
	round uint64
}

// viewsOf is the array of views under jobs (nil: none).
func viewsOf(jobs []policy.Job) *policy.Job {
	if cap(jobs) == 0 {
		return nil
	}
	return &jobs[:1][0]
}

// unread reports whether no Waits reads the views of jobs, nor can
// start to (they are not the last snapshot's): a round may write over them.
func (p *Planner) unread(jobs []policy.Job) bool {
	v := viewsOf(jobs)
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	return v != nil && p.obs.reading[v] == 0 && (p.obs.snap == nil || viewsOf(p.obs.snap.Jobs) != v)
}

// noteNodesSeen publishes a node-lost event for every node of the last
// round that is gone from nodes (down, drained, no GPUs any more), and a
// node-joined event for every new one after the first round.
func (p *Planner) noteNodesSeen(nodes []policy.Node, now time.Time) {
	if p.Events == nil {
		return // nobody to tell (the simulator)
	}
	p.obs.mu.Lock()
	prev := p.obs.nodes
	cur := make(map[string]string, len(nodes))
	for _, n := range nodes {
		cur[n.ID] = n.Name
	}
	p.obs.nodes = cur
	p.obs.mu.Unlock()
	if prev == nil {
		return
	}
	var evs []structs.StreamEvent
	for _, id := range slices.Sorted(maps.Keys(prev)) {
		if _, ok := cur[id]; !ok {
			evs = append(evs, structs.StreamEvent{Time: now, Type: structs.StreamNodeLost, Node: id,
				Message: fmt.Sprintf("node %s (%s) no longer offers GPUs to the planner", prev[id], id)})
		}
	}
	for _, n := range nodes {
		if _, ok := prev[n.ID]; !ok {
			evs = append(evs, structs.StreamEvent{Time: now, Type: structs.StreamNodeJoined, Node: n.ID,
				Message: fmt.Sprintf("node %s (%s) offers %s", n.Name, n.ID, policy.GPUs(n.GPUs))})
		}
	}
	p.Events.Publish(evs...)
}

// noteWaits keeps a round's snapshot, plan and queue places for Waits.
func (p *Planner) noteWaits(snap *policy.Snapshot, plan *policy.Plan, queue func() map[string]quota.Wait) {
	p.obs.mu.Lock()
	p.obs.snap, p.obs.plan, p.obs.queue = snap, plan, queue
	p.obs.waits = nil
	p.obs.round++
	p.obs.mu.Unlock()
}

// LastSnapshot is the snapshot of the last round (nil before the first),
// for the simulator to read between two rounds (policy.Steady). It is
// shared: do not modify it; the round after next may write over it.
func (p *Planner) LastSnapshot() *policy.Snapshot {
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	return p.obs.snap
}

// Waits says why each queued job waited after the last round (by job ID);
// a job queued since has no entry yet: its queue's reason when the queue
// holds it back, else the policy's own reason when it gave one, else how
// many GPUs the job needs against how many the plan left free that it may
// use; with its place in its queue (from planner/quota). It is worked
// out once a round, at the first call: the map is shared by every caller
// until the next round, and none may change it.
func (p *Planner) Waits() map[string]structs.Wait {
	p.obs.mu.Lock()
	snap, plan, queue, round := p.obs.snap, p.obs.plan, p.obs.queue, p.obs.round
	if snap == nil || p.obs.waits != nil {
		defer p.obs.mu.Unlock()
		return p.obs.waits
	}
	v := viewsOf(snap.Jobs)
	if p.obs.reading == nil {
		p.obs.reading = map[*policy.Job]int{}
	}
	p.obs.reading[v]++
	p.obs.mu.Unlock()
	w := waits(snap, plan, queue(), p.Policies != nil && p.Policies.IgnoresPriority(plan.Policy))
	p.obs.mu.Lock()
	defer p.obs.mu.Unlock()
	if p.obs.reading[v]--; p.obs.reading[v] == 0 {
		delete(p.obs.reading, v)
	}
	if p.obs.round == round {
		p.obs.waits = w
	}
	return w
}

// waits works out Waits from a round's snapshot, plan and queue places
// (none changes once the round is over). ignoresPriority says that the
// plan's policy does not order jobs by priority: a job whose priority is
// not the default and that waits for the policy is told so.
func waits(snap *policy.Snapshot, plan *policy.Plan, queue map[string]quota.Wait, ignoresPriority bool) map[string]structs.Wait {
	free := map[string]int{}
	for _, n := range snap.Nodes {
		free[n.ID] = n.GPUs - n.Reserved
	}
	for i := range snap.Jobs {
		for node, g := range plan.Target(&snap.Jobs[i]) {
			free[node] -= g
		}
	}
	waits := map[string]structs.Wait{}
	for i := range snap.Jobs {
		j := &snap.Jobs[i]
		if plan.Target(j).Total() > 0 {
			continue
		}
		q := queue[j.ID]
		w := structs.Wait{Queue: q.Queue, Position: q.Position, Of: q.Of}
		switch r := plan.Why(j); {
		case q.Reason != "":
			w.Cause, w.Reason = structs.WaitQuota, q.Reason
		case len(r) > 0:
			w.Cause, w.Reason = structs.WaitPolicy, r[len(r)-1]
		default:
			w.Cause, w.Reason = freeFor(j, snap.Nodes, free, plan.Policy)
		}
		if ignoresPriority && j.Priority != jobspec.DefaultPriority && w.Cause == structs.WaitPolicy {
			w.Reason += "; " + structs.PriorityIgnored(plan.Policy, j.Priority)
		}
		waits[j.ID] = w
	}
	return waits
}

// freeFor says how many GPUs job j needs against how many the plan left
// free on nodes (free) that it may use, and so whether GPUs or the policy
// is the cause.
func freeFor(j *policy.Job, nodes []policy.Node, free map[string]int, policyName string) (structs.WaitCause, string) {
	usable := 0
	for _, n := range nodes {
		if j.Constraints.Allows(&n) && free[n.ID] > 0 {
			usable += free[n.ID] - free[n.ID]%max(j.GPUs.PerWorker, 1)
		}
	}
	if usable < j.GPUs.Min {
		return structs.WaitGPUs, fmt.Sprintf("needs %s; %d free that it may use", policy.GPUs(j.GPUs.Min), usable)
	}
	return structs.WaitPolicy, fmt.Sprintf("%s free that it may use, but policy %s did not start it this round (order, fairness or placement rules)",
		policy.GPUs(usable), policyName)
}
