//go:build e2e

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// chaosStall is the gap between two progress records that counts as
// training stopped (a step takes about 0.35 s; an elastic reset a few).
const chaosStall = 5 * time.Second

// chaosOutcome is what one injected fault came to.
type chaosOutcome struct {
	f          *chaosFault
	detected   time.Duration // -1: the planner said nothing
	by         string
	recovered  time.Duration // -1: an affected job never trained again
	lost, dups []string
}

// report is the run's table per fault kind, each fault, the jobs' ends
// and the violations, as text.
func (r *chaosRun) report(wall time.Duration) string {
	outcomes := r.outcomes()
	var b strings.Builder
	fmt.Fprintf(&b, "Chaos run: seed %d, %g minutes of faults, %s wall time; rerun: %s\n\n", r.cfg.seed, r.cfg.length.Minutes(), wall.Round(time.Second), chaosRerun(r.cfg))
	b.WriteString("| fault | injected | detected after (s) | recovered after (s) | jobs affected | lost | duplicated |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, kind := range chaosFaultKinds {
		var of []chaosOutcome
		for _, o := range outcomes {
			if o.f.plan.kind == kind {
				of = append(of, o)
			}
		}
		b.WriteString(chaosRow(kind, of))
	}
	b.WriteString("\nEach fault (time from the start of the schedule):\n")
	for _, o := range outcomes {
		fmt.Fprintf(&b, "  %6.0fs %-13s %-22s hold %3.0fs  detected %s  recovered %s  jobs %v\n",
			o.f.injected.Sub(r.start).Seconds(), o.f.plan.kind, o.f.target, o.f.plan.hold.Seconds(),
			chaosSecs(o.detected, o.by), chaosSecs(o.recovered, ""), o.f.affected)
	}
	r.mu.Lock()
	for _, f := range r.faults {
		if f.skipped != "" {
			fmt.Fprintf(&b, "  skipped: %s (%s)\n", f.plan.kind, f.skipped)
		}
	}
	r.mu.Unlock()
	b.WriteString("\nThe leading planner (time from the start of the schedule):\n")
	b.WriteString(r.leaders.timeline(r.start))
	b.WriteString("\nJobs:\n")
	b.WriteString(r.jobLines())
	vs := r.checker.found()
	fmt.Fprintf(&b, "\nInvariants checked %d times; violations: %d\n", r.checker.checks, len(vs))
	for _, v := range vs {
		fmt.Fprintf(&b, "  %s %s %s: %s\n", v.at.Format(time.TimeOnly), v.invariant, v.job, v.detail)
	}
	return b.String()
}

// chaosRow is the table's row for one kind of fault.
func chaosRow(kind string, of []chaosOutcome) string {
	if len(of) == 0 {
		return fmt.Sprintf("| %s | 0 | | | | | |\n", kind)
	}
	var detected, recovered []time.Duration
	jobs, lost, dups := 0, 0, 0
	for _, o := range of {
		detected = append(detected, o.detected)
		recovered = append(recovered, o.recovered)
		jobs += len(o.f.affected)
		lost += len(o.lost)
		dups += len(o.dups)
	}
	return fmt.Sprintf("| %s | %d | %s | %s | %d | %d | %d |\n", kind, len(of), chaosRange(detected), chaosRange(recovered), jobs, lost, dups)
}

// chaosRange is "min-max" of ds in seconds, with how many were never
// seen ("-": none seen at all).
func chaosRange(ds []time.Duration) string {
	var seen []time.Duration
	for _, d := range ds {
		if d >= 0 {
			seen = append(seen, d)
		}
	}
	if len(seen) == 0 {
		return "-"
	}
	lo, hi := slices.Min(seen), slices.Max(seen)
	s := fmt.Sprintf("%.1f", lo.Seconds())
	if hi != lo {
		s += fmt.Sprintf("-%.1f", hi.Seconds())
	}
	if n := len(ds) - len(seen); n > 0 {
		s += fmt.Sprintf(" (%d none)", n)
	}
	return s
}

func chaosSecs(d time.Duration, by string) string {
	if d < 0 {
		return "   -  "
	}
	if by != "" {
		return fmt.Sprintf("%5.1fs (%s)", d.Seconds(), by)
	}
	return fmt.Sprintf("%5.1fs", d.Seconds())
}

