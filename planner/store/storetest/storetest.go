// Package storetest is the conformance suite of the planner's stores: the
// behaviour every store.Store must have, which the tests of each
// implementation run on stores of their own (Memory's in package store,
// Bolt's in boltstore, Consul's in consulstore, that one in the e2e tier
// on a Consul agent that internal/testlab starts), so that all of them
// answer to one set of checks and none drifts from the contract.
//
// It is a test kit: only tests import it.
package storetest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Harness opens stores of one implementation for the conformance suite.
type Harness struct {
	// Open returns an empty store, closed when the test ends.
	Open func(t *testing.T) store.Store
	// Reopen closes s and opens the same data again, as a restarted
	// planner would.
	Reopen func(t *testing.T, s store.Store) store.Store
	// Fence, for a store several planners share, makes s's planner the
	// leader and returns its term's fence and a func that ends the term
	// (as when another planner takes over). Nil for a store one planner
	// holds, which is the leader for good (see testFence).
	Fence func(t *testing.T, s store.Store) (f store.Fence, end func())
	// SyncedWrites says that each write syncs a file: the checks that
	// make many writes make fewer.
	SyncedWrites bool
}

// Run runs the behaviour every Store must have, and, where the stores
// that h opens list their active jobs without copies (store.SharedLister),
// what that promises too.
func Run(t *testing.T, h Harness) {
	cases := []struct {
		name string
		run  func(t *testing.T, h Harness)
	}{
		{"create then get", testCreateGet},
		{"create an existing ID", testCreateExists},
		{"get a missing job", testGetMissing},
		{"update", testUpdate},
		{"update a missing job", testUpdateMissing},
		{"update with a stale version", testUpdateStale},
		{"list is ordered by submission then ID", testListOrder},
		{"list an empty store", testListEmpty},
		{"list active: queued and running, ordered, kept up to date", testListActive},
		{"list by jobspec name", testListNamed},
		{"list a page: filters, order, cursor, kept up to date", testListPage},
		{"policy get and put", testPolicy},
		{"records survive close and reopen", testPersistence},
		{"racing updates: exactly one wins", testRacingUpdates},
		{"invalid IDs are refused", testInvalidIDs},
		{"returned records are copies", testCopies},
		{"calls after close fail", testClosed},
		{"idempotency keys: one job per key, kept across a reopen", testIdempotencyKeys},
		{"racing creates with one idempotency key: exactly one wins", testRacingKeys},
		{"concurrent creates: each stored, listed and paged", testConcurrentCreates},
		{"writes under a leadership term's fence", testFence},
		{"delete: finished jobs only, at their version, with their key", testDelete},
		{"shared list: the store's records, never changed", testSharedListIsNeverChanged},
		{"shared list: the active index is what a scan finds", testSharedIndexMatchesAScan},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, h) })
	}
}

// T0 is when the suite's jobs are submitted, give or take the seconds
// that order them.
var T0 = time.Date(2025, 3, 1, 9, 0, 0, 0, time.UTC)

// NewJob is a realistic record: nested spec, maps, history, pointers.
func NewJob(id string, submitted time.Time) *structs.Job {
	tier1 := 0.9
	return &structs.Job{
		ID: id,
		Spec: jobspec.Spec{
			Name:     "resnet50",
			Command:  "python3",
			Args:     []string{"train.py", "--epochs", "90"},
			Launcher: jobspec.LauncherHorovod,
			User:     "alice",
			Priority: 50,
			Env:      map[string]string{"NCCL_DEBUG": "WARN"},
			GPUs:     jobspec.GPUs{Min: 2, Max: 8, PerWorker: 1, Model: "NVIDIA A100-SXM4-40GB"},
			Target:   &jobspec.Target{Metric: "accuracy", Goal: 0.93, Tier1: &tier1, Within: 6 * time.Hour},
			Data:     []jobspec.Data{{Name: "imagenet", Prefer: map[string]string{"meta.datasets": "imagenet"}}},
			Range:    hcl.Range{Filename: "train.hcl", Start: hcl.Pos{Line: 1, Column: 1}, End: hcl.Pos{Line: 9, Column: 2, Byte: 120}},
		},
		Source:    "training \"resnet50\" {}\n",
		State:     structs.JobQueued,
		Submitted: submitted,
		Events:    []structs.Event{{Time: submitted, Type: "submitted", Message: "accepted"}},
	}
}

