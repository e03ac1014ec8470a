package planner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// memStore is the in-memory store (store.Memory, which passes the store
// conformance suite) with one thing for tests: conflicts makes that many
// next UpdateJob calls lose a race, as another writer of the same record
// bumps its stored version first (through the store itself).
type memStore struct {
	*store.Memory
	mu        sync.Mutex
	conflicts int
	// refuse, when set, fails each UpdateJob of a record it returns an
	// error for (the store down, the leadership lost).
	refuse func(j *structs.Job) error
}

func newMemStore() *memStore { return &memStore{Memory: store.NewMemory()} }

func (s *memStore) UpdateJob(ctx context.Context, j *structs.Job) error {
	s.mu.Lock()
	race := s.conflicts > 0
	if race {
		s.conflicts--
	}
	refuse := s.refuse
	s.mu.Unlock()
	if refuse != nil {
		if err := refuse(j); err != nil {
			return err
		}
	}
	if race {
		other, err := s.GetJob(ctx, j.ID)
		if err != nil {
			return err
		}
		if err := s.Memory.UpdateJob(ctx, other); err != nil {
			return err
		}
	}
	return s.Memory.UpdateJob(ctx, j)
}

// failedStop is one way a stop that the planner records before it stops
// the run can fail: fail sets it up for job j; err is in the round's error.
type failedStop struct {
	name, err string
	fail      func(st *memStore, exec *fakeActuator, j *structs.Job)
}

// failedStops: the stop's record is refused (the store down; recorded
// tells it from the job's other writes, and recordErr is the round's
// error), or the actuator's stop fails.
func failedStops(recorded func(*structs.Job) bool, recordErr string) []failedStop {
	return []failedStop{
		{"the record fails", recordErr, func(st *memStore, _ *fakeActuator, stopped *structs.Job) {
			st.refuse = func(j *structs.Job) error {
				if j.ID == stopped.ID && recorded(j) {
					return errors.New("store down")
				}
				return nil
			}
		}},
		{"the stop fails", "nomad said no", func(_ *memStore, exec *fakeActuator, stopped *structs.Job) {
			exec.failTimes = map[string]int{stopped.Spec.Name: 2} // and its retry
		}},
	}
}

type staticCluster []policy.Node

func (c staticCluster) Nodes(context.Context) ([]policy.Node, error) { return slices.Clone(c), nil }

// fakeActuator records what it was asked to do; fail makes the next Apply
// of a job fail, done marks a job's launcher as exited.
type fakeActuator struct {
	mu      sync.Mutex
	applied []string // "job:total"
	fail    map[string]bool
	done    map[string]int
	// unplaced is each running job's Outcome.Unplaced, by name, and
	// unplacedGPUs its Outcome.UnplacedGPUs.
	unplaced     map[string]string
	unplacedGPUs map[string]map[string]int
	// infra is an ended job's Outcome.Infrastructure, by name.
	infra map[string]string
	// onApply, when set, runs at the start of every Apply (unlocked), and
	// onTarget after it, told the target too.
	onApply  func(j *structs.Job)
	onTarget func(j *structs.Job, target policy.Allocation)
	// ending, by name: a start fails with ErrRunEnding, naming this
	// launcher.
	ending map[string]string
	// failTimes, by name: the next n Applies of the job fail.
	failTimes map[string]int
	// failErr is what a failure returns (nil: "nomad said no").
	failErr error
	// runs is what Runs lists (RunLister), by job ID.
	runs []string
}

func (e *fakeActuator) Runs(context.Context) ([]string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.runs), nil
}

