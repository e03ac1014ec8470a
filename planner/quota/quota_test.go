package quota_test

import (
	"errors"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

func gpus(n int) quota.Amount { return quota.Amount{quota.AnyModel: n} }

func tree(t *testing.T, defs ...quota.Def) *quota.Tree {
	t.Helper()
	tr, err := quota.New(defs)
	must.NoError(t, err)
	return tr
}

func nodes(ids ...string) []policy.Node {
	var out []policy.Node
	for _, id := range ids {
		out = append(out, policy.Node{ID: id, GPUModel: "A100", GPUs: 8})
	}
	return out
}

// job is a job of queue q; alloc is what it holds now (nil: queued).
func job(id, q string, prio, min, max int, alloc policy.Allocation) policy.Job {
	j := policy.Job{ID: id, Queue: q, Priority: prio, Submitted: at(len(id)), State: policy.Queued,
		GPUs: policy.GPURequest{Min: min, Max: max, PerWorker: 1}, Allocation: alloc}
	if alloc.Total() > 0 {
		j.State = policy.Running
	}
	return j
}

func ids(s *policy.Snapshot) []string {
	var out []string
	for _, j := range s.Jobs {
		out = append(out, j.ID)
	}
	return out
}

// Gate shows the policy only the jobs their queues may start: a queue's
// idle nominal quota is lent only within its lending limit, and within a
// queue higher priorities come first.
func TestGate(t *testing.T) {
	cases := []struct {
		name string
		tree []quota.Def
		jobs []policy.Job
		want []string
		held map[string]string
	}{
		{
			name: "borrows what the idle owner lends, no more",
			tree: []quota.Def{{Name: "a", Nominal: gpus(8), LendingLimit: gpus(2)}, {Name: "b", Nominal: gpus(0)}},
			jobs: []policy.Job{job("b1", "b", 50, 2, 2, nil), job("b22", "b", 50, 3, 3, nil)},
			want: []string{"b1"},
			held: map[string]string{"b22": "needs 3 GPUs; queue b at 0 of 0 GPUs; may borrow 2 more"},
		},
		{
			name: "borrowing limit",
			tree: []quota.Def{{Name: "a", Nominal: gpus(2), BorrowingLimit: gpus(1)}, {Name: "b", Nominal: gpus(6)}},
			jobs: []policy.Job{job("a1", "a", 50, 2, 2, policy.Allocation{"n1": 2}), job("a22", "a", 50, 2, 2, nil)},
			want: []string{"a1"},
			held: map[string]string{"a22": "needs 2 GPUs; queue a at 2 of 2 GPUs; may borrow 1 more"},
		},
		{
			name: "within nominal even when others borrow it all",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4)}, {Name: "b", Nominal: gpus(4)}},
			jobs: []policy.Job{job("a1", "a", 50, 8, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 4, 4, nil)},
			want: []string{"a1", "b1"},
		},
		{
			name: "higher priority first within a queue",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4), BorrowingLimit: gpus(0)}, {Name: "b", Nominal: gpus(4)}},
			jobs: []policy.Job{job("low", "a", 10, 2, 2, nil), job("high", "a", 90, 3, 3, nil)},
			want: []string{"high"},
			held: map[string]string{"low": "needs 2 GPUs; queue a at 0 of 4 GPUs; may borrow 0 more; 3 of the 4 it may take are held for higher-priority jobs of the queue"},
		},
		{
			name: "parent bound",
			tree: []quota.Def{{Name: "p", Nominal: gpus(4), BorrowingLimit: gpus(0)}, {Name: "c", Parent: "p", Nominal: gpus(2)},
				{Name: "d", Nominal: gpus(4)}},
			jobs: []policy.Job{job("c1", "c", 50, 4, 4, policy.Allocation{"n1": 4}), job("c2", "c", 50, 1, 1, nil)},
			want: []string{"c1"},
			held: map[string]string{"c2": "needs 1 GPU; queue c at 4 of 2 GPUs; may borrow 0 more; parent queue p at its limit of 4 GPUs"},
		},
		{
			name: "queue not configured",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4)}},
			jobs: []policy.Job{job("x", "gone", 50, 1, 1, nil)},
			held: map[string]string{"x": "queue gone is not configured: the job waits until it is"},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: tc.jobs}
			v := quota.NewLedger(tree(t, tc.tree...), s)
			must.Eq(t, tc.want, ids(v.Gate()))
			waits := v.Waits(&policy.Plan{})
			for id, want := range tc.held {
				must.Eq(t, want, waits[id].Reason, must.Sprint(id))
			}
		})
	}
}