func testCreateGet(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	j := NewJob("resnet50-1", T0)
	must.NoError(t, s.CreateJob(ctx, j))
	must.EqOp(t, 1, j.Version)

	got, err := s.GetJob(ctx, j.ID)
	must.NoError(t, err)
	must.Eq(t, j, got)
}

func testCreateExists(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	must.NoError(t, s.CreateJob(ctx, NewJob("a", T0)))

	dup := NewJob("a", T0.Add(time.Hour))
	dup.Version = 7
	err := s.CreateJob(ctx, dup)
	must.ErrorIs(t, err, store.ErrExists)
	must.EqOp(t, 7, dup.Version) // untouched on failure

	got, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	must.Eq(t, T0, got.Submitted) // the first record stays
}

func testGetMissing(t *testing.T, h Harness) {
	s := h.Open(t)
	_, err := s.GetJob(context.Background(), "nope")
	must.ErrorIs(t, err, store.ErrNotFound)
}

func testUpdate(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	j := NewJob("a", T0)
	must.NoError(t, s.CreateJob(ctx, j))

	j.State = structs.JobRunning
	j.Started = T0.Add(time.Minute)
	j.Allocation = map[string]int{"node-1": 4}
	j.History = append(j.History, structs.GPUChange{Time: j.Started, GPUs: 4, Nodes: j.Allocation, Policy: "fifo"})
	must.NoError(t, s.UpdateJob(ctx, j))
	must.EqOp(t, 2, j.Version)

	j.AttainedGPUSeconds = 240
	must.NoError(t, s.UpdateJob(ctx, j))
	must.EqOp(t, 3, j.Version)

	got, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	must.Eq(t, j, got)
}

func testUpdateMissing(t *testing.T, h Harness) {
	s := h.Open(t)
	j := NewJob("ghost", T0)
	j.Version = 1
	err := s.UpdateJob(context.Background(), j)
	must.ErrorIs(t, err, store.ErrNotFound)
	must.EqOp(t, 1, j.Version)
}

func testUpdateStale(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	j := NewJob("a", T0)
	must.NoError(t, s.CreateJob(ctx, j))
	stale := *j // a second reader at version 1

	j.State = structs.JobRunning
	must.NoError(t, s.UpdateJob(ctx, j))

	cases := []struct {
		name    string
		version uint64
	}{
		{"behind", 1},
		{"ahead", 5},
		{"zero", 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := stale
			w.Version = tc.version
			w.State = structs.JobFailed
			err := s.UpdateJob(ctx, &w)
			must.ErrorIs(t, err, store.ErrConflict)
			must.EqOp(t, tc.version, w.Version)

			got, err := s.GetJob(ctx, "a")
			must.NoError(t, err)
			must.EqOp(t, structs.JobRunning, got.State)
			must.EqOp(t, 2, got.Version)
		})
	}
}

func testListOrder(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	// Created out of order; "b" and "c" were submitted at the same instant
	// and "z" first, so neither ID order nor creation order is the answer.
	for _, j := range []*structs.Job{
		NewJob("c", T0.Add(time.Second)),
		NewJob("a", T0.Add(2*time.Second)),
		NewJob("z", T0),
		NewJob("b", T0.Add(time.Second)),
	} {
		must.NoError(t, s.CreateJob(ctx, j))
	}
	jobs, err := s.ListJobs(ctx)
	must.NoError(t, err)
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
		must.EqOp(t, 1, j.Version)
	}
	must.Eq(t, []string{"z", "b", "c", "a"}, ids)
}

func testListEmpty(t *testing.T, h Harness) {
	s := h.Open(t)
	jobs, err := s.ListJobs(context.Background())
	must.NoError(t, err)
	must.SliceEmpty(t, jobs)
}