func (e *fakeActuator) Apply(_ context.Context, j *structs.Job, target policy.Allocation) error {
	if e.onApply != nil {
		e.onApply(j)
	}
	if e.onTarget != nil {
		e.onTarget(j, target)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail[j.Spec.Name] {
		delete(e.fail, j.Spec.Name)
		if e.failErr != nil {
			return e.failErr
		}
		return errors.New("nomad said no")
	}
	if e.failTimes[j.Spec.Name] > 0 {
		e.failTimes[j.Spec.Name]--
		return errors.New("nomad said no")
	}
	if l, ok := e.ending[j.Spec.Name]; ok && target.Total() > 0 {
		return fmt.Errorf("%w (%s)", ErrRunEnding, l)
	}
	e.applied = append(e.applied, j.Spec.Name+":"+strconv.Itoa(target.Total()))
	return nil
}

func (e *fakeActuator) Outcome(_ context.Context, j *structs.Job) (Outcome, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if code, ok := e.done[j.Spec.Name]; ok {
		return Outcome{Done: true, ExitCode: code, Message: "launcher exited", Infrastructure: e.infra[j.Spec.Name]}, nil
	}
	return Outcome{Unplaced: e.unplaced[j.Spec.Name], UnplacedGPUs: e.unplacedGPUs[j.Spec.Name]}, nil
}

func (e *fakeActuator) take() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := e.applied
	e.applied = nil
	return out
}

func spec(t testing.TB, name string, min, max int) *jobspec.Spec {
	t.Helper()
	gpus := "gpus {\n min = " + strconv.Itoa(min) + "\n max = " + strconv.Itoa(max) + "\n}\n"
	s, diags := jobspec.Parse([]byte("training \""+name+"\" {\n command = \"python3\"\n"+gpus+"}\n"), name+".hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return s
}

func newPlanner(t *testing.T, policyName string, nodes ...policy.Node) (*Planner, *memStore, *fakeActuator, *time.Time) {
	t.Helper()
	logger := hclog.NewNullLogger()
	host, err := NewPolicyHost(host.Policies{Registry: host.NewRegistry(t.TempDir(), nil)}, logger, policyName, nil, 5*time.Second)
	must.NoError(t, err)
	t.Cleanup(host.Close)
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	store, exec := newMemStore(), &fakeActuator{fail: map[string]bool{}, done: map[string]int{}}
	p := (&Planner{Store: store, Cluster: staticCluster(nodes), Actuator: exec, Policies: host, Logger: logger}).
		With(WithClock(func() time.Time { return now }))
	return p, store, exec, &now
}

func node(id string, gpus int) policy.Node {
	return policy.Node{ID: id, Name: id, GPUModel: "A100", GPUMemoryMiB: 40960, GPUs: gpus}
}

func submit(t *testing.T, p *Planner, now *time.Time, s *jobspec.Spec) *structs.Job {
	t.Helper()
	*now = now.Add(time.Second) // distinct submission times keep FIFO order explicit
	j, _, err := p.Submit(context.Background(), s, "", nil)
	must.NoError(t, err)
	return j
}

func state(t *testing.T, st *memStore, id string) *structs.Job {
	t.Helper()
	j, err := st.GetJob(context.Background(), id)
	must.NoError(t, err)
	return j
}

// FIFO starts jobs in submission order while they fit; the next one waits.
// Switching to Elastic FIFO grows the running jobs into the idle GPUs
// without stopping them, and each job's history says who gave what.
func TestRound_FIFOThenElasticFIFO(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	a := submit(t, p, now, spec(t, "a", 2, 2))
	b := submit(t, p, now, spec(t, "b", 2, 4))
	c := submit(t, p, now, spec(t, "c", 8, 8))

	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:2", "b:4"}, exec.take())
	must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
	must.Eq(t, 4, state(t, st, b.ID).GPUs())
	must.Eq(t, structs.JobQueued, state(t, st, c.ID).State)

	_, err := p.SetPolicy(ctx, "elastic-fifo", nil)
	must.NoError(t, err)
	must.NoError(t, p.Round(ctx))
	// c still does not fit at its min (8) without shrinking below mins;
	// a is fixed at 2, b is at its max: nothing to grow, nothing stopped.
	for _, call := range exec.take() {
		must.False(t, strings.HasSuffix(call, ":0"), must.Sprintf("a running job was stopped: %s", call))
	}

	// When a ends, its GPUs go to the queue in the same round.
	exec.done["a"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	ja := state(t, st, a.ID)
	must.Eq(t, structs.JobComplete, ja.State)
	must.Eq(t, 0, *ja.ExitCode)
	must.Eq(t, 2*60.0, ja.AttainedGPUSeconds, must.Sprint("2 GPUs for the 60s it ran"))
	jb := state(t, st, b.ID)
	must.Eq(t, "fifo", jb.History[0].Policy)
	must.Eq(t, 4, jb.History[0].GPUs)
}

// A round's shrinks drain at once (ShrinksAtOnce): one whose drain cannot
// finish holds neither the others nor the grows and starts behind them,
// which still go after every shrink has ended, and the records come in
// the plan's order. One after another below 2 (the simulator).
func TestRound_ShrinksAtOnce(t *testing.T) {
	for _, atOnce := range []int{0, 3} {
		t.Run(strconv.Itoa(atOnce), func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "elastic-fifo", node("n1", 8))
			p.ShrinksAtOnce = atOnce
			a := submit(t, p, now, spec(t, "a", 1, 4))
			b := submit(t, p, now, spec(t, "b", 1, 4))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a:4", "b:4"}, exec.take())

			var mu sync.Mutex
			inFlight, most := 0, 0
			var order []string
			both := make(chan struct{})
			exec.onTarget = func(j *structs.Job, target policy.Allocation) {
				mu.Lock()
				order = append(order, j.Spec.Name)
				if target.Total() >= j.GPUs() {
					if inFlight > 0 {
						t.Errorf("%s grew while a shrink was in flight", j.Spec.Name)
					}
					mu.Unlock()
					return
				}
				inFlight++
				most = max(most, inFlight)
				if inFlight == 2 {
					close(both)
				}
				mu.Unlock()
				if atOnce >= 2 {
					// Each shrink waits for the other, as drains
					// that take long would: one after another,
					// this round would never end.
					select {
					case <-both:
					case <-time.After(30 * time.Second):
						t.Error("the shrinks did not run at once")
					}
				}
				mu.Lock()
				inFlight--
				mu.Unlock()
			}
			c := submit(t, p, now, spec(t, "c", 6, 6))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, 1, state(t, st, a.ID).GPUs())
			must.Eq(t, 1, state(t, st, b.ID).GPUs())
			must.Eq(t, 6, state(t, st, c.ID).GPUs())
			calls := exec.take()
			must.SliceContainsAll(t, []string{"a:1", "b:1", "c:6"}, calls)
			must.Eq(t, "c:6", calls[2], must.Sprint("the start after both shrinks"))
			must.Eq(t, "c", order[2])
			must.Eq(t, max(1, min(atOnce, 2)), most)
		})
	}
}

