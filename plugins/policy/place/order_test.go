package place_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
	"github.com/shoenig/test/must"
)

// TestDeadlineOrder: earliest deadline first, ties and jobs without a
// deadline (last) in submission order; the same order as a stable sort of
// the jobs in submission order, over random deadlines with many ties.
func TestDeadlineOrder(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 18))
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := time.Now()
	for round := range 200 {
		s := &policy.Snapshot{Now: base, Nodes: []policy.Node{node("n1", 8, 0)}}
		for i := range 1 + r.IntN(60) {
			j := queued(fmt.Sprintf("j%03d", r.IntN(1000)*1000+i), r.IntN(50), 1, 1, 1)
			if r.IntN(3) > 0 {
				j.Progress.Deadline = base.Add(time.Duration(r.IntN(5))*time.Hour + time.Duration(r.IntN(2)))
			}
			if round%4 == 0 && r.IntN(3) == 0 {
				// A deadline made from the clock carries a monotonic reading.
				j.Progress.Deadline = now.Add(time.Duration(r.IntN(5)-2) * time.Hour)
			}
			s.Jobs = append(s.Jobs, j)
		}
		c, err := place.NewBoard(s)
		must.NoError(t, err)
		jobs := c.Jobs()
		want := make([]int32, len(jobs))
		for j := range want {
			want[j] = int32(j)
		}
		slices.SortStableFunc(want, func(a, b int32) int {
			da, db := jobs[a].Progress.Deadline, jobs[b].Progress.Deadline
			switch {
			case da.IsZero() && db.IsZero():
				return 0
			case da.IsZero():
				return 1
			case db.IsZero():
				return -1
			}
			return da.Compare(db)
		})
		must.Eq(t, want, c.DeadlineOrder(), must.Sprintf("round %d", round))
	}
}
