package place_test

import (
	"fmt"
	"strconv"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
	"github.com/shoenig/test/must"
)

func TestNewBoard_Rejects(t *testing.T) {
	cases := []struct {
		name string
		s    policy.Snapshot
		err  string
	}{
		{name: "duplicate node", s: policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0), node("n1", 4, 0)}},
			err: `node ID "n1" is empty or listed twice`},
		{name: "reserved above gpus", s: policy.Snapshot{Nodes: []policy.Node{node("n1", 2, 3)}},
			err: "node n1 has 2 GPUs, 3 reserved"},
		{name: "duplicate job", s: policy.Snapshot{Jobs: []policy.Job{queued("a", 1, 1, 1, 1), queued("a", 2, 1, 1, 1)}},
			err: `job ID "a" is empty or listed twice`},
		{name: "min not a multiple of per_worker", s: policy.Snapshot{Jobs: []policy.Job{queued("a", 1, 3, 4, 2)}},
			err: "job a: malformed GPU request min=3 max=4 per_worker=2"},
		{name: "max below min", s: policy.Snapshot{Jobs: []policy.Job{queued("a", 1, 4, 2, 2)}},
			err: "malformed GPU request"},
		{name: "zero per_worker", s: policy.Snapshot{Jobs: []policy.Job{queued("a", 1, 0, 0, 0)}},
			err: "malformed GPU request"},
		{name: "allocation on unknown node", s: policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0)},
			Jobs: []policy.Job{running("a", 1, 2, 2, 2, A{"n9": 2}, 1)}}, err: `on node "n9"`},
		{name: "overcommitted node", s: policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 4)},
			Jobs: []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 6}, 1)}}, err: "node n1 is overcommitted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := place.NewBoard(&tc.s)
			must.ErrorContains(t, err, "invalid snapshot")
			must.ErrorContains(t, err, tc.err)
		})
	}
}

func TestBoard_Resize(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 4)}, Jobs: []policy.Job{
		running("a", 1, 2, 8, 2, A{"n1": 4, "n2": 2}, 1), queued("b", 2, 4, 12, 4)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.Eq(t, 6, c.FreeGPUs())
	must.Eq(t, 4, c.Room("b"), must.Sprint("n1 has 4 free, n2 has 2: only one 4-GPU worker fits"))
	must.Eq(t, 6, c.Room("a"))

	must.ErrorContains(t, c.Resize("b", 6), "not 0 or a multiple of 4 in [4, 12]")
	must.ErrorContains(t, c.Resize("zz", 4), "not in the snapshot")
	must.ErrorIs(t, c.Resize("b", 8), place.ErrNoRoom)
	must.Eq(t, 0, c.Total("b"), must.Sprint("a failed resize changes nothing"))

	must.NoError(t, c.Resize("a", 2), must.Sprint("shrinks where it holds the fewest"))
	must.Eq(t, A{"n1": 2}, c.Allocation("a"))
	must.NoError(t, c.Resize("b", 8))
	must.Eq(t, A{"n1": 4, "n2": 4}, c.Allocation("b"))
	c.Note("b", "hand-placed")

	p := c.Plan("manual")
	must.NoError(t, policy.Validate(s, p))
	must.Eq(t, []string{"hand-placed"}, p.Reasons["b"])
	must.Eq(t, "manual", p.Policy)
	must.Eq(t, []string{"a", "b"}, []string{c.Jobs()[0].ID, c.Jobs()[1].ID})
}

// NewBoard lays the running jobs' node slots side by side in one array: a
// job that gains a node, loses one or changes a count there leaves its
// neighbours' as they were, and the plan shows every job as it stands.
func TestBoard_SharedSlots(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0), node("n3", 8, 0)}, Jobs: []policy.Job{
		running("a", 1, 1, 8, 1, A{"n1": 2}, 1), running("b", 2, 1, 8, 1, A{"n1": 2, "n2": 2}, 1),
		running("c", 3, 1, 8, 1, A{"n2": 2}, 1)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	neighbours := func(step string) {
		t.Helper()
		must.Eq(t, A{"n2": 2}, c.Allocation("c"), must.Sprint(step))
		must.Eq(t, A{"n2": 2}, s.Jobs[2].Allocation, must.Sprint(step, ": the snapshot is not changed"))
	}
	must.NoError(t, c.Resize("a", 8))
	must.Eq(t, 8, c.Allocation("a").Total())
	must.Eq(t, A{"n1": 2, "n2": 2}, c.Allocation("b"), must.Sprint("a grew"))
	neighbours("a grew")
	must.NoError(t, c.Resize("b", 1))
	must.Eq(t, 1, c.Allocation("b").Total())
	must.Eq(t, 8, c.Allocation("a").Total(), must.Sprint("b shrank"))
	neighbours("b shrank")
	must.NoError(t, c.Resize("b", 3))
	must.Eq(t, 3, c.Allocation("b").Total())
	neighbours("b grew back")

	p := c.Plan("test")
	must.Eq(t, c.Allocation("a"), p.Allocations["a"])
	must.Eq(t, c.Allocation("b"), p.Allocations["b"])
	must.Eq(t, A{"n2": 2}, p.Target(&s.Jobs[2]), must.Sprint("c, unchanged, keeps its GPUs"))
}

