package place

import (
	"cmp"
	"slices"
)

// DeadlineOrder returns the jobs (indexes into Jobs) by deadline
// (Progress.Deadline), earliest first; jobs without one last; ties in
// submission order.
//
// Only the jobs with a deadline are sorted, on copied integer keys (Unix
// seconds and nanoseconds: time.Time.Compare's order where no deadline
// carries a monotonic clock reading, as none read from a store or a trace
// does; otherwise on time.Time.Compare itself); the others follow in
// submission order as they are.
func (c *Board) DeadlineOrder() []int32 {
	type keyed struct {
		sec  int64
		nsec int32
		j    int32
	}
	due := make([]keyed, 0, len(c.jobs))
	wall := true
	for j, job := range c.jobs {
		if d := job.Progress.Deadline; !d.IsZero() {
			due = append(due, keyed{sec: d.Unix(), nsec: int32(d.Nanosecond()), j: int32(j)})
			wall = wall && d == d.Round(0) //nolint:staticcheck // == on purpose: true only without a monotonic reading
		}
	}
	if wall {
		slices.SortFunc(due, func(a, b keyed) int {
			if x := cmp.Compare(a.sec, b.sec); x != 0 {
				return x
			}
			if x := cmp.Compare(a.nsec, b.nsec); x != 0 {
				return x
			}
			return cmp.Compare(a.j, b.j)
		})
	} else {
		slices.SortFunc(due, func(a, b keyed) int {
			if x := c.jobs[a.j].Progress.Deadline.Compare(c.jobs[b.j].Progress.Deadline); x != 0 {
				return x
			}
			return cmp.Compare(a.j, b.j)
		})
	}
	order := make([]int32, 0, len(c.jobs))
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
