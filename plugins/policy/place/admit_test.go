package place_test

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// AdmitInOrder starts jobs until one does not fit; every queued job
// behind it waits with one reason, the plan's Waiting, but for a job that
// has notes of its own, which gets the reason beside them.
func TestBoard_AdmitInOrderLine(t *testing.T) {
	const behind = "queued: waiting behind job b, which does not fit yet (first come, first served)"
	for _, noted := range []bool{false, true} {
		s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 4, 0)}, Jobs: []policy.Job{
			queued("a", 1, 2, 2, 1), queued("b", 2, 4, 4, 1), queued("c", 3, 1, 1, 1),
			running("d", 4, 2, 2, 1, A{"n1": 2}, 4), queued("e", 5, 1, 1, 1)}}
		// d holds 2 of the 4 GPUs: a takes the other 2, b's 4 do not fit.
		c, err := place.NewBoard(s)
		must.NoError(t, err)
		if noted {
			c.Note("c", "its own")
		}
		must.NoError(t, c.AdmitInOrder(context.Background(), false, c.Grow))
		p := c.Plan("fifo")
		must.NoError(t, policy.Validate(s, p))
		must.Eq(t, A{"n1": 2}, p.Allocations["a"])
		must.Eq(t, []string{behind}, p.Waiting)
		must.Eq(t, []string{behind}, p.Why(&s.Jobs[4]))
		if noted {
			must.Eq(t, []string{"its own", behind}, p.Reasons["c"])
		} else {
			must.MapNotContainsKey(t, p.Reasons, "c")
			must.Eq(t, []string{behind}, p.Why(&s.Jobs[2]))
		}
	}
}
