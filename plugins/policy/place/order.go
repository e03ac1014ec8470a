package place

import (
	"slices"
	"time"
)

// DeadlineOrder returns the jobs (indexes into Jobs) by deadline
// (Progress.Deadline), earliest first; jobs without one last; ties in
// submission order.
//
// Only the jobs with a deadline are sorted, on a copy of their deadlines
// (no reading of the jobs in the comparisons); the others follow in
// submission order as they are.
func (c *Board) DeadlineOrder() []int32 {
	type keyed struct {
		at time.Time
		j  int32
	}
	var due []keyed
	order := make([]int32, 0, len(c.jobs))
	for j, job := range c.jobs {
		if d := job.Progress.Deadline; !d.IsZero() {
			due = append(due, keyed{at: d, j: int32(j)})
		}
	}
	slices.SortFunc(due, func(a, b keyed) int {
		if x := a.at.Compare(b.at); x != 0 {
			return x
		}
		return int(a.j - b.j)
	})
	for _, k := range due {
		order = append(order, k.j)
	}
	if len(order) == len(c.jobs) {
		return order
	}
	for j, job := range c.jobs {
		if job.Progress.Deadline.IsZero() {
			order = append(order, int32(j))
		}
	}
	return order
}