// A change the actuator gets no answer for in time (Nomad frozen) holds
// the rest of the round's changes for the next round, each of which would
// wait as long; the next round carries them out.
func TestRound_UnansweredChangeHoldsTheRest(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	a := submit(t, p, now, spec(t, "a", 2, 2))
	b := submit(t, p, now, spec(t, "b", 2, 2))
	c := submit(t, p, now, spec(t, "c", 2, 2))
	exec.fail["a"] = true
	exec.failErr = fmt.Errorf("failed to register nomad job train-a: %w", context.DeadlineExceeded)
	err := p.Round(ctx)
	must.ErrorIs(t, err, context.DeadlineExceeded)
	must.ErrorContains(t, err, "start of job "+b.ID+" waits for the next round: a change before it got no answer in time")
	must.ErrorContains(t, err, "start of job "+c.ID+" waits for the next round")
	must.SliceEmpty(t, exec.take(), must.Sprint("b and c were tried after a got no answer"))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:2", "b:2", "c:2"}, exec.take())
	for _, j := range []*structs.Job{a, b, c} {
		must.Eq(t, structs.JobRunning, state(t, st, j.ID).State)
	}
}

// A change Nomad refuses is not recorded; the next round tries again.
func TestRound_ExecutorFailureRetried(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	a := submit(t, p, now, spec(t, "a", 2, 2))
	exec.fail["a"] = true
	must.ErrorContains(t, p.Round(ctx), "nomad said no")
	must.Eq(t, structs.JobQueued, state(t, st, a.ID).State)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
	must.Eq(t, []string{"a:2"}, exec.take())
}