// Reclaim takes GPUs back from borrowers for a queue below its nominal
// quota: elastic jobs shrink in place before anyone is stopped, lowest
// priority first; only jobs of borrowing queues are touched; nothing is
// taken when the job would still not fit.
func TestEnforce_Reclaim(t *testing.T) {
	ab := []quota.Def{{Name: "a", Nominal: gpus(4)}, {Name: "b", Nominal: gpus(4)}}
	cases := []struct {
		name string
		tree []quota.Def
		jobs []policy.Job
		want map[string]int // job -> GPUs after
	}{
		{
			name: "shrink the elastic borrower in place",
			tree: ab,
			jobs: []policy.Job{job("fixed", "a", 10, 2, 2, policy.Allocation{"n1": 2}), job("elastic", "a", 90, 2, 6, policy.Allocation{"n1": 6}),
				job("b1", "b", 50, 4, 4, nil)},
			want: map[string]int{"fixed": 2, "elastic": 2, "b1": 4},
		},
		{
			name: "stop lowest priority first when none can shrink",
			tree: ab,
			jobs: []policy.Job{job("hi", "a", 90, 4, 4, policy.Allocation{"n1": 4}), job("lo", "a", 10, 4, 4, policy.Allocation{"n1": 4}),
				job("b1", "b", 50, 4, 4, nil)},
			want: map[string]int{"hi": 4, "lo": 0, "b1": 4},
		},
		{
			name: "a queue within its nominal quota is not touched",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4)}, {Name: "b", Nominal: gpus(4)}, {Name: "c", Nominal: gpus(0)}},
			jobs: []policy.Job{job("a1", "a", 10, 4, 4, policy.Allocation{"n1": 4}), job("c1", "c", 90, 4, 4, policy.Allocation{"n1": 4}),
				job("b1", "b", 50, 4, 4, nil)},
			want: map[string]int{"a1": 4, "c1": 0, "b1": 4},
		},
		{
			name: "nothing taken for a job that would not fit",
			tree: []quota.Def{{Name: "a", Nominal: gpus(4)}, {Name: "b", Nominal: gpus(8)}},
			jobs: []policy.Job{job("a1", "a", 10, 2, 8, policy.Allocation{"n1": 8}), job("b1", "b", 50, 8, 8, nil)},
			want: map[string]int{"a1": 8, "b1": 0},
		},
		{
			name: "inside a parent: the sibling that borrows gives back",
			tree: []quota.Def{{Name: "p", Nominal: gpus(8), BorrowingLimit: gpus(0)}, {Name: "x", Parent: "p", Nominal: gpus(4)},
				{Name: "y", Parent: "p", Nominal: gpus(4)}, {Name: "z", Nominal: gpus(0)}},
			jobs: []policy.Job{job("x1", "x", 50, 1, 8, policy.Allocation{"n1": 8}), job("y1", "y", 50, 2, 2, nil)},
			want: map[string]int{"x1": 6, "y1": 2},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: tc.jobs}
			v := quota.NewLedger(tree(t, tc.tree...), s)
			v.Gate()
			// A policy that does nothing: the quota layer alone acts.
			plan, err := v.Enforce(&policy.Plan{Policy: "none"})
			must.NoError(t, err)
			must.NoError(t, policy.Validate(s, plan))
			for id, want := range tc.want {
				j := &s.Jobs[slicesIndex(s, id)]
				must.Eq(t, want, plan.Target(j).Total(), must.Sprint(id, " ", plan.Reasons[id]))
			}
		})
	}
}

