package builtin

import (
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// The builtins that implement policy.Steady, so that the simulator skips
// the quiet rounds that would plan the same: fifo, round-robin and
// goodput plan from the jobs and their allocations alone; elastic-fifo
// and edf too, but for their resize cooldown; tiresias until a running
// job reaches its next queue threshold (tiresias.go). qoe and goodput-jct
// weigh the time left to deadlines and the attained service every round,
// and do not.

// steadyHorizon is SteadyUntil's "never", a century ahead (within
// time.Duration).
const steadyHorizon = 100 * 365 * 24 * time.Hour

// SteadyUntil implements policy.Steady: never (the plan does not depend
// on the time).
func (p *FIFO) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	return s.Now.Add(steadyHorizon), true
}

// SteadyUntil implements policy.Steady: never (the plan does not depend
// on the time).
func (p *RoundRobin) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	return s.Now.Add(steadyHorizon), true
}

// SteadyUntil implements policy.Steady: never (the plan does not depend
// on the time).
func (p *Goodput) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	return s.Now.Add(steadyHorizon), true
}

// SteadyUntil implements policy.Steady: when the first running job's
// resize cooldown ends (never without one).
func (p *ElasticFIFO) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	return cooledUntil(s, time.Duration(p.cooldown.Load())), true
}

// SteadyUntil implements policy.Steady: when the first running job's
// resize cooldown ends (never without one); deadlines are fixed at
// submission, and edf orders by them, not by the time left to them.
func (p *EDF) SteadyUntil(s *policy.Snapshot) (time.Time, bool) {
	return cooledUntil(s, time.Duration(p.cooldown.Load())), true
}

// cooledUntil is when the first running job of s still in its resize
// cooldown leaves it (place.Elastic grows none before: a running job
// resized less than cooldown before Now), steadyHorizon ahead if none is.
func cooledUntil(s *policy.Snapshot, cooldown time.Duration) time.Time {
	until := s.Now.Add(steadyHorizon)
	if cooldown <= 0 {
		return until
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if t := j.LastResized.Add(cooldown); j.Allocation.Total() > 0 && t.After(s.Now) && t.Before(until) {
			until = t
		}
	}
	return until
}