// The actuator's NomadRunIndex of a start is stored with the record, also
// when the write is retried after a conflict (Outcome tells this run's
// launcher from an earlier run's by it).
func TestRound_StartStoresRunIndex(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	exec.onApply = func(j *structs.Job) { j.NomadRunIndex = 42 }
	a := submit(t, p, now, spec(t, "a", 2, 2))
	st.conflicts = 1
	must.NoError(t, p.Round(ctx))
	must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
	must.Eq(t, 42, state(t, st, a.ID).NomadRunIndex)
}

// A job larger than the cluster is refused at submission; one that fits is
// queued; nothing already queued is lost by a refusal.
func TestSubmit_RefusesWhatCanNeverRun(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8), node("n2", 4))
	ok := submit(t, p, now, spec(t, "ok", 12, 12))
	_, _, err := p.Submit(ctx, spec(t, "huge", 13, 16), "", nil)
	var ie *structs.InputError
	must.True(t, errors.As(err, &ie), must.Sprint(err))
	must.StrContains(t, err.Error(), "needs at least 13 GPUs but the cluster has 12")

	s := spec(t, "big-memory", 1, 1)
	s.GPUs.MinMemoryMiB = 81920
	_, _, err = p.Submit(ctx, s, "", nil)
	must.ErrorContains(t, err, "GPU model/memory constraints")

	jobs, err := st.ListJobs(ctx)
	must.NoError(t, err)
	must.Len(t, 1, jobs)
	must.Eq(t, ok.ID, jobs[0].ID)
}

// A pool or GPU model that no node has is an error at its attribute in
// the jobspec that names those the cluster has (a model is Nomad's device
// name: "A100" for "NVIDIA A100-SXM4-40GB" was refused as "0 GPUs it could
// use", which said nothing of why).
func TestSubmit_NamesThePoolsAndModelsTheClusterHas(t *testing.T) {
	ctx := context.Background()
	a, v := node("n1", 8), node("n2", 2)
	a.Pool, a.GPUModel = "a100", "NVIDIA A100-SXM4-40GB"
	v.Pool, v.GPUModel = "v100", "Tesla V100-SXM2-16GB"
	p, st, _, _ := newPlanner(t, "fifo", a, v)
	refused := func(src string) string {
		t.Helper()
		s, diags := jobspec.Parse([]byte(src), "j.hcl", time.Now())
		must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
		_, _, err := p.Submit(ctx, s, "", nil)
		var ie *structs.InputError
		must.True(t, errors.As(err, &ie), must.Sprint(err))
		return err.Error()
	}
	must.Eq(t, `failed to queue job x: j.hcl:6:5: error: No ready node has this GPU model: "A100"; the ready nodes' GPU models: "NVIDIA A100-SXM4-40GB" (8 GPUs), "Tesla V100-SXM2-16GB" (2 GPUs).`,
		refused("training \"x\" {\n  command = \"python3\"\n  gpus {\n    min = 1\n    max = 2\n    model = \"A100\"\n  }\n}\n"))
	must.Eq(t, `failed to queue job x: j.hcl:3:3: error: No ready node is in this pool: "h100"; the ready nodes' pools: "a100" (8 GPUs), "v100" (2 GPUs).`,
		refused("training \"x\" {\n  command = \"python3\"\n  pool = \"h100\"\n  gpus = 1\n}\n"))
	// The model is the cluster's, not the pool's.
	must.StrContains(t, refused("training \"x\" {\n  command = \"python3\"\n  pool = \"v100\"\n  gpus {\n    min = 1\n    max = 2\n    model = \"NVIDIA A100-SXM4-40GB\"\n  }\n}\n"),
		`the GPU models of pool "v100"'s ready nodes: "Tesla V100-SXM2-16GB" (2 GPUs).`)

	jobs, err := st.ListJobs(ctx)
	must.NoError(t, err)
	must.SliceEmpty(t, jobs)

	// At most maxNamed are named.
	var many []policy.Node
	for i := range maxNamed + 4 {
		n := node(fmt.Sprintf("n%02d", i), 1)
		n.Pool = fmt.Sprintf("p%02d", i)
		many = append(many, n)
	}
	p, _, _, _ = newPlanner(t, "fifo", many...)
	got := refused("training \"x\" {\n  command = \"python3\"\n  pool = \"h100\"\n  gpus = 1\n}\n")
	must.StrContains(t, got, `"p15" (1 GPU), and 4 more.`)
	must.StrNotContains(t, got, `"p16"`)
}

