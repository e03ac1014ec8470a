package policy

// Plan is a policy's answer for one round: a target allocation per job.
//
// A job absent from Allocations keeps its current allocation (a queued job
// stays queued, a running job keeps its GPUs). A job present with an empty
// (or nil) allocation is to hold 0 GPUs: a running one is stopped
// (preempted). The builtins list only the jobs whose allocation changes, so
// a plan's size is that of the round's changes, not of the jobs.
type Plan struct {
	// Policy is the name of the policy that made the plan.
	Policy      string                `json:"policy"`
	Allocations map[string]Allocation `json:"allocations"`
	// Reasons explains, per job ID, what the policy decided and why, in
	// words for `schedulearn job status`.
	Reasons map[string][]string `json:"reasons,omitempty"`
	// Waiting is the reason of every job the plan leaves without GPUs
	// and without reasons of its own (Why): the jobs that wait behind
	// the head of a line, which would otherwise each carry the same words.
	Waiting []string `json:"waiting,omitempty"`
}

// Why returns what the plan says of job j: its own reasons, or, for a job
// the plan leaves without GPUs, the plan's Waiting.
func (p *Plan) Why(j *Job) []string {
	if r, ok := p.Reasons[j.ID]; ok {
		return r
	}
	if len(p.Waiting) > 0 && p.Target(j).Total() == 0 {
		return p.Waiting
	}
	return nil
}

// Target returns the allocation plan p gives job j.
func (p *Plan) Target(j *Job) Allocation {
	if a, ok := p.Allocations[j.ID]; ok {
		return a
	}
	return j.Allocation
}

// ChangeKind is what a change does to a job.
type ChangeKind string

const (
	// Start gives GPUs to a job that holds none.
	Start ChangeKind = "start"
	// Grow adds GPUs to a running job (it may also drop some nodes).
	Grow ChangeKind = "grow"
	// Shrink takes GPUs from a running job, which keeps at least one worker.
	Shrink ChangeKind = "shrink"
	// Move keeps a running job's total but changes its nodes.
	Move ChangeKind = "move"
	// Stop takes all GPUs from a running job (preemption).
	Stop ChangeKind = "stop"
)

// Change is one job's move from its current allocation to its target.
type Change struct {
	Job  string     `json:"job"`
	Kind ChangeKind `json:"kind"`
	From Allocation `json:"from,omitempty"`
	To   Allocation `json:"to,omitempty"`
}

// Delta returns the per-node change in GPUs (To - From), without zeros.
func (c Change) Delta() map[string]int {
	d := make(map[string]int, len(c.From)+len(c.To))
	for n, g := range c.To {
		d[n] += g
	}
	for n, g := range c.From {
		d[n] -= g
	}
	for n, g := range d {
		if g == 0 {
			delete(d, n)
		}
	}
	return d
}

// Changes are the changes of a plan, by kind; within a kind, in the order
// of the snapshot's jobs.
type Changes struct {
	Stops   []Change `json:"stops,omitempty"`
	Shrinks []Change `json:"shrinks,omitempty"`
	Moves   []Change `json:"moves,omitempty"`
	Grows   []Change `json:"grows,omitempty"`
	Starts  []Change `json:"starts,omitempty"`
}

// All returns every change in the order an executor should apply them so
// that GPUs are released before they are taken: stops, shrinks, moves, grows,
// starts. Within a move or grow, per-node decreases (Delta < 0) come first.
func (c Changes) All() []Change {
	out := make([]Change, 0, len(c.Stops)+len(c.Shrinks)+len(c.Moves)+len(c.Grows)+len(c.Starts))
	out = append(out, c.Stops...)
	out = append(out, c.Shrinks...)
	out = append(out, c.Moves...)
	out = append(out, c.Grows...)
	return append(out, c.Starts...)
}

// Empty reports whether there is nothing to do.
func (c Changes) Empty() bool {
	return len(c.Stops)+len(c.Shrinks)+len(c.Moves)+len(c.Grows)+len(c.Starts) == 0
}

// Diff compares plan p with snapshot s and returns what changes. Jobs of the
// plan that are not in the snapshot are ignored (Validate reports them).
func (p *Plan) Diff(s *Snapshot) Changes {
	c, _ := p.diff(s)
	return c
}

// AllAt is Diff(s).All(), and beside it the index in s.Jobs of each
// change's job (at[i] for changes[i]): for a caller that keeps its own
// record of each job in the snapshot's order (the planner), so that it
// finds them without a lookup by ID of every job.
func (p *Plan) AllAt(s *Snapshot) (changes []Change, at []int) {
	c, idx := p.diff(s)
	changes = c.All()
	at = make([]int, 0, len(changes))
	for _, k := range idx {
		at = append(at, k...)
	}
	return changes, at
}

// diff is Diff, with the indexes of the changes' jobs by kind, in All's
// order: stops, shrinks, moves, grows, starts.
func (p *Plan) diff(s *Snapshot) (Changes, [5][]int) {
	var c Changes
	var at [5][]int
	// With the snapshot's job IDs unique, the jobs after the one that
	// found the plan's last entry are not in it: they are not looked up.
	found := 0
	for i := 0; i < len(s.Jobs) && found < len(p.Allocations); i++ {
		j := &s.Jobs[i]
		to, ok := p.Allocations[j.ID]
		if !ok {
			continue // keeps its allocation
		}
		found++
		from := j.Allocation
		if to.Equal(from) {
			continue
		}
		ch := Change{Job: j.ID, From: from.Clone(), To: to.Clone()}
		ft, tt := from.Total(), to.Total()
		switch {
		case ft == 0:
			ch.Kind = Start
			c.Starts = append(c.Starts, ch)
			at[4] = append(at[4], i)
		case tt == 0:
			ch.Kind = Stop
			c.Stops = append(c.Stops, ch)
			at[0] = append(at[0], i)
		case tt > ft:
			ch.Kind = Grow
			c.Grows = append(c.Grows, ch)
			at[3] = append(at[3], i)
		case tt < ft:
			ch.Kind = Shrink
			c.Shrinks = append(c.Shrinks, ch)
			at[1] = append(at[1], i)
		default:
			ch.Kind = Move
			c.Moves = append(c.Moves, ch)
			at[2] = append(at[2], i)
		}
	}
	return c, at
}