// The round reads only the active jobs: queued and running, in the queue's
// order, as every write leaves them (a job that ends drops out; one that
// is requeued is back).
func testListActive(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	jobs, err := s.ListActiveJobs(ctx)
	must.NoError(t, err)
	must.SliceEmpty(t, jobs)

	byState := map[string]structs.JobState{"q": structs.JobQueued, "r": structs.JobRunning,
		"c": structs.JobComplete, "f": structs.JobFailed, "s": structs.JobStopped}
	for i, id := range []string{"r", "c", "q", "f", "s"} {
		j := NewJob(id, T0.Add(time.Duration(5-i)*time.Second))
		j.State = byState[id]
		must.NoError(t, s.CreateJob(ctx, j))
	}
	ids := func() []string {
		t.Helper()
		jobs, err := s.ListActiveJobs(ctx)
		must.NoError(t, err)
		var out []string
		for _, j := range jobs {
			must.True(t, j.State == structs.JobQueued || j.State == structs.JobRunning)
			out = append(out, j.ID)
		}
		return out
	}
	must.Eq(t, []string{"q", "r"}, ids()) // q was submitted first

	steps := []struct {
		name  string
		id    string
		state structs.JobState
		want  []string
	}{
		{"the running job ends", "r", structs.JobComplete, []string{"q"}},
		{"the queued job starts", "q", structs.JobRunning, []string{"q"}},
		{"a stopped job cannot come back, but a record may be rewritten", "s", structs.JobQueued, []string{"s", "q"}},
		{"and leave again", "s", structs.JobFailed, []string{"q"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			j, err := s.GetJob(ctx, st.id)
			must.NoError(t, err)
			j.State = st.state
			must.NoError(t, s.UpdateJob(ctx, j))
			must.Eq(t, st.want, ids())
		})
	}

	// What it lists is the record as stored.
	jobs, err = s.ListActiveJobs(ctx)
	must.NoError(t, err)
	got, err := s.GetJob(ctx, "q")
	must.NoError(t, err)
	must.Eq(t, []*structs.Job{got}, jobs)
}

// Admission reads the earlier jobs of one jobspec name, in any state.
func testListNamed(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	mk := func(id, name string, sec int, state structs.JobState) {
		j := NewJob(id, T0.Add(time.Duration(sec)*time.Second))
		j.Spec.Name, j.State = name, state
		must.NoError(t, s.CreateJob(ctx, j))
	}
	mk("bert-2", "bert", 2, structs.JobComplete)
	mk("gpt", "gpt", 0, structs.JobQueued)
	mk("bert-1", "bert", 1, structs.JobRunning)
	mk("bert-3", "bert-large", 3, structs.JobQueued)

	cases := []struct {
		name string
		want []string
	}{
		{"bert", []string{"bert-1", "bert-2"}},
		{"gpt", []string{"gpt"}},
		{"bert-large", []string{"bert-3"}},
		{"nobody", nil},
		{"", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := s.ListJobsNamed(ctx, tc.name)
			must.NoError(t, err)
			var ids []string
			for _, j := range jobs {
				ids = append(ids, j.ID)
			}
			must.Eq(t, tc.want, ids)
		})
	}
	s = h.Reopen(t, s)
	jobs, err := s.ListJobsNamed(ctx, "bert")
	must.NoError(t, err)
	must.Len(t, 2, jobs)
	must.EqOp(t, structs.JobComplete, jobs[1].State)
}

