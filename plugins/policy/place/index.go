package place

import "slices"

// The index-keyed side of a Board, for policies that plan at scale: a job
// is named by its index j in Jobs() (submission order), a node by its index
// in ID order, so that a round over tens of thousands of jobs looks nothing
// up by ID. The ID-keyed methods (Total, Room, Resize, Note) do the same
// for one job at a time.

// Held returns the GPUs job j holds in the working state.
func (c *Board) Held(j int32) int { return c.total[j] }

// Changed reports whether job j holds other GPUs in the working state than
// in the snapshot: not where it was moved and came back, nor where a try to
// grow it was rolled back.
func (c *Board) Changed(j int32) bool { return !c.unchanged(j) }

// NodesHeld returns the number of nodes job j holds GPUs on.
func (c *Board) NodesHeld(j int32) int { return len(c.alloc[j]) }

// FirstNode returns the index of the lowest-ID node job j holds GPUs on, or
// -1 if it holds none.
func (c *Board) FirstNode(j int32) int32 {
	if len(c.alloc[j]) == 0 {
		return -1
	}
	return c.alloc[j][0].node
}

// RoomOf returns how many GPUs job j could gain now (see Room).
func (c *Board) RoomOf(j int32) int { return c.room(j) }

// Holding is where a preempted job held its GPUs, for Restore.
type Holding []slot

// HoldingOf returns where job j holds its GPUs now, for a Restore after
// trying other placements.
func (c *Board) HoldingOf(j int32) Holding { return Holding(slices.Clone(c.alloc[j])) }

// Preempt takes all of job j's GPUs and returns where they were.
func (c *Board) Preempt(j int32) Holding {
	h := Holding(slices.Clone(c.alloc[j]))
	c.Shrink(j, c.total[j])
	return h
}

// Restore gives job j back the GPUs of h, which Preempt returned, if all of
// them are still free and no job placed since on those nodes conflicts with
// it (anti-affinity); otherwise it changes nothing and returns false.
func (c *Board) Restore(j int32, h Holding) bool {
	if len(c.antiJobs) > 0 {
		// A job placed since may conflict with it there.
		c.candidates(j)
	}
	for _, s := range h {
		if c.free[s.node] < s.gpus || (len(c.antiJobs) > 0 && !c.cand.has(s.node)) {
			return false
		}
	}
	for _, s := range h {
		c.add(j, s.node, s.gpus)
	}
	return true
}
