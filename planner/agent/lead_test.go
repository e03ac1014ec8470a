package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// fencedWrite is one store write and the fence its context carried.
type fencedWrite struct {
	op, job string
	fence   store.Fence
}

// fenceLog is a store that records the fence of every write.
type fenceLog struct {
	store.Store
	mu     sync.Mutex
	writes []fencedWrite
}

func (l *fenceLog) note(ctx context.Context, op, job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.writes = append(l.writes, fencedWrite{op, job, store.FenceFrom(ctx)})
}

func (l *fenceLog) CreateJob(ctx context.Context, j *structs.Job) error {
	l.note(ctx, "create", j.ID)
	return l.Store.CreateJob(ctx, j)
}

func (l *fenceLog) UpdateJob(ctx context.Context, j *structs.Job) error {
	l.note(ctx, "update", j.ID)
	return l.Store.UpdateJob(ctx, j)
}

func (l *fenceLog) PutPolicy(ctx context.Context, p *structs.PolicyState) error {
	l.note(ctx, "policy", "")
	return l.Store.PutPolicy(ctx, p)
}

func (l *fenceLog) logged() []fencedWrite {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]fencedWrite(nil), l.writes...)
}

// termLeader leads at once with a term's fence.
type termLeader struct {
	store.AlwaysLeader
	fence store.Fence
}

func (l *termLeader) Fence() store.Fence { return l.fence }

// startsAll is an actuator for which every change succeeds and no job ends.
type startsAll struct{}

func (startsAll) Apply(context.Context, *structs.Job, policy.Allocation) error { return nil }
func (startsAll) Outcome(context.Context, *structs.Job) (planner.Outcome, error) {
	return planner.Outcome{}, nil
}

// Issue 18: every write the leader makes as leader carries its term's
// fence (a round's record of a start, a stop, a policy switch), so a
// shared store can refuse it once the term has ended; a submission, which
// any planner takes, carries none.
func TestLead_WritesCarryTheTermsFence(t *testing.T) {
	a := newTestAgent(t)
	a.cfg.Round = 50 * time.Millisecond
	log := &fenceLog{Store: a.store}
	a.store, a.planner.Store = log, log
	a.planner.Actuator = startsAll{}
	term := store.Fence{Key: "schedulearn/leader", Session: "term-1"}
	a.leader = &termLeader{fence: term}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		a.lead(ctx)
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		a.planner.Policies.Close()
		_ = a.store.Close()
	})

	src := "training \"t\" {\n  command = \"python3\"\n  gpus = 2\n}\n"
	spec, diags := jobspec.Parse([]byte(src), "t.hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	b := &backend{a: a}
	j, _, err := b.Submit(context.Background(), spec, src, nil)
	must.NoError(t, err)
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		got, err := a.store.GetJob(context.Background(), j.ID)
		return err == nil && got.State == structs.JobRunning
	}), wait.Timeout(10*time.Second), wait.Gap(20*time.Millisecond)))
	_, err = b.Stop(context.Background(), j.ID)
	must.NoError(t, err)
	_, err = b.SetPolicy(context.Background(), "elastic-fifo", nil)
	must.NoError(t, err)

	writes := log.logged()
	must.Eq(t, fencedWrite{"create", j.ID, store.Fence{}}, writes[0], must.Sprint("a submission is no leader's work"))
	ops := map[string]bool{}
	for _, w := range writes[1:] {
		must.Eq(t, term, w.fence, must.Sprintf("the leader's %s of %q was not fenced", w.op, w.job))
		ops[w.op] = true
	}
	must.Eq(t, map[string]bool{"update": true, "policy": true}, ops)
}