// A page of jobs (GET /v1/jobs): those a query selects, in the queue's
// order or its reverse, from a key on, with how many it selects in all,
// how many come before the page and where the next page starts; every
// write keeps it true, a reopen too, and its records are the stored ones.
func testListPage(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	// j3 and j4 were submitted at the same instant: the ID orders them.
	at := func(i int) time.Time { return T0.Add(time.Duration(min(i, max(i-1, 3))) * time.Second) }
	for _, i := range []int{5, 0, 7, 3, 1, 6, 2, 4} { // stored out of order
		j := NewJob(fmt.Sprintf("j%d", i), at(i))
		j.Spec.Name = []string{"resnet50", "bert"}[i%2]
		j.Spec.User = map[bool]string{true: "bob", false: "alice"}[i%3 == 0]
		j.Spec.Queue = map[bool]string{true: "", false: "vision"}[i < 4]
		switch i {
		case 1:
			j.State = structs.JobRunning
			j.History = []structs.GPUChange{{Time: T0.Add(10 * time.Second), GPUs: 4}}
		case 2:
			j.State = structs.JobComplete
			j.History = []structs.GPUChange{{Time: T0.Add(2 * time.Second), GPUs: 2}, {Time: T0.Add(4 * time.Second), GPUs: 0}}
		}
		must.NoError(t, s.CreateJob(ctx, j))
	}
	key := func(i int) *structs.JobKey { return &structs.JobKey{Submitted: at(i), ID: fmt.Sprintf("j%d", i)} }
	type want struct {
		ids           []string
		total, before int
		next          *structs.JobKey
	}
	check := func(t *testing.T, q structs.JobQuery, w want) {
		t.Helper()
		p, err := s.ListJobsPage(ctx, q)
		must.NoError(t, err)
		var ids []string
		for _, j := range p.Jobs {
			ids = append(ids, j.ID)
			stored, err := s.GetJob(ctx, j.ID)
			must.NoError(t, err)
			must.Eq(t, stored, j)
		}
		must.Eq(t, w.ids, ids)
		must.EqOp(t, w.total, p.Total)
		must.EqOp(t, w.before, p.Before)
		must.Eq(t, w.next, p.Next)
	}
	all := []string{"j0", "j1", "j2", "j3", "j4", "j5", "j6", "j7"}
	cases := []struct {
		name string
		q    structs.JobQuery
		want want
	}{
		{"every job", structs.JobQuery{}, want{all, 8, 0, nil}},
		{"a first page", structs.JobQuery{Limit: 3}, want{all[:3], 8, 0, key(3)}},
		{"a middle page", structs.JobQuery{From: key(3), Limit: 3}, want{all[3:6], 8, 3, key(6)}},
		{"the last page", structs.JobQuery{From: key(6), Limit: 3}, want{all[6:], 8, 6, nil}},
		{"from a key no job has", structs.JobQuery{From: &structs.JobKey{Submitted: at(5).Add(time.Millisecond)}, Limit: 3}, want{all[6:], 8, 6, nil}},
		{"newest first", structs.JobQuery{Reverse: true, Limit: 3}, want{[]string{"j7", "j6", "j5"}, 8, 0, key(4)}},
		{"newest first, from a key", structs.JobQuery{Reverse: true, From: key(4)}, want{[]string{"j4", "j3", "j2", "j1", "j0"}, 8, 3, nil}},
		{"queued", structs.JobQuery{States: []structs.JobState{structs.JobQueued}}, want{[]string{"j0", "j3", "j4", "j5", "j6", "j7"}, 6, 0, nil}},
		{"queued, a middle page", structs.JobQuery{States: []structs.JobState{structs.JobQueued}, From: key(2), Limit: 2},
			want{[]string{"j3", "j4"}, 6, 1, key(5)}},
		{"queued, newest first", structs.JobQuery{States: []structs.JobState{structs.JobQueued}, Reverse: true, From: key(4), Limit: 2},
			want{[]string{"j4", "j3"}, 6, 3, key(0)}},
		{"two states", structs.JobQuery{States: []structs.JobState{structs.JobRunning, structs.JobComplete}}, want{[]string{"j1", "j2"}, 2, 0, nil}},
		{"no queue named", structs.JobQuery{Queues: []string{""}}, want{all[:4], 4, 0, nil}},
		{"a queue", structs.JobQuery{Queues: []string{"vision"}}, want{all[4:], 4, 0, nil}},
		{"a user", structs.JobQuery{User: "bob"}, want{[]string{"j0", "j3", "j6"}, 3, 0, nil}},
		{"a name prefix", structs.JobQuery{Prefix: "be"}, want{[]string{"j1", "j3", "j5", "j7"}, 4, 0, nil}},
		{"an ID prefix", structs.JobQuery{Prefix: "j5"}, want{[]string{"j5"}, 1, 0, nil}},
		{"held GPUs since", structs.JobQuery{HeldSince: T0.Add(5 * time.Second)}, want{[]string{"j1"}, 1, 0, nil}},
		{"held GPUs since, earlier", structs.JobQuery{HeldSince: T0.Add(3 * time.Second)}, want{[]string{"j1", "j2"}, 2, 0, nil}},
		{"filters together", structs.JobQuery{User: "alice", Queues: []string{"vision"}, States: []structs.JobState{structs.JobQueued}},
			want{[]string{"j4", "j5", "j7"}, 3, 0, nil}},
		{"none selected", structs.JobQuery{User: "carol", Limit: 3}, want{nil, 0, 0, nil}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { check(t, tc.q, tc.want) })
	}

	t.Run("writes keep it true", func(t *testing.T) {
		j, err := s.GetJob(ctx, "j0")
		must.NoError(t, err)
		j.State = structs.JobRunning
		must.NoError(t, s.UpdateJob(ctx, j))
		must.NoError(t, s.CreateJob(ctx, NewJob("j8", at(8))))
		queued := structs.JobQuery{States: []structs.JobState{structs.JobQueued}, Limit: 2}
		check(t, queued, want{[]string{"j3", "j4"}, 6, 0, key(5)})
		queued.From = key(7)
		check(t, queued, want{[]string{"j7", "j8"}, 6, 4, nil})
		s = h.Reopen(t, s)
		check(t, queued, want{[]string{"j7", "j8"}, 6, 4, nil})
	})
}

