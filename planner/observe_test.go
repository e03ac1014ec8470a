package planner

import (
	"context"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// countingMetrics records what the planner told it.
type countingMetrics struct {
	mu       sync.Mutex
	rounds   int
	changes  map[policy.ChangeKind]int
	reports  int
	failures int
	// failedChanges counts the changes reported as failed.
	failedChanges int
	requeues      map[string]int
	swept         int
}

func (m *countingMetrics) Round(total, plan time.Duration, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.rounds++
	if failed {
		m.failures++
	}
}

func (m *countingMetrics) Change(kind policy.ChangeKind, _ time.Duration, failed bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !failed {
		m.changes[kind]++
	} else {
		m.failedChanges++
	}
}
func (m *countingMetrics) Delivery(string, bool) {}
func (m *countingMetrics) ProgressReports(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports += n
}
func (m *countingMetrics) SweptRun() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.swept++
}

func (m *countingMetrics) Requeue(kind string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.requeues == nil {
		m.requeues = map[string]int{}
	}
	m.requeues[kind]++
}

func streamTypes(evs []structs.StreamEvent, job string) []string {
	var out []string
	for _, e := range evs {
		if job == "" || e.Job == job {
			out = append(out, e.Type)
		}
	}
	return out
}

// A job's life reaches the event stream in order, with its state and
// GPUs; a preemption, a policy switch and a lost node are events too; the
// metrics hear of every round, change and progress report.
func TestObserve_EventsAndMetrics(t *testing.T) {
	ctx := context.Background()
	p, _, exec, now := newPlanner(t, "fifo", node("n1", 4), node("n2", 4))
	br := events.New(64, *now)
	m := &countingMetrics{changes: map[policy.ChangeKind]int{}}
	p.Events, p.Metrics = br, m

	a := submit(t, p, now, spec(t, "a", 4, 4))
	big := submit(t, p, now, spec(t, "big", 8, 8))
	behind := submit(t, p, now, spec(t, "behind", 2, 2))
	must.NoError(t, p.Round(ctx)) // a starts; big waits for 8 GPUs, behind for big
	must.StrContains(t, p.Waits()[big.ID].Reason, "8 GPUs")
	must.Eq(t, structs.WaitPolicy, p.Waits()[big.ID].Cause, must.Sprint("the policy's own reason"))
	must.StrContains(t, p.Waits()[behind.ID].Reason, "waiting behind job "+big.ID, must.Sprint("the line's reason (the plan's Waiting)"))
	must.Eq(t, structs.WaitPolicy, p.Waits()[behind.ID].Cause)
	must.MapNotContainsKey(t, p.Waits(), a.ID)

	must.NoError(t, p.ReportProgress(ctx, a.ID, []structs.ProgressReport{{Step: 1}, {Step: 2}}))
	_, err := p.SetPolicy(ctx, "elastic-fifo", nil)
	must.NoError(t, err)
	exec.done["a"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx)) // a completes; big starts on both nodes

	p.Cluster = staticCluster{node("n1", 4)}
	must.NoError(t, p.Round(ctx)) // n2 is gone

	evs, lost, _, _ := br.Since(0, 100)
	must.False(t, lost)
	must.Eq(t, []string{structs.StreamJobSubmitted, structs.StreamJobStarted, structs.StreamJobCompleted}, streamTypes(evs, a.ID))
	must.Eq(t, []string{structs.StreamJobSubmitted, structs.StreamJobStarted}, streamTypes(evs, big.ID)[:2])
	var sawPolicy, sawLost bool
	for i, e := range evs {
		if i > 0 {
			must.Eq(t, evs[i-1].Index+1, e.Index)
		}
		switch e.Type {
		case structs.StreamJobStarted:
			must.Eq(t, structs.JobRunning, e.State)
			must.Positive(t, e.GPUs)
		case structs.StreamJobCompleted:
			must.Eq(t, structs.JobComplete, e.State)
			must.Eq(t, 0, e.GPUs)
		case structs.StreamPolicySwitched:
			sawPolicy = true
			must.Eq(t, "elastic-fifo", e.Policy)
		case structs.StreamNodeLost:
			sawLost = true
			must.Eq(t, "n2", e.Node)
		}
	}
	must.True(t, sawPolicy)
	must.True(t, sawLost)

	must.Eq(t, 3, m.rounds)
	must.Eq(t, 2, m.changes[policy.Start])
	must.Eq(t, 2, m.reports)
}