func slicesIndex(s *policy.Snapshot, id string) int {
	for i := range s.Jobs {
		if s.Jobs[i].ID == id {
			return i
		}
	}
	return -1
}

// A policy's plan that takes a queue above its limit is trimmed: its
// grows first (a worker at a time), then its latest, lowest-priority
// starts.
func TestEnforce_Trim(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(4), BorrowingLimit: gpus(2)}, quota.Def{Name: "b", Nominal: gpus(10)})
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1", "n2"), Jobs: []policy.Job{
		job("run", "a", 50, 2, 6, policy.Allocation{"n1": 2}), job("new", "a", 50, 2, 2, nil), job("low", "a", 10, 2, 2, nil)}}
	v := quota.NewLedger(tr, s)
	v.Gate()
	plan, err := v.Enforce(&policy.Plan{Policy: "greedy", Allocations: map[string]policy.Allocation{
		"run": {"n1": 6}, "new": {"n2": 2}, "low": {"n2": 2}}})
	must.NoError(t, err)
	must.Eq(t, 2, plan.Target(&s.Jobs[0]).Total(), must.Sprint("the grow goes first"))
	must.Eq(t, 2, plan.Target(&s.Jobs[1]).Total())
	must.Eq(t, 2, plan.Target(&s.Jobs[2]).Total(), must.Sprint("6 = nominal 4 + borrowing 2 after the grow is taken back"))
	must.Eq(t, []string{"not grown: queue a would hold 7 GPUs, above its limit of 6 (nominal 4 + borrowing limit 2)"}, plan.Reasons["run"])
}

// GPUs held for a job outside the snapshot (a job moving between GPU
// models; its nodes reserve them) are its queue's: Gate, Enforce and
// Status count them there, and the cluster's GPUs still include them; a
// queue the tree lacks leaves them to outside work.
func TestNewLedger_Held(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(4), BorrowingLimit: gpus(0)}, quota.Def{Name: "b", Nominal: gpus(4)})
	n := nodes("n1")
	n[0].Reserved = 2 // held for the moving job
	s := &policy.Snapshot{Now: at(100), Nodes: n, Jobs: []policy.Job{job("a33", "a", 50, 3, 3, nil), job("a1", "a", 50, 2, 2, nil)}}
	v := quota.NewLedger(tr, s, quota.Held{Queue: "a", GPUs: policy.Allocation{"n1": 2}})
	must.Eq(t, []string{"a1"}, ids(v.Gate()), must.Sprint("a at 2 of 4 with the held GPUs: 2 more"))
	must.Eq(t, "needs 3 GPUs; queue a at 2 of 4 GPUs; may borrow 0 more", v.Waits(&policy.Plan{})["a33"].Reason)
	must.Eq(t, 2, v.Status()[0].GPUs[0].Used)
	// A plan beyond the limit with them is trimmed: 3 more would make 5.
	got, err := v.Enforce(&policy.Plan{Allocations: map[string]policy.Allocation{"a33": {"n1": 3}}})
	must.NoError(t, err)
	must.Zero(t, got.Allocations["a33"].Total())

	// A queue the tree lacks leaves them to outside work, as before.
	v = quota.NewLedger(tr, s, quota.Held{Queue: "gone", GPUs: policy.Allocation{"n1": 2}})
	must.Eq(t, 0, v.Status()[0].GPUs[0].Used)
	must.Eq(t, []string{"a33", "a1"}, ids(v.Gate()))

	// Their GPUs are the cluster's, not outside work: a queue may borrow
	// the rest of the node, all that is free.
	open := tree(t, quota.Def{Name: "a", Nominal: gpus(2)}, quota.Def{Name: "b", Nominal: gpus(0)})
	n[0].Reserved = 4
	s = &policy.Snapshot{Now: at(100), Nodes: n, Jobs: []policy.Job{job("a4", "a", 50, 4, 4, nil)}}
	v = quota.NewLedger(open, s, quota.Held{Queue: "a", GPUs: policy.Allocation{"n1": 4}})
	must.Eq(t, []string{"a4"}, ids(v.Gate()), must.Sprint(v.Waits(&policy.Plan{})["a4"].Reason))
	got, err = v.Enforce(&policy.Plan{Allocations: map[string]policy.Allocation{"a4": {"n1": 4}}})
	must.NoError(t, err)
	must.Eq(t, 4, got.Allocations["a4"].Total())
}

