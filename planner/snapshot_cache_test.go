package planner

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A round's snapshot, copied in part from the last round's (the store
// shares its records), is the snapshot made afresh from the records:
// through starts, ends, the time passing, progress reports, new jobs, a
// node that leaves, and a selector that names jobs.
func TestSnapshot_CopiedIsFresh(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8), node("n2", 8))
	check := func(step string) {
		t.Helper()
		live, err := st.ListActiveJobsShared(ctx)
		must.NoError(t, err)
		nodes, err := p.Cluster.Nodes(ctx)
		must.NoError(t, err)
		got := p.snapshot(*now, nodes, live, slices.ContainsFunc(live, namesJobs))
		must.Eq(t, snapshot(*now, nodes, live), got, must.Sprint(step))
		// The planner vouches for its snapshot: each view's Held is its
		// Allocation by node index.
		must.True(t, got.Vouched(), must.Sprint(step))
		for _, j := range got.Jobs {
			var want []policy.Slot
			for k, n := range got.Nodes {
				if g := j.Allocation[n.ID]; g > 0 {
					want = append(want, policy.Slot{Node: int32(k), GPUs: g})
				}
			}
			must.Eq(t, want, j.Held, must.Sprintf("%s: job %s", step, j.ID))
		}
	}
	ids := make([]string, 0, 8)
	for i := range 10 {
		ids = append(ids, submit(t, p, now, spec(t, "j"+string(rune('a'+i)), 4, 4)).ID)
	}
	check("queued")
	check("again")
	must.NoError(t, p.Round(ctx))
	check("4 started")
	*now = now.Add(time.Hour)
	check("an hour on")
	ids = append(ids, submit(t, p, now, spec(t, "jg", 2, 2)).ID)
	check("one more")
	rate := 10.0
	must.NoError(t, p.ReportProgress(ctx, ids[5], []structs.ProgressReport{{Step: 1, SamplesPerSec: &rate}}))
	must.NoError(t, p.ReportProgress(ctx, ids[0], []structs.ProgressReport{{Step: 7, SamplesPerSec: &rate}}))
	check("progress")
	exec.done["ja"] = 0
	must.NoError(t, p.Round(ctx))
	check("one ended, one started")
	p.Cluster = staticCluster{node("n1", 8)}
	check("n2 left")
	p.Cluster = staticCluster{node("n1", 8), node("n2", 16)}
	check("n2 back, larger")

	// The copy is what it spares: a queued job's record is not read again
	// (here changed in place, which a store that shares records never does).
	live := mustActive(t, st)
	nodes, err := p.Cluster.Nodes(ctx)
	must.NoError(t, err)
	last := live[len(live)-1]
	must.Eq(t, policy.Queued, p.snapshot(*now, nodes, live, slices.ContainsFunc(live, namesJobs)).Jobs[len(live)-1].State)
	was := last.Spec.Priority
	last.Spec.Priority = was + 1
	must.Eq(t, was, p.snapshot(*now, nodes, live, slices.ContainsFunc(live, namesJobs)).Jobs[len(live)-1].Priority)
	must.Eq(t, was+1, snapshot(*now, nodes, live).Jobs[len(live)-1].Priority)
	last.Spec.Priority = was

	s := spec(t, "jh", 1, 1)
	s.AntiAffinity = jobspec.Selector{Jobs: []string{"jb"}}
	submit(t, p, now, s)
	check("a selector names a job")
	check("and still does")
	must.NoError(t, p.Round(ctx))
	check("after a round")
}

func mustActive(t *testing.T, st *memStore) []*structs.Job {
	t.Helper()
	live, err := st.ListActiveJobsShared(context.Background())
	must.NoError(t, err)
	return live
}

// A running job's view copied from the last round's renews what the time
// changes: its attained service and the work left to its target.
func TestSnapshot_CopiedRunningIsTimed(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "elastic-fifo", node("n1", 8))
	j := submit(t, p, now, deadlineSpec(t, "t", "2h", *now))
	must.NoError(t, p.Round(ctx))
	samples := 0.0
	reportCurve(t, p, now, j.ID, 4, 12, &samples)
	nodes, err := p.Cluster.Nodes(ctx)
	must.NoError(t, err)
	live := mustActive(t, st)
	first := p.snapshot(*now, nodes, live, slices.ContainsFunc(live, namesJobs))
	must.Eq(t, snapshot(*now, nodes, live), first)
	must.Positive(t, first.Jobs[0].Progress.RemainingWork)

	*now = now.Add(time.Minute)
	got := p.snapshot(*now, nodes, live, slices.ContainsFunc(live, namesJobs)) // the same records: copied
	must.Eq(t, snapshot(*now, nodes, live), got)
	must.Eq(t, first.Jobs[0].AttainedGPUSeconds+4*60, got.Jobs[0].AttainedGPUSeconds)
	must.Less(t, first.Jobs[0].Progress.RemainingWork, got.Jobs[0].Progress.RemainingWork)
}