// Submissions come at once (Bolt may commit them together): each one
// acknowledged is stored, among the active jobs a round lists, and in the
// pages; one refused is in none.
func testConcurrentCreates(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	_, err := s.ListActiveJobs(ctx) // a round has listed them: the stores keep them
	must.NoError(t, err)
	must.NoError(t, s.CreateJob(ctx, NewJob("taken", T0)))
	const n = 40
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			id := fmt.Sprintf("j-%02d", i)
			if i%10 == 9 {
				id = "taken"
			}
			errs[i] = s.CreateJob(ctx, NewJob(id, T0.Add(time.Duration(i+1)*time.Second)))
		}()
	}
	wg.Wait()
	want := []string{"taken"}
	for i, err := range errs {
		if i%10 == 9 {
			must.ErrorIs(t, err, store.ErrExists)
			continue
		}
		must.NoError(t, err)
		want = append(want, fmt.Sprintf("j-%02d", i))
	}
	active, err := s.ListActiveJobs(ctx)
	must.NoError(t, err)
	must.Eq(t, want, JobIDs(active))
	p, err := s.ListJobsPage(ctx, structs.JobQuery{})
	must.NoError(t, err)
	must.Eq(t, want, JobIDs(p.Jobs))
	taken, err := s.GetJob(ctx, "taken")
	must.NoError(t, err)
	must.Eq(t, T0, taken.Submitted, must.Sprint("the first record of an ID stays"))
}

func testPolicy(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	_, err := s.GetPolicy(ctx)
	must.ErrorIs(t, err, store.ErrNotFound)

	steps := []struct {
		name string
		p    structs.PolicyState
	}{
		{"first", structs.PolicyState{Name: "fifo", Changed: T0}},
		{"replaced", structs.PolicyState{Name: "elastic-fifo", Config: map[string]string{"grow": "true"}, Changed: T0.Add(time.Hour)}},
		{"with an error", structs.PolicyState{Name: "elastic-fifo", Changed: T0.Add(2 * time.Hour), LastError: "plugin crashed"}},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			must.NoError(t, s.PutPolicy(ctx, &st.p))
			got, err := s.GetPolicy(ctx)
			must.NoError(t, err)
			must.Eq(t, &st.p, got)
		})
	}
}

func testPersistence(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	a, b := NewJob("a", T0), NewJob("b", T0.Add(time.Second))
	must.NoError(t, s.CreateJob(ctx, a))
	must.NoError(t, s.CreateJob(ctx, b))
	b.State = structs.JobComplete
	exit := 0
	b.ExitCode = &exit
	must.NoError(t, s.UpdateJob(ctx, b))
	p := &structs.PolicyState{Name: "round-robin", Changed: T0}
	must.NoError(t, s.PutPolicy(ctx, p))

	s = h.Reopen(t, s)
	jobs, err := s.ListJobs(ctx)
	must.NoError(t, err)
	must.Eq(t, []*structs.Job{a, b}, jobs)
	gotP, err := s.GetPolicy(ctx)
	must.NoError(t, err)
	must.Eq(t, p, gotP)

	// Versions carry on where they were.
	b.State = structs.JobStopped
	must.NoError(t, s.UpdateJob(ctx, b))
	must.EqOp(t, 3, b.Version)
}