// A submission whose ID another job has (the random suffix met one) gets
// another ID, not a failure; an ID taken every time is a failure that
// says so.
func TestSubmit_TakenIDIsDrawnAgain(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 8))
	ids := []string{"a-1", "a-1", "a-2"}
	p.With(WithJobIDs(func(*jobspec.Spec) string { id := ids[0]; ids = ids[1:]; return id }))
	submit(t, p, now, spec(t, "a", 1, 1))
	j := submit(t, p, now, spec(t, "a", 1, 1))
	must.Eq(t, "a-2", j.ID)
	jobs, err := st.ListJobs(ctx)
	must.NoError(t, err)
	must.Len(t, 2, jobs)

	p.With(WithJobIDs(func(*jobspec.Spec) string { return "a-1" }))
	_, _, err = p.Submit(ctx, spec(t, "a", 1, 1), "", nil)
	must.ErrorIs(t, err, store.ErrExists)
}

// An unknown policy is refused and the active one stays.
func TestSetPolicy_UnknownKeepsActive(t *testing.T) {
	p, _, _, _ := newPlanner(t, "fifo", node("n1", 8))
	_, err := p.SetPolicy(context.Background(), "no-such-policy", nil)
	must.ErrorContains(t, err, "no-such-policy")
	name, _ := p.Policies.Active()
	must.Eq(t, "fifo", name)
	_, err = p.SetPolicy(context.Background(), "elastic-fifo", map[string]string{"bogus": "1"})
	must.Error(t, err)
	name, _ = p.Policies.Active()
	must.Eq(t, "fifo", name)
}

