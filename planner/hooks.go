package planner

import (
	"time"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// hooks are what a planner's host may put in place of the planner's own
// ways; the simulator puts all three (sim/planner.go). They are set once,
// when the planner is made (With), never by a field a caller could change
// while rounds run.
type hooks struct {
	// now is the clock (time.Now when nil).
	now func() time.Time
	// newJobID names a job at submission; nil: its name and a random
	// suffix.
	newJobID func(spec *jobspec.Spec) string
	// amendOutlook amends a job's outlook after the planner has renewed
	// it from a batch of progress reports, and at submission (when it is
	// nil: the hook may set it) before the job's deadline admission; nil:
	// none. amendsTargets says that it sets the outlook of every job's
	// target itself, so the planner does not estimate it from the reports.
	amendOutlook  func(j *structs.Job)
	amendsTargets bool
}

// An Option sets one of a planner's hooks (With).
type Option func(*hooks)

// With sets opts on p, which it returns, as it is made and before its
// first round or request: pl := (&planner.Planner{...}).With(...).
func (p *Planner) With(opts ...Option) *Planner {
	for _, o := range opts {
		o(&p.hooks)
	}
	return p
}

// WithClock makes now the planner's clock instead of time.Now: the
// simulator's simulated time, a test's clock that stands still.
func WithClock(now func() time.Time) Option {
	return func(h *hooks) { h.now = now }
}

// WithJobIDs names each job id(spec) at submission instead of its name
// and a random suffix: the simulator keeps the trace's IDs, which are
// unique, so that the policy sees the jobs by them and the queue's order
// (Submitted, ID) is the same in every run.
func WithJobIDs(id func(spec *jobspec.Spec) string) Option {
	return func(h *hooks) { h.newJobID = id }
}

// WithOutlooks has amend amend a job's outlook after the planner has
// renewed it from a batch of progress reports, and at submission before
// the job's deadline admission: the simulator puts there the speedup and
// remaining work its job models know (where the planner would estimate
// them from the reports, or at submission from an earlier run). With
// targets, amend sets the outlook of every job's target itself, and the
// planner does not estimate it from the reports (the simulator's models
// know each job's remaining work; fitting a curve at each of thousands of
// reports was a sixth of a deadline replay, all of it overwritten).
func WithOutlooks(amend func(j *structs.Job), targets bool) Option {
	return func(h *hooks) { h.amendOutlook, h.amendsTargets = amend, targets }
}
