package planner

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// HealthWatch is how the planner judges each running job's health every
// round (watchHealth): whether it trains on the GPUs it holds.
//
//   - stalled: it has reported progress before (through the SDK), and no
//     report has come for StalledAfter, or for three of its usual gaps
//     between reports if that is longer (a script that reports once an
//     epoch is not stalled between two), counted from the latest of its
//     last report, its last GPU change and the time this planner began
//     to watch (a new leader gives the SDKs time to find it). A job that
//     never reported is never stalled: its script may not use the SDK.
//   - degraded: its last report, received after its last GPU change, says
//     it trains at a world size below its GPUs, DegradedAfter after that
//     change; or Nomad has not placed all of it (the unplaced event) for
//     DegradedAfter, since the event and since that change.
//
// A job stalled or degraded for ActAfter is acted on: a stalled one is
// stopped and requeued from its last checkpoint (counted against
// Planner.Retries); a degraded one is shrunk in place to what it trains on
// when it is elastic and that is at least its min, else requeued so.
type HealthWatch struct {
	StalledAfter  time.Duration
	DegradedAfter time.Duration
	ActAfter      time.Duration
}

// stallGaps is how many of a job's usual gaps between reports pass
// before it is stalled, when that is longer than StalledAfter; the gap is
// the median of its last gapReports reports' gaps.
const (
	stallGaps  = 3
	gapReports = 9
)

// cause is what a job's health was judged on, for the action it takes.
type cause int

const (
	causeNone cause = iota
	causeStalled
	causeWorldSize
	causeUnplaced
)

// verdict is a running job's health at a round, and its cause.
type verdict struct {
	health structs.Health
	cause  cause
}

// judge is running job j's health at now; watching is when this planner
// began to watch.
func (w *HealthWatch) judge(j *structs.Job, now, watching time.Time) verdict {
	changed := j.LastChange()
	if pr := j.Progress; pr != nil && pr.Reports > 0 {
		from := latest(pr.Updated, changed, watching)
		if bound := w.stallBound(pr); now.Sub(from) > bound {
			return verdict{cause: causeStalled, health: structs.Health{State: structs.HealthStalled, Since: from.Add(bound),
				Reason: fmt.Sprintf("no progress report for more than %s (the last at step %d)", bound, pr.Step)}}
		}
		gpus := j.GPUs()
		if pr.WorldSize > 0 && pr.WorldSize < gpus && pr.Updated.After(changed) && now.Sub(changed) > w.DegradedAfter {
			return verdict{cause: causeWorldSize, health: structs.Health{State: structs.HealthDegraded, Since: changed.Add(w.DegradedAfter),
				Reason: fmt.Sprintf("trains at world size %d on %s", pr.WorldSize, policy.GPUs(gpus))}}
		}
	}
	if msg, at := lastUnplacedAt(j); msg != "" {
		// Counted from its last GPU change too: the message may be older.
		if at = latest(at, changed); now.Sub(at) > w.DegradedAfter {
			return verdict{cause: causeUnplaced, health: structs.Health{State: structs.HealthDegraded, Since: at.Add(w.DegradedAfter),
				Reason: msg}}
		}
	}
	return verdict{health: structs.Health{State: structs.HealthOK}}
}

// stallBound is how long a job whose progress is pr may go without a
// report before it is stalled.
func (w *HealthWatch) stallBound(pr *structs.Progress) time.Duration {
	h := pr.History[max(0, len(pr.History)-gapReports):]
	if len(h) < 3 {
		return w.StalledAfter
	}
	gaps := make([]time.Duration, 0, len(h)-1)
	for i := 1; i < len(h); i++ {
		gaps = append(gaps, h[i].Time.Sub(h[i-1].Time))
	}
	slices.Sort(gaps)
	return max(w.StalledAfter, stallGaps*gaps[len(gaps)/2])
}

// watchHealth judges every running job of live (see HealthWatch),
// records each change of its health with an event, and acts on the jobs
// stalled or degraded for ActAfter. unplaced is the round's outcomes of
// the jobs Nomad has not placed in full, by ID. It replaces the records
// of live it changes, and returns the errors of the jobs it could not
// record or act on (the next round tries again).
func (p *Planner) watchHealth(ctx context.Context, live []*structs.Job, unplaced map[string]Outcome, now time.Time) []error {
	if p.watching.IsZero() {
		p.watching = now
	}
	var errs []error
	for i, j := range live {
		if j.State != structs.JobRunning {
			continue
		}
		v := p.Watch.judge(j, now, p.watching)
		next, err := p.noteHealth(ctx, j, v.health, now)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v.cause != causeNone && now.Sub(v.health.Since) >= p.Watch.ActAfter {
			next, err = p.actOnHealth(ctx, next, v, unplaced[j.ID], now)
			if err != nil {
				errs = append(errs, err)
			}
		}
		live[i] = next
	}
	return errs
}