// outcomes measures each injected fault: detection from the planners'
// events, recovery from the affected jobs' progress files, and the
// affected jobs found lost or duplicated.
func (r *chaosRun) outcomes() []chaosOutcome {
	r.mu.Lock()
	faults := slices.Clone(r.faults)
	r.mu.Unlock()
	vs := r.checker.found()
	var out []chaosOutcome
	for _, f := range faults {
		if f.skipped != "" {
			continue
		}
		o := chaosOutcome{f: f, detected: -1, recovered: 0}
		if at, by := r.detect(f); !at.IsZero() {
			o.detected, o.by = at.Sub(f.injected), by
		}
		for _, id := range f.affected {
			if j := r.job(id); j != nil {
				o.recovered = chaosWorst(o.recovered, r.recoveredAfter(f, j))
			}
			for _, v := range vs {
				switch {
				case v.job != id || r.culprit(v, faults) != f:
				case v.invariant == "lost" || v.invariant == "not-ended" || v.invariant == "wrong-failure":
					o.lost = append(o.lost, id)
				case v.invariant == "duplicated" || v.invariant == "gpu-twice":
					o.dups = append(o.dups, id)
				}
			}
		}
		out = append(out, o)
	}
	return out
}

// culprit is the fault a violation of a job is counted against: the last
// that affected the job before the violation was seen, or before the job
// ended for those found at the end.
func (r *chaosRun) culprit(v chaosViolation, faults []*chaosFault) *chaosFault {
	at := v.at
	if j := r.checker.record(v.job); j != nil && !j.Finished.IsZero() && j.Finished.Before(at) {
		at = j.Finished
	}
	var last *chaosFault
	for _, f := range faults {
		if f.skipped == "" && f.injected.Before(at) && slices.Contains(f.affected, v.job) {
			last = f
		}
	}
	return last
}

// chaosWorst is the longer recovery (-1, never, is the longest).
func chaosWorst(a, b time.Duration) time.Duration {
	if a < 0 || b < 0 {
		return -1
	}
	return max(a, b)
}

// recoveredAfter is how long after f's injection job j trained again:
// the first progress record after its first stall (a gap of chaosStall)
// that began while f lasted or within a minute after; 0 when it never
// stalled; -1 when it stalled and never trained again without ending.
func (r *chaosRun) recoveredAfter(f *chaosFault, j *chaosJob) time.Duration {
	end := f.injected
	if !f.undone.IsZero() {
		end = f.undone
	}
	prev := f.injected
	for _, rec := range readProgress(r.t, j.progress) {
		at := time.Unix(0, int64(rec.Time*float64(time.Second)))
		if at.Before(f.injected) {
			continue
		}
		if at.Sub(prev) >= chaosStall {
			return at.Sub(f.injected)
		}
		if at.After(end.Add(time.Minute)) {
			return 0
		}
		prev = at
	}
	if rec := r.checker.record(j.id); rec != nil && rec.State == structs.JobComplete {
		return 0 // ended before it needed to
	}
	if time.Since(prev) < chaosStall {
		return 0
	}
	return -1
}

// jobLines lists each job: its kind, how it ended, its retries.
func (r *chaosRun) jobLines() string {
	var b strings.Builder
	for _, id := range r.submitted() {
		j, rec := r.job(id), r.checker.record(id)
		state, retries, last := "unknown", 0, ""
		if rec != nil {
			state, retries = string(rec.State), rec.Retries
			if rec.State != structs.JobComplete {
				last = chaosLastEvents(rec, 1)
			}
		}
		fmt.Fprintf(&b, "  %-28s %-9s %-6s queue %s  %d..%d GPUs  %-8s retries %d  %s\n",
			id, j.plan.launcher, j.plan.pool, j.plan.queue, j.plan.min, j.plan.max, state, retries, last)
	}
	return b.String()
}

// writeReport writes the report to .cache/chaos/ in the repository.
func (r *chaosRun) writeReport(report string) {
	dir := filepath.Join(r.cl.root, ".cache", "chaos")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		r.t.Errorf("failed to create %s: %v", dir, err)
		return
	}
	path := filepath.Join(dir, fmt.Sprintf("chaos-seed%d-%gm-%s.md", r.cfg.seed, r.cfg.length.Minutes(), time.Now().UTC().Format("20060102T150405Z")))
	if err := os.WriteFile(path, []byte(report), 0o644); err != nil {
		r.t.Errorf("failed to write the chaos report: %v", err)
		return
	}
	r.t.Logf("chaos: the report is in %s", path)
}