// Per-model quotas hold per model: a queue with A100s only waits for
// A100s even while H100s idle.
func TestGate_PerModel(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: quota.Amount{"A100": 4}, BorrowingLimit: gpus(0)},
		quota.Def{Name: "b", Nominal: quota.Amount{"H100": 8}, LendingLimit: gpus(0)})
	ns := []policy.Node{{ID: "n1", GPUModel: "A100", GPUs: 4}, {ID: "n2", GPUModel: "H100", GPUs: 8}}
	s := &policy.Snapshot{Now: at(100), Nodes: ns, Jobs: []policy.Job{
		job("a1", "a", 50, 4, 4, policy.Allocation{"n1": 4}), job("a2", "a", 50, 1, 1, nil)}}
	v := quota.NewLedger(tr, s)
	must.Eq(t, []string{"a1"}, ids(v.Gate()))
	must.Eq(t, "needs 1 GPU; queue a at 4 of 4 GPUs of A100; may borrow 0 more; queue a at 0 of 0 GPUs of H100; may borrow 0 more",
		v.Waits(&policy.Plan{})["a2"].Reason)
}

// CheckJob refuses at submission what could never run.
func TestCheckJob(t *testing.T) {
	tr := tree(t, quota.Def{Name: "ml"}, quota.Def{Name: "vision", Parent: "ml", Nominal: gpus(4), BorrowingLimit: gpus(2)},
		quota.Def{Name: "nlp", Parent: "ml", Nominal: gpus(4), LendingLimit: gpus(1)})
	cases := []struct {
		name, queue string
		min         int
		want        error
	}{
		{"fits", "vision", 6, nil},
		{"over its limit", "vision", 7, quota.ErrOverLimit},
		{"over what others lend", "nlp", 8, nil},
		{"unknown", "audio", 1, quota.ErrUnknownQueue},
		{"parent", "ml", 1, quota.ErrParentQueue},
		{"default missing", "", 1, quota.ErrUnknownQueue},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := job("j", tc.queue, 50, tc.min, tc.min, nil)
			err := tr.CheckJob(&j, nodes("n1", "n2"))
			if tc.want == nil {
				must.NoError(t, err)
				return
			}
			must.True(t, errors.Is(err, tc.want), must.Sprint(err))
		})
	}
	must.NoError(t, quota.Default().CheckJob(new(job("j", "", 50, 16, 16, nil)), nodes("n1", "n2")))
}