// A board keeps the notes of a few jobs in a list and those of more by job
// index: either way each job's reasons reach the plan in the order noted,
// and a second plan has only what was noted after the first.
func TestBoard_Notes(t *testing.T) {
	for _, n := range []int{3, 40} {
		t.Run(strconv.Itoa(n), func(t *testing.T) {
			s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0)}}
			for i := range n {
				s.Jobs = append(s.Jobs, queued(fmt.Sprintf("j%02d", i), i+1, 1, 1, 1))
			}
			c, err := place.NewBoard(s)
			must.NoError(t, err)
			for i := range n {
				c.Note(s.Jobs[i].ID, "first")
			}
			c.Note("j01", "second")
			c.Note("gone", "not in the snapshot")
			p := c.Plan("test")
			must.MapLen(t, n+1, p.Reasons)
			must.Eq(t, []string{"first", "second"}, p.Reasons["j01"])
			must.Eq(t, []string{"first"}, p.Reasons["j00"])
			must.Eq(t, []string{"first"}, p.Reasons[s.Jobs[n-1].ID])

			c.Note("j02", "later")
			p = c.Plan("test")
			must.Eq(t, map[string][]string{"j02": {"later"}}, p.Reasons)
		})
	}
}

// GrowMostFree is worst fit: the node with the most room first (lowest
// index among equals), then the next, in whole workers; all or nothing.
func TestBoard_GrowMostFree(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0), node("n3", 4, 0)}, Jobs: []policy.Job{
		running("a", 1, 2, 2, 1, A{"n1": 2}, 1), running("b", 2, 1, 1, 1, A{"n2": 1}, 1),
		queued("c", 3, 1, 1, 1), queued("d", 4, 6, 6, 1), queued("e", 5, 4, 4, 2), queued("f", 6, 2, 2, 2)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.True(t, c.GrowMostFree(2, 1))
	must.Eq(t, A{"n3": 1}, c.Allocation("c"), must.Sprint("the emptiest node, not the tightest"))
	must.True(t, c.GrowMostFree(3, 6))
	must.Eq(t, A{"n2": 3, "n3": 3}, c.Allocation("d"), must.Sprint("most room first, then the next"))
	must.False(t, c.GrowMostFree(4, 4))
	must.Eq(t, 0, c.Total("e"), must.Sprint("nothing placed when it does not fit"))
	must.True(t, c.GrowMostFree(5, 2))
	must.Eq(t, A{"n1": 2}, c.Allocation("f"))
	must.False(t, c.GrowMostFree(0, 2), must.Sprint("only for a job holding nothing"))
	must.NoError(t, policy.Validate(s, c.Plan("worst-fit")))
}

// TestNewBoard_Unsorted: a snapshot out of submission order is loaded as
// the sorted one (NewBoard sorts it and loads it again), and its errors
// are those of the sorted jobs.
func TestNewBoard_Unsorted(t *testing.T) {
	nodes := []policy.Node{node("n1", 8, 0), node("n2", 8, 0)}
	jobs := []policy.Job{running("c", 3, 2, 2, 2, A{"n1": 2}, 3), queued("a", 1, 4, 4, 4),
		running("b", 2, 4, 4, 2, A{"n1": 2, "n2": 2}, 2), queued("d", 4, 8, 8, 8)}
	sorted := []policy.Job{jobs[1], jobs[2], jobs[0], jobs[3]}
	c, err := place.NewBoard(&policy.Snapshot{Nodes: nodes, Jobs: jobs})
	must.NoError(t, err)
	want, err := place.NewBoard(&policy.Snapshot{Nodes: nodes, Jobs: sorted})
	must.NoError(t, err)
	for _, j := range want.Jobs() {
		must.Eq(t, want.Allocation(j.ID), c.Allocation(j.ID))
	}
	must.Eq(t, want.FreeGPUs(), c.FreeGPUs())
	must.Eq(t, []string{"a", "b", "c", "d"}, ids(c.Jobs()))

	// Out of order, with a malformed job before a repeated ID once sorted:
	// the repeated ID is the error, as for the sorted jobs.
	_, err = place.NewBoard(&policy.Snapshot{Jobs: []policy.Job{queued("x", 3, 1, 1, 1), queued("m", 1, 3, 4, 2), queued("x", 2, 1, 1, 1)}})
	must.ErrorContains(t, err, `job ID "x" is empty or listed twice`)
	_, err = place.NewBoard(&policy.Snapshot{Jobs: []policy.Job{queued("y", 3, 3, 4, 2), queued("m", 1, 3, 4, 2)}})
	must.ErrorContains(t, err, "job m: malformed GPU request")
}

func ids(jobs []*policy.Job) []string {
	var out []string
	for _, j := range jobs {
		out = append(out, j.ID)
	}
	return out
}

// Changed is whether a job holds other GPUs than in the snapshot, which
// decides whether a policy owes it a reason: not after a grow that did not
// fit (rolled back), nor after a shrink undone where it was.
func TestBoard_ChangedIsAgainstTheSnapshot(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)}, Jobs: []policy.Job{
		running("a", 1, 4, 8, 4, A{"n1": 4}, 1), running("b", 2, 8, 8, 2, A{"n1": 2, "n2": 6}, 1),
		queued("c", 3, 6, 6, 2)}}
	c, err := place.NewBoard(s)
	must.NoError(t, err)
	must.False(t, c.Changed(0))

	// n1 has 2 free, n2 none: a's next 4-GPU worker fits nowhere.
	must.False(t, c.Grow(0, 4))
	must.False(t, c.Changed(0), must.Sprint("a grow that did not fit changes nothing"))

	held := c.HoldingOf(0)
	c.Shrink(0, 4)
	must.True(t, c.Changed(0))
	must.True(t, c.Restore(0, held))
	must.False(t, c.Changed(0), must.Sprint("back where it was"))

	c.Shrink(0, 4)
	must.True(t, c.Grow(2, 6)) // c takes n1's 6
	c.Shrink(1, 8)
	must.True(t, c.Grow(0, 4))
	must.Eq(t, A{"n2": 4}, c.Allocation("a"), must.Sprint("n1 has 2 free: moved"))
	must.True(t, c.Changed(0))
}