// Why a job waits, in a word: its queue when the queue holds it back,
// the policy when it said why or when GPUs it may use were free, GPUs
// when too few were; with its place in its queue where it has one.
func TestWaits_Causes(t *testing.T) {
	snap := &policy.Snapshot{
		Nodes: []policy.Node{{ID: "n1", GPUs: 4}},
		Jobs: []policy.Job{
			{ID: "run", GPUs: policy.GPURequest{Min: 2, Max: 2, PerWorker: 1}, Allocation: policy.Allocation{"n1": 2}},
			{ID: "big", GPUs: policy.GPURequest{Min: 4, Max: 4, PerWorker: 1}},
			{ID: "small", GPUs: policy.GPURequest{Min: 1, Max: 1, PerWorker: 1}},
			{ID: "said", GPUs: policy.GPURequest{Min: 8, Max: 8, PerWorker: 1}},
			{ID: "held", GPUs: policy.GPURequest{Min: 1, Max: 1, PerWorker: 1}},
		},
	}
	plan := &policy.Plan{Policy: "fifo", Reasons: map[string][]string{"said": {"first", "waits for 8 GPUs"}}}
	queue := map[string]quota.Wait{
		"big":  {Queue: "a", Position: 1, Of: 2},
		"held": {Queue: "b", Position: 1, Of: 1, Reason: "queue b at 0 of 0 GPUs; may borrow 0 more"},
	}
	got := waits(snap, plan, queue, false)
	must.MapNotContainsKey(t, got, "run")
	must.Eq(t, structs.Wait{Cause: structs.WaitGPUs, Reason: "needs 4 GPUs; 2 free that it may use", Queue: "a", Position: 1, Of: 2}, got["big"])
	must.Eq(t, "needs 4 GPUs; 2 free that it may use; 1st of 2 waiting in queue a", got["big"].String())
	must.Eq(t, structs.WaitPolicy, got["small"].Cause)
	must.StrContains(t, got["small"].Reason, "2 GPUs free that it may use, but policy fifo did not start it")
	must.Eq(t, structs.Wait{Cause: structs.WaitPolicy, Reason: "waits for 8 GPUs"}, got["said"])
	must.Eq(t, structs.WaitQuota, got["held"].Cause)
}

// A job that changes more often than its record keeps (structs.MaxEvents,
// MaxHistory) keeps only its newest entries, counts the rest, and the
// event stream still gets each event once: the stream counts events by
// AllEvents, not by the bounded list's length.
func TestObserve_BoundedRecordStillStreamsEveryEvent(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 4))
	br := events.New(4096, *now)
	p.Events = br
	j := submit(t, p, now, spec(t, "a", 1, 1))

	const changes = structs.MaxEvents + 150
	for i := range changes {
		must.NoError(t, p.Update(ctx, j, func(next *structs.Job) error {
			next.History = append(next.History, structs.GPUChange{Time: *now, GPUs: i % 2})
			next.Events = append(next.Events, structs.Event{Time: *now, Type: "grow", Message: fmt.Sprint("change ", i)})
			return nil
		}))
	}
	stored := state(t, st, j.ID)
	must.Len(t, structs.MaxEvents, stored.Events)
	must.Len(t, structs.MaxHistory, stored.History)
	must.Eq(t, changes+1, stored.AllEvents(), must.Sprint("the submission's event and every change"))
	must.Eq(t, changes, stored.AllHistory())
	must.Eq(t, fmt.Sprint("change ", changes-1), stored.Events[len(stored.Events)-1].Message, must.Sprint("the newest are kept"))

	evs, lost, _, _ := br.Since(0, 10000)
	must.False(t, lost)
	var msgs []string
	for _, e := range evs {
		if e.Type == structs.StreamJobResized {
			msgs = append(msgs, e.Message)
		}
	}
	must.Len(t, changes, msgs)
	for i, m := range msgs {
		must.Eq(t, fmt.Sprint("change ", i), m)
	}
}