// A round writes its views over those of the round before the last, not
// over the last round's (Waits reads them) nor over any a Waits call still
// reads; what it writes is the snapshot made afresh.
func TestSnapshot_ReusesUnreadViews(t *testing.T) {
	ctx := context.Background()
	p, _, now := fourGPUJobs(t, 4)
	first := viewsOf(p.obs.snap.Jobs)
	must.NoError(t, p.Round(ctx))
	second := viewsOf(p.obs.snap.Jobs)
	must.NotEq(t, first, second, must.Sprint("the last round's views are not written over"))
	must.MapLen(t, 2, p.Waits())
	must.NoError(t, p.Round(ctx))
	must.Eq(t, first, viewsOf(p.obs.snap.Jobs), must.Sprint("the views of the round before the last, unread, are"))
	must.MapLen(t, 2, p.Waits())

	p.obs.mu.Lock()
	p.obs.reading = map[*policy.Job]int{second: 1} // a Waits still reading them
	p.obs.mu.Unlock()
	must.False(t, p.unread(p.snaps.spare))
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	third := viewsOf(p.obs.snap.Jobs)
	must.NotEq(t, second, third, must.Sprint("views a Waits reads are not written over"))
	must.NotEq(t, first, third)
	must.MapLen(t, 2, p.Waits())
	must.Eq(t, first, viewsOf(p.snaps.spare))
	must.True(t, p.unread(p.snaps.spare), must.Sprint("the next round writes over them"))
}

// Waits read while rounds run reads no views a round writes over (run
// with -race).
func TestSnapshot_WaitsWhileRounds(t *testing.T) {
	ctx := context.Background()
	p, exec, now := fourGPUJobs(t, 6)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 200 {
			for id, w := range p.Waits() {
				must.NotEq(t, "", w.Reason, must.Sprint(id))
			}
		}
	}()
	for i := range 50 {
		if i%10 == 5 {
			exec.done["ja"] = 0 // an end, and a new record to view
			must.NoError(t, p.Round(ctx))
			delete(exec.done, "ja")
			submit(t, p, now, spec(t, "ja", 4, 4))
		}
		must.NoError(t, p.Round(ctx))
	}
	<-done
}

// fourGPUJobs is a fifo planner on one node of 8 GPUs after a round with
// n jobs of 4 GPUs (ja, jb, ...): two run, the rest queue.
func fourGPUJobs(t *testing.T, n int) (*Planner, *fakeActuator, *time.Time) {
	t.Helper()
	p, _, exec, now := newPlanner(t, "fifo", node("n1", 8))
	for i := range n {
		submit(t, p, now, spec(t, "j"+string(rune('a'+i)), 4, 4))
	}
	must.NoError(t, p.Round(context.Background()))
	return p, exec, now
}

// The round reads only the records new since the last round: the state
// and selectors of the others are known from it (a store that shares its
// records never changes one in place), and a new record's are read.
func TestRound_ReadsNewRecordsOnly(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
	var ids []string
	for _, name := range []string{"ja", "jb", "jc", "jd"} {
		ids = append(ids, submit(t, p, now, spec(t, name, 4, 4)).ID)
	}
	must.NoError(t, p.Round(ctx)) // ja and jb start: new records
	must.NoError(t, p.Round(ctx))

	// A new record whose selector names a job: the round's snapshot
	// resolves the name, as one made afresh does.
	s := spec(t, "je", 4, 4)
	s.AntiAffinity = jobspec.Selector{Jobs: []string{"jb"}}
	submit(t, p, now, s)
	must.NoError(t, p.Round(ctx))
	nodes, err := p.Cluster.Nodes(ctx)
	must.NoError(t, err)
	must.Eq(t, snapshot(*now, nodes, mustActive(t, st)), p.obs.snap)
	must.Eq(t, []string{ids[1]}, p.obs.snap.Jobs[4].AntiAffinity.Jobs)

	// A running job known from the last round ends: it is reaped.
	exec.done["ja"] = 0
	// A queued record changed in place (which the store never does) is
	// not read again: it is not taken for a running job to reap.
	rec := state(t, st, ids[3])
	live := mustActive(t, st)
	must.Eq(t, rec.ID, live[3].ID)
	live[3].State = structs.JobRunning
	exec.done["jd"] = 0
	must.NoError(t, p.Round(ctx))
	must.Eq(t, structs.JobComplete, state(t, st, ids[0]).State)
	must.Eq(t, structs.JobRunning, state(t, st, ids[3]).State, must.Sprint("jd's record, as changed in place, not reaped"))
	live[3].State = structs.JobQueued
}

// copyViews copies every view, in parts of copyRun, of a run that is not
// a whole number of parts.
func TestCopyViews(t *testing.T) {
	src := make([]policy.Job, 2*copyRun+5)
	for i := range src {
		src[i] = policy.Job{ID: fmt.Sprint(i), Priority: i}
	}
	dst := make([]policy.Job, len(src))
	copyViews(dst, src)
	must.Eq(t, src, dst)
}