// noteHealth records job j's health h when its state has changed, with
// an event (degraded, stalled, healthy), and returns the record as stored.
func (p *Planner) noteHealth(ctx context.Context, j *structs.Job, h structs.Health, now time.Time) (*structs.Job, error) {
	if structs.HealthOf(j) == h.State {
		return j, nil
	}
	next := j.Clone() // the store's own where shared
	err := p.update(ctx, next, func(j *structs.Job) error {
		if structs.HealthOf(j) == h.State {
			return nil // said since j was read
		}
		if h.State == structs.HealthOK {
			j.Health = nil
			j.AddEvents(structs.Event{Time: now, Type: structs.EventHealthy, Message: "trains again on the GPUs it holds"})
			return nil
		}
		c := h
		j.Health = &c
		j.AddEvents(structs.Event{Time: now, Type: string(h.State), Message: fmt.Sprintf(
			"%s: %s; the planner acts if it lasts %s", h.State, h.Reason, p.Watch.ActAfter)})
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("failed to record the health of job %s: %w", j.ID, err)
	}
	if h.State == structs.HealthOK {
		p.Logger.Info("job healthy again", "job", j.ID)
	} else {
		p.Logger.Warn("job health", "job", j.ID, "health", h.State, "reason", h.Reason)
	}
	return next, nil
}

// actOnHealth acts on job j, stalled or degraded (v) for ActAfter: a
// degraded job is shrunk to what it trains on where it can be (shrinkTo),
// and any other is stopped and requeued (counted against its retries).
// out is the round's outcome of a job Nomad has not placed in full.
func (p *Planner) actOnHealth(ctx context.Context, j *structs.Job, v verdict, out Outcome, now time.Time) (*structs.Job, error) {
	why := fmt.Sprintf("%s for %s: %s", v.health.State, p.Watch.ActAfter, v.health.Reason)
	if keep, ok := shrinkTo(j, v, out); ok {
		return p.shrinkDegraded(ctx, j, keep, why, now)
	}
	kind := structs.RequeueStalled
	if v.cause != causeStalled {
		kind = structs.RequeueDegraded
	}
	stopped := j.Clone()
	if err := p.Actuator.Apply(ctx, stopped, nil); err != nil {
		return j, fmt.Errorf("failed to stop %s job %s: %w", v.health.State, j.ID, err)
	}
	return p.requeue(ctx, stopped, kind, why+"; stopped", -1, now)
}

// shrinkTo is the allocation a degraded job j is shrunk to, and whether
// it may be: an elastic job (min < max) without its unplaced workers
// (causeUnplaced; not when its launcher is unplaced), or down to its
// reported world size (causeWorldSize: GPUs are taken first from the
// nodes where it holds the fewest, since which of its workers do not
// train is not known), when that is at least its min.
func shrinkTo(j *structs.Job, v verdict, out Outcome) (policy.Allocation, bool) {
	g := j.Spec.GPUs
	if g.Min >= g.Max {
		return nil, false
	}
	keep := policy.Allocation(maps.Clone(j.Allocation))
	switch v.cause {
	case causeUnplaced:
		if out.UnplacedLauncher || len(out.UnplacedGPUs) == 0 {
			return nil, false
		}
		for node, n := range out.UnplacedGPUs {
			keep[node] -= min(n, keep[node])
		}
	case causeWorldSize:
		per := max(g.PerWorker, 1)
		drop := j.GPUs() - j.Progress.WorldSize/per*per
		nodes := slices.SortedFunc(maps.Keys(keep), func(a, b string) int {
			return cmp.Or(cmp.Compare(keep[a], keep[b]), cmp.Compare(b, a))
		})
		for _, node := range nodes {
			n := min(drop, keep[node])
			keep[node] -= n
			drop -= n
		}
	default:
		return nil, false
	}
	maps.DeleteFunc(keep, func(_ string, n int) bool { return n <= 0 })
	total := keep.Total()
	return keep, total >= g.Min && total > 0 && total < j.GPUs()
}

// shrinkDegraded shrinks degraded job j in place to keep, and records it
// (a GPU change and a shrink event saying why).
func (p *Planner) shrinkDegraded(ctx context.Context, j *structs.Job, keep policy.Allocation, why string, now time.Time) (*structs.Job, error) {
	next := j.Clone()
	from := j.GPUs()
	if err := p.Actuator.Apply(ctx, next, keep); err != nil {
		return j, fmt.Errorf("failed to shrink degraded job %s: %w", j.ID, err)
	}
	reason := "health watch: " + why
	carry := actuated(next)
	err := p.update(ctx, next, func(j *structs.Job) error {
		carry(j)
		accrue(j, now)
		j.Allocation = maps.Clone(map[string]int(keep))
		j.Health = nil
		j.AddChange(structs.GPUChange{Time: now, GPUs: keep.Total(), Nodes: j.Allocation, Reason: reason})
		j.AddEvents(structs.Event{Time: now, Type: string(policy.Shrink),
			Message: fmt.Sprintf("shrink: %d -> %s (%s)", from, policy.GPUs(keep.Total()), reason)})
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("failed to record the shrink of degraded job %s: %w", j.ID, err)
	}
	p.Logger.Warn("degraded job shrunk to what it trains on", "job", j.ID, "gpus", keep.Total(), "reason", why)
	return next, nil
}

// latest is the latest of ts.
func latest(ts ...time.Time) time.Time {
	var l time.Time
	for _, t := range ts {
		if t.After(l) {
			l = t
		}
	}
	return l
}

// dropEnded is live without the jobs that have ended (the watch failed
// them: their retries were spent), and ran and placed, which go with it,
// without theirs.
func dropEnded(live []*structs.Job, ran, placed []bool) ([]*structs.Job, []bool, []bool) {
	k := 0
	for i, j := range live {
		if j.State.Terminal() {
			continue
		}
		live[k], ran[k], placed[k] = j, ran[i], placed[i]
		k++
	}
	return live[:k], ran[:k], placed[:k]
}