// A planner without queues refuses a submission naming a queue other
// than "default" (N3 of issue 28: on main any name was taken, and became
// a metric label), and holds every stored job in its one queue, whatever
// queue its jobspec names: a job stored before the rule is not stranded,
// and waits in the queue it names, with no place in a queue "default"
// beside its own (issue 28).
func TestDefault_HoldsEveryJob(t *testing.T) {
	tr := quota.Default()
	j := job("j", "research", 50, 4, 4, nil)
	err := tr.CheckJob(&j, nodes("n1"))
	must.ErrorIs(t, err, quota.ErrUnknownQueue)
	must.StrContains(t, err.Error(), `queue "research" does not exist: the planner configures no queues, so its one queue is "default"`)
	must.NoError(t, tr.CheckJob(new(job("d", quota.DefaultQueue, 50, 4, 4, nil)), nodes("n1")))
	must.True(t, tr.HoldsJobs("research"))
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: []policy.Job{j}}
	v := quota.NewLedger(tr, s)
	must.Eq(t, []string{"j"}, ids(v.Gate()))
	must.Eq(t, quota.Wait{Queue: "research"}, v.Waits(&policy.Plan{})["j"])
}

// The default tree shows the policy every queued job some node may run,
// and holds back, with the reason, one whose constraints no node allows
// (whether the queue's order is worked out or, as for most rounds, not).
func TestDefault_HoldsBackOnlyJobsNoNodeAllows(t *testing.T) {
	tr := quota.Default()
	ok1, ok2 := job("a", "", 50, 4, 4, nil), job("b", "x", 50, 8, 8, policy.Allocation{"n1": 8})
	ok3 := job("c", "", 70, 16, 16, nil)
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1", "n2"), Jobs: []policy.Job{ok1, ok2, ok3}}
	v := quota.NewLedger(tr, s)
	must.Eq(t, s, v.Gate()) // nothing held: the snapshot itself

	h100 := job("dd", "", 50, 1, 1, nil)
	h100.Constraints.GPUModel = "H100"
	s = &policy.Snapshot{Now: at(100), Nodes: nodes("n1", "n2"), Jobs: []policy.Job{ok1, ok2, ok3, h100}}
	v = quota.NewLedger(tr, s)
	must.Eq(t, []string{"a", "b", "c"}, ids(v.Gate()))
	must.StrContains(t, v.Waits(&policy.Plan{})["dd"].Reason, "needs 1 GPU;")
}

// Tree definitions that cannot hold are refused, each saying which queue
// and field.
func TestNew_Errors(t *testing.T) {
	cases := []struct {
		name string
		defs []quota.Def
		want quota.DefError
	}{
		{"cycle", []quota.Def{{Name: "a", Parent: "b"}, {Name: "b", Parent: "a"}}, quota.DefError{Queue: "a", Field: "parent", Msg: "the parents form a cycle (a -> b -> a)"}},
		{"unknown parent", []quota.Def{{Name: "a", Parent: "x"}}, quota.DefError{Queue: "a", Field: "parent", Msg: `no queue is named "x"`}},
		{"negative", []quota.Def{{Name: "a", Nominal: gpus(-1)}}, quota.DefError{Queue: "a", Field: "nominal", Msg: "-1 GPUs: give 0 to 1048576"}},
		{"duplicate", []quota.Def{{Name: "a"}, {Name: "a"}}, quota.DefError{Queue: "a", Msg: "defined twice"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := quota.New(tc.defs)
			var errs quota.DefErrors
			must.True(t, errors.As(err, &errs))
			must.Eq(t, tc.want, *errs[0])
		})
	}
}

// A running job whose queue is gone from the tree (the config changed)
// keeps its GPUs but is not grown, whatever the policy plans.
func TestEnforce_OrphanKeepsWhatItHolds(t *testing.T) {
	tr := tree(t, quota.Def{Name: "a", Nominal: gpus(8)})
	s := &policy.Snapshot{Now: at(100), Nodes: nodes("n1"), Jobs: []policy.Job{job("old", "gone", 50, 2, 8, policy.Allocation{"n1": 2})}}
	v := quota.NewLedger(tr, s)
	v.Gate()
	plan, err := v.Enforce(&policy.Plan{Policy: "greedy", Allocations: map[string]policy.Allocation{"old": {"n1": 8}}})
	must.NoError(t, err)
	must.Eq(t, 2, plan.Target(&s.Jobs[0]).Total())
}