// Stopping a running job stops it in Nomad and frees its GPUs; stopping a
// queued one takes it out of the queue.
func TestStop(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	b := submit(t, p, now, spec(t, "b", 4, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()

	_, err := p.Stop(ctx, b.ID)
	must.NoError(t, err)
	must.SliceEmpty(t, exec.take())
	must.Eq(t, structs.JobStopped, state(t, st, b.ID).State)

	_, err = p.Stop(ctx, a.ID)
	must.NoError(t, err)
	must.Eq(t, []string{"a:0"}, exec.take())
	must.Eq(t, structs.JobStopped, state(t, st, a.ID).State)
	must.NoError(t, p.Round(ctx))
	must.SliceEmpty(t, exec.take())
}

// Stopping a job that has ended is decided in one place, the planner: it
// is a conflict (409 at the API), and the record stays as it was; an
// unknown job is not found (404).
func TestStop_EndedJobIsConflict(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "fifo", node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	stopped, err := p.Stop(ctx, a.ID)
	must.NoError(t, err)

	_, err = p.Stop(ctx, a.ID)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.Eq(t, stopped.Version, state(t, st, a.ID).Version)

	_, err = p.Stop(ctx, "nope-1a2b3c4d")
	must.ErrorIs(t, err, structs.ErrNotFound)
}

// A user's stop is recorded before the run is stopped, as the round's
// stops are. A record that cannot be written leaves the run alone (the
// run was stopped first, and the record left saying it ran); a stop that
// fails, tried twice, puts the record back as it was, with an event that
// says so. Either way the job runs on, the next round leaves it so, and
// the stop tried again stops it.
func TestStop_RecordedBeforeTheStop(t *testing.T) {
	for _, tc := range failedStops(func(j *structs.Job) bool { return j.State == structs.JobStopped }, "failed to record stop of job") {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
			a := submit(t, p, now, spec(t, "a", 4, 4))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a:4"}, exec.take())
			before := state(t, st, a.ID)

			tc.fail(st, exec, a)
			*now = now.Add(time.Minute)
			_, err := p.Stop(ctx, a.ID)
			must.ErrorContains(t, err, tc.err)
			st.refuse = nil
			must.SliceEmpty(t, exec.take(), must.Sprint("a's run was stopped"))
			rec := state(t, st, a.ID)
			must.Eq(t, structs.JobRunning, rec.State)
			must.Eq(t, before.Allocation, rec.Allocation)
			must.Eq(t, before.History, rec.History)
			must.Eq(t, before.AttainedGPUSeconds, rec.AttainedGPUSeconds)
			must.True(t, rec.Finished.IsZero(), must.Sprint("a running job has not ended"))
			if tc.name == "the stop fails" {
				last := rec.Events[len(rec.Events)-1]
				must.Eq(t, EventNotStopped, last.Type)
				must.StrContains(t, last.Message, "not stopped: failed to stop job")
				must.StrContains(t, last.Message, "it runs on as it was")
			}

			*now = now.Add(10 * time.Second)
			must.NoError(t, p.Round(ctx))
			must.SliceEmpty(t, exec.take())
			must.Eq(t, structs.JobRunning, state(t, st, a.ID).State)
			_, err = p.Stop(ctx, a.ID)
			must.NoError(t, err)
			must.Eq(t, []string{"a:0"}, exec.take())
			rec = state(t, st, a.ID)
			must.Eq(t, structs.JobStopped, rec.State)
			must.Eq(t, *now, rec.Finished)
		})
	}
}

// A user's stop, once recorded, is carried out even where the request
// gives up meanwhile (its client's timeout): the stop's retry does not
// end with the request, nor is the record then left saying stopped on a
// run that goes on.
func TestStop_CarriedOutWhenTheRequestGivesUp(t *testing.T) {
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	must.NoError(t, p.Round(context.Background()))
	must.Eq(t, []string{"a:4"}, exec.take())

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	exec.failTimes = map[string]int{"a": 1}
	exec.onApply = func(*structs.Job) { cancel() } // the client gives up during the stop
	_, err := p.Stop(ctx, a.ID)
	must.NoError(t, err)
	must.Eq(t, []string{"a:0"}, exec.take(), must.Sprint("the stop was tried again"))
	must.Eq(t, structs.JobStopped, state(t, st, a.ID).State)
}

// A job that ends between the stop's read and its write (its launcher
// exits, a departure) is a conflict, as one that had ended before, and
// its end stands.
func TestStop_JobEndedMeanwhileIsConflict(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()
	var once sync.Once
	st.refuse = func(j *structs.Job) error {
		once.Do(func() { // the job completes just before the stop's write
			done, err := st.GetJob(ctx, j.ID)
			must.NoError(t, err)
			code := 0
			done.State, done.ExitCode, done.Finished = structs.JobComplete, &code, *now
			must.NoError(t, st.Memory.UpdateJob(ctx, done))
		})
		return nil
	}
	_, err := p.Stop(ctx, a.ID)
	must.ErrorIs(t, err, structs.ErrConflict)
	must.EqError(t, err, "job "+a.ID+" has already ended (complete): conflict")
	must.SliceEmpty(t, exec.take())
	must.Eq(t, structs.JobComplete, state(t, st, a.ID).State)
}

// GPUs on a node that is gone are not planned on: the job's allocation is
// taken as empty and it is started again elsewhere.
func TestRound_LostNodeDropped(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 4), node("n2", 4))
	a := submit(t, p, now, spec(t, "a", 4, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()
	held := state(t, st, a.ID).Allocation
	var lost string
	for n := range held {
		lost = n
	}
	remaining := node("n1", 4)
	if lost == "n1" {
		remaining = node("n2", 4)
	}
	p.Cluster = staticCluster{remaining}
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"a:4"}, exec.take())
	must.Eq(t, map[string]int{remaining.ID: 4}, state(t, st, a.ID).Allocation)
}

