package place

import "slices"

// DeadlineOrder returns the jobs (indexes into Jobs) by deadline
// (Progress.Deadline), earliest first; jobs without one last; ties in
// submission order.
func (c *Board) DeadlineOrder() []int32 {
	order := make([]int32, len(c.jobs))
	for j := range order {
		order[j] = int32(j)
	}
	slices.SortStableFunc(order, func(a, b int32) int {
		da, db := c.jobs[a].Progress.Deadline, c.jobs[b].Progress.Deadline
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
	return order
}
