package planner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/events"
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
	}
}
func (m *countingMetrics) Delivery(string, bool) {}
func (m *countingMetrics) ProgressReports(n int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.reports += n
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
	must.NoError(t, p.Round(ctx))                    // a starts; big waits for 8 GPUs
	must.StrContains(t, p.Waits()[big.ID], "8 GPUs") // the policy's own reason
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