func testRacingUpdates(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	cases := []struct {
		name    string
		writers int
	}{
		{"two writers", 2},
		{"eight writers", 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 10 {
				j := NewJob(fmt.Sprintf("race-%d-%d", tc.writers, round), T0)
				must.NoError(t, s.CreateJob(ctx, j))

				errs := make([]error, tc.writers)
				var start, wg sync.WaitGroup
				start.Add(1)
				for w := range tc.writers {
					mine := *j // every writer read version 1
					mine.NomadJobID = fmt.Sprintf("writer-%d", w)
					wg.Go(func() {
						start.Wait()
						errs[w] = s.UpdateJob(ctx, &mine)
					})
				}
				start.Done()
				wg.Wait()

				winners, winner := 0, -1
				for w, err := range errs {
					if err == nil {
						winners++
						winner = w
						continue
					}
					must.ErrorIs(t, err, store.ErrConflict)
				}
				must.EqOp(t, 1, winners)
				got, err := s.GetJob(ctx, j.ID)
				must.NoError(t, err)
				must.EqOp(t, 2, got.Version)
				must.EqOp(t, fmt.Sprintf("writer-%d", winner), got.NomadJobID)
			}
		})
	}
}

func testInvalidIDs(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	for _, id := range []string{"", "a/b", "/"} {
		t.Run(fmt.Sprintf("%q", id), func(t *testing.T) {
			err := s.CreateJob(ctx, NewJob(id, T0))
			must.Error(t, err)
			must.False(t, errors.Is(err, store.ErrExists))
			_, err = s.GetJob(ctx, id)
			must.Error(t, err)
			must.False(t, errors.Is(err, store.ErrNotFound))
		})
	}
}

func testCopies(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	j := NewJob("a", T0)
	must.NoError(t, s.CreateJob(ctx, j))
	got, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	got.Spec.Env["NCCL_DEBUG"] = "INFO"
	got.Spec.Args[0] = "evil.py"

	again, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	must.Eq(t, j, again)
}

func testClosed(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	must.NoError(t, s.Close())
	must.Error(t, s.CreateJob(ctx, NewJob("a", T0)))
	_, err := s.GetJob(ctx, "a")
	must.Error(t, err)
	_, err = s.ListJobs(ctx)
	must.Error(t, err)
	_, err = s.ListActiveJobs(ctx)
	must.Error(t, err)
	_, err = s.ListJobsNamed(ctx, "resnet50")
	must.Error(t, err)
	_, err = s.ListJobsPage(ctx, structs.JobQuery{})
	must.Error(t, err)
	must.Error(t, s.PutPolicy(ctx, &structs.PolicyState{Name: "fifo"}))
	must.Error(t, s.DeleteJob(ctx, "a", 1))
}

// Row 14 of issue 13 (a client that retries a submission made two jobs):
// the key is stored with the job in the same write, a second job with it
// is refused, and the key finds the job again after a restart.
func testIdempotencyKeys(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	_, err := s.JobByIdempotencyKey(ctx, "retry-1")
	must.ErrorIs(t, err, store.ErrNotFound)

	a := NewJob("a", T0)
	a.Idempotency = &structs.Idempotency{Key: "retry-1", Digest: "d1"}
	must.NoError(t, s.CreateJob(ctx, a))
	got, err := s.JobByIdempotencyKey(ctx, "retry-1")
	must.NoError(t, err)
	must.Eq(t, a, got)

	b := NewJob("b", T0)
	b.Idempotency = &structs.Idempotency{Key: "retry-1", Digest: "d2"}
	must.ErrorIs(t, s.CreateJob(ctx, b), store.ErrKeyExists)
	_, err = s.GetJob(ctx, "b")
	must.ErrorIs(t, err, store.ErrNotFound, must.Sprint("a refused create stores nothing"))

	// A job without a key, and an ID taken with a new key: neither claims
	// anything.
	must.NoError(t, s.CreateJob(ctx, NewJob("c", T0)))
	dup := NewJob("a", T0)
	dup.Idempotency = &structs.Idempotency{Key: "retry-2"}
	must.ErrorIs(t, s.CreateJob(ctx, dup), store.ErrExists)
	_, err = s.JobByIdempotencyKey(ctx, "retry-2")
	must.ErrorIs(t, err, store.ErrNotFound)

	for _, bad := range []string{"", strings.Repeat("k", store.MaxIdempotencyKeyLen+1)} {
		j := NewJob("bad", T0)
		j.Idempotency = &structs.Idempotency{Key: bad}
		must.Error(t, s.CreateJob(ctx, j))
	}

	s = h.Reopen(t, s)
	got, err = s.JobByIdempotencyKey(ctx, "retry-1")
	must.NoError(t, err)
	must.Eq(t, a.ID, got.ID)
	must.Eq(t, "d1", got.Idempotency.Digest)
}

