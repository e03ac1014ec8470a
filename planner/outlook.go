package planner

import (
	"fmt"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/assess"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// renewOutlook reads job j's progress history again after a batch of
// reports received at now (see structs.Outlook); largest is the GPUs of
// the cluster's largest node, the limit of a gpus = "auto" job without a
// max. A target that starts or stops looking reachable by its deadline
// gets an event. Without targets, the target's outlook is left to the
// caller (WithOutlooks's targets). It also renews the batch the planner
// advises a job with a batch block (structs.Job.Batch) for the GPUs it
// holds, from the same fit as the co-adapted speedup table.
func renewOutlook(j *structs.Job, now time.Time, largest int, targets bool) {
	if j.Progress == nil {
		return
	}
	prev := j.Outlook
	hist := j.Progress.History
	spec := &j.Spec.GPUs
	pw := max(1, spec.PerWorker)
	maxG := maxGPUs(&j.Spec, largest)
	o := &structs.Outlook{Updated: now}
	all := assess.Throughputs(hist)
	// The scaling is fitted on one GPU model's reports (see
	// assess.FitModel), the speed per GPU kept for each model.
	obs := assess.OfModel(all, assess.FitModel(all, j.GPUModel))
	sc := assess.ChooseGPUs(obs, assess.Counts{Min: spec.Min, Max: maxG, PerWorker: pw}, assess.DefaultThreshold)
	if !sc.Measuring {
		o.Speedup = sc.Speedup
	}
	// A job that follows the batch advice is worth, on each count, its
	// goodput at the best batch for that count (Pollux's co-adaptation).
	var tab []float64
	j.Batch, tab = assess.Batch(j.Spec.Batch, obs, j.Progress.NoiseScale, j.GPUs(), maxG)
	if tab != nil {
		o.Speedup = tab
	}
	o.Rates = modelRates(prev, assess.PerGPU(all, o.Speedup), j.GPUModel, now)
	o.RestartSeconds, o.RestartAt = measureRestart(j, prev)
	if spec.Auto {
		o.GPUs = &structs.GPUAssessment{Choice: sc.GPUs, Measuring: sc.Measuring, Reason: sc.Reason}
		if n := len(sc.Points); n > 0 {
			o.GPUs.Measured = sc.Points[n-1].GPUs
		}
	}
	if t := j.Spec.Target; t != nil {
		if _, ok := j.Progress.Metrics[t.Metric]; !ok && j.Progress.Reports >= silentReports {
			j.WarnOnce(now, fmt.Sprintf("target metric %q not reported in %d progress reports: the planner cannot judge the target (report it with metric=%q)",
				t.Metric, silentReports, t.Metric))
		}
		if !targets {
			j.Outlook = o
			return
		}
		o.Target = targetOutlook(j, t, prev, o.Speedup, maxG, now)
		was := ""
		if prev != nil && prev.Target != nil {
			was = prev.Target.Reachable
		}
		switch is := o.Target.Reachable; {
		case is == "no" && was != "no":
			j.AddEvents(structs.Event{Time: now, Type: structs.EventWarning,
				Message: "target looks unreachable by the deadline: " + o.Target.Reason})
		case is == "yes" && was == "no":
			j.AddEvents(structs.Event{Time: now, Type: "target",
				Message: "target looks reachable by the deadline again: " + o.Target.Reason})
		}
	}
	j.Outlook = o
}

// measureRestart returns what job j's last change of GPUs cost it, from
// its progress reports, and that change's time: training stopped at the
// step of the last report before the change (0 before any) and, at the
// rate of the first two reports after it, went on from there at the
// first report's step less what that rate ran since; the restart is from
// the change to then, at most to the first report (a job that went back
// to an older checkpoint lost more, which the rate cannot see). The
// result is the mean with prev's measure. A change is measured once,
// when two reports after it show progress; a stop is not measured;
// until then prev's measure stands.
func measureRestart(j *structs.Job, prev *structs.Outlook) (float64, time.Time) {
	var secs float64
	var at time.Time
	if prev != nil {
		secs, at = prev.RestartSeconds, prev.RestartAt
	}
	n := len(j.History)
	if n == 0 || j.History[n-1].GPUs <= 0 || !j.History[n-1].Time.After(at) {
		return secs, at
	}
	change := j.History[n-1].Time
	hist := j.Progress.History
	i := slices.IndexFunc(hist, func(r structs.ProgressReport) bool { return r.Time.After(change) })
	if i < 0 || i+1 >= len(hist) {
		return secs, at
	}
	var stopped int64
	if i > 0 {
		stopped = hist[i-1].Step
	}
	a, b := hist[i], hist[i+1]
	dt := b.Time.Sub(a.Time).Seconds()
	if dt <= 0 || b.Step <= a.Step {
		return secs, at
	}
	rate := float64(b.Step-a.Step) / dt
	first := a.Time.Sub(change).Seconds()
	m := min(max(first-float64(a.Step-stopped)/rate, 0), first, policy.MaxRestartSeconds)
	if secs > 0 {
		m = (secs + m) / 2
	}
	return m, change
}

// silentReports is how many progress reports without the target's metric
// earn a job a warning.
const silentReports = 20

// targetOutlook is how job j stands against target t at now; prev is the
// job's last outlook. The goal is reached for good when the metric first
// reaches it (the goal's delivery records that): a noisy metric that dips
// after has still met its target.
func targetOutlook(j *structs.Job, t *jobspec.Target, prev *structs.Outlook, speedup []float64, maxG int, now time.Time) *structs.TargetOutlook {
	hist := j.Progress.History
	if d := j.Delivery(structs.TierGoal); d != nil {
		out := &structs.TargetOutlook{Status: structs.OutlookReached,
			Reason: fmt.Sprintf("%s reached %.4g at step %d (goal %g)", t.Metric, d.Value, d.Step, t.Goal)}
		if prev != nil && prev.Target != nil && prev.Target.WorkToGoal > 0 {
			out.WorkToGoal = prev.Target.WorkToGoal
		} else {
			out.WorkToGoal = workDone(hist, speedup, max(1, j.Spec.GPUs.PerWorker))
		}
		return out
	}
	est := assess.ToGoal(hist, assess.Goal{Metric: t.Metric, Value: t.Goal, Lower: t.Lower})
	out := &structs.TargetOutlook{Status: est.Status.String(), Reason: est.Reason}
	deadline := j.Deadline()
	switch est.Status {
	case assess.Unreachable:
		if !deadline.IsZero() {
			out.Reachable = "no"
		}
	case assess.Estimated:
		g := 0
		if n := len(hist); n > 0 {
			g = hist[n-1].WorldSize
		}
		if g <= 0 {
			g = j.GPUs()
		}
		out.Remaining, out.Unit, out.GPUs = est.Remaining, string(est.Unit), g
		out.RemainingWork = assess.RemainingWork(est.Remaining, est.Rate, policy.SpeedupAt(speedup, g))
		if out.RemainingWork <= 0 {
			break
		}
		at := func(g int) time.Duration {
			return time.Duration(out.RemainingWork / policy.SpeedupAt(speedup, g) * float64(time.Second))
		}
		out.ETA = now.Add(at(g))
		// The time left is ETA's alone: a reason written now would say
		// "about 8s" while the same estimate read 3 s later is 5 s away.
		out.Reason = fmt.Sprintf("at %s: %s", policy.GPUs(g), est.Reason)
		if !deadline.IsZero() {
			out.Reachable = "yes"
			if now.Add(at(maxG)).After(deadline) {
				out.Reachable = "no"
				out.Reason = fmt.Sprintf("about %s to %s %g even at %s, %s to the deadline (%s)",
					at(maxG).Round(time.Second), t.Metric, t.Goal, policy.GPUs(maxG), deadline.Sub(now).Round(time.Second), est.Reason)
			}
		}
	}
	return out
}

// workDone is the training a job's history records, in seconds on one GPU:
// the time between reports, each at the speedup of the GPUs the job then
// held (its world size; one worker's where not reported; linear where the
// table is unknown).
func workDone(hist []structs.ProgressReport, speedup []float64, perWorker int) float64 {
	w := 0.0
	for i := 1; i < len(hist); i++ {
		g := hist[i].WorldSize
		if g <= 0 {
			g = perWorker
		}
		w += hist[i].Time.Sub(hist[i-1].Time).Seconds() * policy.SpeedupAt(speedup, g)
	}
	return w
}

// maxGPUs is the most GPUs a job may hold: its max, or for gpus = "auto"
// without one, a whole node of the largest kind in whole workers.
func maxGPUs(spec *jobspec.Spec, largest int) int {
	pw := max(1, spec.GPUs.PerWorker)
	if spec.GPUs.Max > 0 {
		return spec.GPUs.Max
	}
	return max(spec.GPUs.Min, largest-largest%pw)
}

// autoMax is the most GPUs the policies may give job j, of gpus = "auto",
// now: its min until its throughput is measured, then at most twice the
// largest count measured (so each new count is measured before the next),
// and at most the count it was assessed to be worth; never above the
// largest node or its max, never below its min.
func autoMax(j *structs.Job, largest int) int {
	r := j.Spec.GPUs
	pw := max(1, r.PerWorker)
	hi := maxGPUs(&j.Spec, largest)
	var a *structs.GPUAssessment
	if j.Outlook != nil {
		a = j.Outlook.GPUs
	}
	switch {
	case a == nil || a.Measured == 0:
		hi = r.Min
	case a.Measuring:
		hi = min(hi, 2*a.Measured)
	default:
		hi = min(hi, 2*a.Measured, a.Choice)
	}
	return max(r.Min, hi-hi%pw)
}

// applyOutlook puts what the outlook of job j says into its view pj:
// the measured speedup and the work left to its target (less what it did since the outlook, at the GPUs it
// holds).
func applyOutlook(pj *policy.Job, j *structs.Job, now time.Time) {
	o := j.Outlook
	if o == nil {
		return
	}
	pj.Speedup = o.Speedup
	pj.RestartSeconds = min(max(o.RestartSeconds, 0), policy.MaxRestartSeconds)
	if o.ByModel != nil {
		pj.ByModel = o.ByModel
	}
	t := o.Target
	if t == nil {
		return
	}
	pj.Progress.Reached = t.Status == structs.OutlookReached
	if t.Status == structs.OutlookEstimated && t.RemainingWork > 0 {
		done := now.Sub(o.Updated).Seconds() * policy.SpeedupAt(o.Speedup, pj.Allocation.Total())
		pj.Progress.RemainingWork = max(t.RemainingWork-done, 1)
	}
}