// A running job that Nomad has not placed in full gets an event saying
// why, once per reason, and one when Nomad has placed it; it keeps its
// GPUs meanwhile (the planner does not model the nodes' CPU).
func TestRound_UnplacedSaysWhyOnce(t *testing.T) {
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	exec.unplaced = map[string]string{}
	ctx := context.Background()
	j := submit(t, p, now, spec(t, "a", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, structs.JobRunning, state(t, st, j.ID).State)

	events := func(types ...string) []string {
		var out []string
		for _, e := range state(t, st, j.ID).Events {
			if slices.Contains(types, e.Type) {
				out = append(out, e.Type+": "+e.Message)
			}
		}
		return out
	}
	why := "Nomad has not placed 1 of 2 workers on node n1: cpu exhausted on 1 node; they wait for room there"
	exec.mu.Lock()
	exec.unplaced["a"] = why
	exec.mu.Unlock()
	for range 3 {
		*now = now.Add(time.Second)
		must.NoError(t, p.Round(ctx))
	}
	must.Eq(t, []string{EventUnplaced + ": " + why}, events(EventUnplaced, EventPlaced))
	must.Eq(t, 2, state(t, st, j.ID).GPUs())

	exec.mu.Lock()
	exec.unplaced["a"] = ""
	exec.mu.Unlock()
	for range 2 {
		*now = now.Add(time.Second)
		must.NoError(t, p.Round(ctx))
	}
	must.Eq(t, []string{EventUnplaced + ": " + why, EventPlaced + ": Nomad has placed all of the job"}, events(EventUnplaced, EventPlaced))
}

// recentCluster is a cluster that counts its reads and answers Recent
// with its last read while fresh is set.
type recentCluster struct {
	nodes []policy.Node
	last  []policy.Node
	reads int
	fresh bool
}

func (c *recentCluster) Nodes(context.Context) ([]policy.Node, error) {
	c.reads++
	c.last = slices.Clone(c.nodes)
	return slices.Clone(c.last), nil
}

func (c *recentCluster) Recent(time.Duration) ([]policy.Node, bool) {
	return slices.Clone(c.last), c.fresh && c.last != nil
}

// Submissions are checked against a recent read of the cluster instead
// of reading it again each (a burst of them listed Nomad's allocations
// once each, and timed out); a job that the recent read refuses is
// checked against a read made for it, so a node that came since takes it.
func TestSubmit_RecentNodes(t *testing.T) {
	p, _, _, now := newPlanner(t, "fifo")
	c := &recentCluster{nodes: []policy.Node{node("n1", 4)}, fresh: true}
	p.Cluster = c
	submit(t, p, now, spec(t, "first", 1, 4))
	must.Eq(t, 1, c.reads, must.Sprint("nothing recent yet: read"))
	for i := range 5 {
		submit(t, p, now, spec(t, "j"+strconv.Itoa(i), 2, 4))
	}
	must.Eq(t, 1, c.reads, must.Sprint("the recent read served them"))

	c.nodes = append(c.nodes, node("n2", 8))
	submit(t, p, now, spec(t, "big", 8, 8))
	must.Eq(t, 2, c.reads, must.Sprint("the recent read has no room for 8: read again, and n2 takes it"))
	_, _, err := p.Submit(context.Background(), spec(t, "huge", 16, 16), "", nil)
	var ie *structs.InputError
	must.True(t, errors.As(err, &ie), must.Sprint(err))
	must.Eq(t, 3, c.reads, must.Sprint("refused on a read made for it"))

	c.fresh = false
	submit(t, p, now, spec(t, "late", 1, 1))
	must.Eq(t, 4, c.reads, must.Sprint("no recent read: read"))
}