func testRacingKeys(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	for round := range 5 {
		const writers = 4
		key := fmt.Sprintf("race-key-%d", round)
		errs := make([]error, writers)
		var start, wg sync.WaitGroup
		start.Add(1)
		for w := range writers {
			j := NewJob(fmt.Sprintf("k%d-%d", round, w), T0)
			j.Idempotency = &structs.Idempotency{Key: key}
			wg.Go(func() {
				start.Wait()
				errs[w] = s.CreateJob(ctx, j)
			})
		}
		start.Done()
		wg.Wait()
		winners := 0
		for _, err := range errs {
			if err == nil {
				winners++
				continue
			}
			must.ErrorIs(t, err, store.ErrKeyExists)
		}
		must.EqOp(t, 1, winners)
		jobs, err := s.ListJobs(ctx)
		must.NoError(t, err)
		must.Len(t, round+1, jobs)
	}
}

// DeleteJob (the retention of finished jobs, issue 28 N3) deletes a
// finished job at its version, with its Idempotency key and from every
// listing, for good; it never deletes a queued or running job, nor one
// written since it was read.
func testDelete(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	a := NewJob("a", T0)
	a.Idempotency = &structs.Idempotency{Key: "retry-a", Digest: "d"}
	must.NoError(t, s.CreateJob(ctx, a))
	must.NoError(t, s.CreateJob(ctx, NewJob("b", T0.Add(time.Second))))

	must.ErrorIs(t, s.DeleteJob(ctx, "a", a.Version), store.ErrNotFinished)
	a.State = structs.JobRunning
	must.NoError(t, s.UpdateJob(ctx, a))
	must.ErrorIs(t, s.DeleteJob(ctx, "a", a.Version), store.ErrNotFinished)
	a.State, a.Finished = structs.JobComplete, T0.Add(time.Hour)
	must.NoError(t, s.UpdateJob(ctx, a))
	must.ErrorIs(t, s.DeleteJob(ctx, "a", a.Version-1), store.ErrConflict)
	got, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	must.Eq(t, a, got, must.Sprint("a refused delete deletes nothing"))

	must.NoError(t, s.DeleteJob(ctx, "a", a.Version))
	_, err = s.GetJob(ctx, "a")
	must.ErrorIs(t, err, store.ErrNotFound)
	must.ErrorIs(t, s.DeleteJob(ctx, "a", a.Version), store.ErrNotFound)
	_, err = s.JobByIdempotencyKey(ctx, "retry-a")
	must.ErrorIs(t, err, store.ErrNotFound)
	for _, list := range []func(context.Context) ([]*structs.Job, error){
		s.ListJobs, s.ListActiveJobs, func(ctx context.Context) ([]*structs.Job, error) { return s.ListJobsNamed(ctx, "resnet50") },
		func(ctx context.Context) ([]*structs.Job, error) {
			p, err := s.ListJobsPage(ctx, structs.JobQuery{})
			if err != nil {
				return nil, err
			}
			must.Eq(t, 1, p.Total)
			return p.Jobs, nil
		},
	} {
		jobs, err := list(ctx)
		must.NoError(t, err)
		must.Len(t, 1, jobs)
		must.Eq(t, "b", jobs[0].ID, must.Sprint("the queued job stays"))
	}
	must.Error(t, s.DeleteJob(ctx, "x/y", 1))

	// The key is free again; the deletion lasts across a reopen.
	c := NewJob("c", T0)
	c.Idempotency = &structs.Idempotency{Key: "retry-a"}
	must.NoError(t, s.CreateJob(ctx, c))
	s = h.Reopen(t, s)
	_, err = s.GetJob(ctx, "a")
	must.ErrorIs(t, err, store.ErrNotFound)
	got, err = s.JobByIdempotencyKey(ctx, "retry-a")
	must.NoError(t, err)
	must.Eq(t, "c", got.ID)
}

// Closed says whether ch is closed: for a Leadership's lost channel,
// whether the term has ended.
func Closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