// A job with a priority under a policy that does not order by priority
// (every builtin) is told so when it is submitted and while it waits for
// the policy, rather than left to read "waiting behind job X (first come,
// first served)" as its priority at work (issue 28); a job without one
// is not.
func TestWaits_PriorityIgnoredIsSaid(t *testing.T) {
	ctx := context.Background()
	p, _, _, now := newPlanner(t, "fifo", node("n1", 4), node("n2", 4))
	submit(t, p, now, spec(t, "a", 4, 4))
	must.NoError(t, p.Round(ctx)) // a runs
	big := submit(t, p, now, spec(t, "big", 8, 8))
	s := spec(t, "urgent", 2, 2)
	s.Priority = 100
	urgent := submit(t, p, now, s)
	plain := submit(t, p, now, spec(t, "plain", 2, 2))

	const said = "policy fifo does not order jobs by priority: this job's (100)"
	warned := func(e structs.Event, want string) bool {
		return e.Type == structs.EventWarning && strings.Contains(e.Message, want)
	}
	must.SliceContainsFunc(t, urgent.Events, said, warned)
	must.SliceNotContainsFunc(t, plain.Events, "priority", warned)

	must.NoError(t, p.Round(ctx)) // big does not fit; the others wait behind it
	w := p.Waits()
	must.StrContains(t, w[urgent.ID].Reason, "waiting behind job "+big.ID)
	must.StrContains(t, w[urgent.ID].Reason, said)
	must.StrNotContains(t, w[plain.ID].Reason, "priority")
}

// A planner that configures no queues holds every job in one line, but
// a job's wait speaks of the queue its jobspec names: not "of queue
// default" or "2nd of 2 waiting in queue default" beside its own queue
// team2 (issue 28).
func TestWaits_QueueAsTheJobNamesIt(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 4))
	// A job stored naming a queue no configuration holds: one submitted
	// before submissions were refused for it (N3 of issue 28).
	a := submit(t, p, now, spec(t, "a", 4, 4))
	stored := state(t, st, a.ID)
	stored.Spec.Queue = "team2"
	must.NoError(t, st.UpdateJob(ctx, stored))
	s := spec(t, "urgent", 4, 4)
	s.Priority = 100
	urgent := submit(t, p, now, s)
	must.NoError(t, p.Round(ctx)) // urgent goes first: a higher priority

	w := p.Waits()[a.ID]
	must.Eq(t, "team2", w.Queue)
	must.Eq(t, "not started: job "+urgent.ID+" has a higher priority (100 > 50) and takes the GPUs", w.String())
	must.StrNotContains(t, w.String(), "default")
}

// Waits is worked out once a round, for every reader until the next
// round (each page of GET /v1/jobs and /v1/queue asks for it), and
// again after that round.
func TestWaits_OncePerRound(t *testing.T) {
	ctx := context.Background()
	p, _, _, now := newPlanner(t, "fifo", node("n1", 4))
	submit(t, p, now, spec(t, "a", 4, 4))
	b := submit(t, p, now, spec(t, "b", 4, 4))
	must.Nil(t, p.Waits(), must.Sprint("no round yet"))
	must.NoError(t, p.Round(ctx)) // a starts; b waits
	first := p.Waits()
	must.MapContainsKey(t, first, b.ID)
	must.Eq(t, reflect.ValueOf(first).UnsafePointer(), reflect.ValueOf(p.Waits()).UnsafePointer(), must.Sprint("the same answer, not worked out again"))
	c := submit(t, p, now, spec(t, "c", 4, 4))
	must.MapNotContainsKey(t, p.Waits(), c.ID)
	must.NoError(t, p.Round(ctx))
	must.MapContainsKey(t, p.Waits(), c.ID)
}
