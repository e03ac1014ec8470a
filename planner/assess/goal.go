package assess

import (
	"fmt"
	"math"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// MinReports is how many reports of the target's metric ToGoal needs for
// an estimate.
const MinReports = 4

// minCurveReports is how many it needs to fit the learning curve (three
// parameters) rather than a straight line.
const minCurveReports = 6

// Goal is what the metric should reach: Metric (the name the training
// reports, as jobspec.Target.Metric) at Value (Target.Goal, or *Target.Tier1
// for the first tier), Lower when lower is better (a loss).
type Goal struct {
	Metric string
	Value  float64
	Lower  bool
}

// Unit is what ToGoal measures work in.
type Unit string

const (
	// Samples measures work in training samples, all workers together
	// (the x axis when the job reports samples_per_sec).
	Samples Unit = "samples"
	// Steps measures work in training steps (the fallback when it never
	// does).
	Steps Unit = "steps"
)

// Status is the kind of answer ToGoal gives.
type Status int

const (
	// Unknown means too few reports (or no progress between them) to say.
	Unknown Status = iota
	// Estimated means Remaining is the work left.
	Estimated
	// Reached means the metric's latest value is at or past the goal.
	Reached
	// Unreachable means the metric levels off short of the goal (by the
	// fitted curve), or it has stopped improving.
	Unreachable
)

func (s Status) String() string {
	switch s {
	case Estimated:
		return "estimated"
	case Reached:
		return "reached"
	case Unreachable:
		return "unreachable"
	default:
		return "unknown"
	}
}

// Estimate is ToGoal's answer.
type Estimate struct {
	Status Status
	// Remaining is the work left until the goal, in Unit; > 0 when
	// Estimated, 0 otherwise.
	Remaining float64
	// Unit is Samples or Steps; "" when ToGoal stopped before reading
	// the progress (no reports, too few, or reached).
	Unit Unit
	// Rate is the job's latest rate in Unit per second (0: unknown): its
	// last reported samples_per_sec, or its recent steps per second. It is
	// the throughput RemainingWork wants.
	Rate float64
	// Points is how many reports of the metric the estimate rests on.
	Points int
	// Method is "curve" (the learning curve) or "trend" (a straight line
	// through the recent reports); "" when nothing was fitted.
	Method string
	// Reason says in one line how, for events and `job status`.
	Reason string
}

// ToGoal estimates the training left before the metric goal.Metric
// reaches goal.Value, from the job's progress history (oldest first, as
// structs.Progress.History; only reports whose Metric has that name count
// as points, and the Loss field is not read).
//
// Work is measured in samples: the x axis is the samples processed since
// the first report, each interval between reports counted as the
// samples_per_sec reported at its end times its duration (exact when the
// script reports its mean rate since the previous report; over a thinned
// stretch of history, the rate at the end stands for the whole stretch).
// So a rescale (throughput jumps) keeps the axis right. Where that is
// implausible (more than 4 times the samples per step the job usually
// does at that world size: it was paused or queued between the reports),
// or the rate is missing, the interval counts its steps times the usual
// samples per step. A step that goes back (a restart from a checkpoint) takes the axis
// back to where it was at that step. If the job never reports
// samples_per_sec, the axis is the step.
//
// Decision, in order:
//   - Reached if the latest value of the metric is at or past the goal;
//   - Unknown with fewer than MinReports (4) reports of the metric;
//   - with at least 6, the learning curve m(x) = A - B*exp(-x/tau) (B > 0;
//     mirrored for lower-is-better) is fitted by least squares (tau by a
//     1-D search, A and B linear). If it fits (R² >= 0.6, and tau shorter
//     than 10 times the span of the points, else the curvature is not
//     seen yet) then: Unreachable if the goal is at or beyond the
//     asymptote A; else Estimated, the work to where the curve crosses
//     the goal;
//   - otherwise (few points, a poor fit, or a curve that crosses the goal
//     before now while the reported value has not reached it), a straight
//     line through the last third of the points (at least 4): Unreachable
//     if it does not improve, else Estimated at that slope.
func ToGoal(history []structs.ProgressReport, goal Goal) Estimate {
	sign := 1.0
	if goal.Lower {
		sign = -1
	}
	var idx []int
	for i, r := range history {
		if m := r.Metric; m != nil && m.Name == goal.Metric && finite(m.Value) {
			idx = append(idx, i)
		}
	}
	name := goal.Metric
	if !finite(goal.Value) {
		return Estimate{Reason: fmt.Sprintf("the goal for %s is not a number (%v)", name, goal.Value)}
	}
	if len(idx) == 0 {
		return Estimate{Reason: fmt.Sprintf("no reports of %s yet", name)}
	}
	now := history[idx[len(idx)-1]].Metric.Value
	if sign*now >= sign*goal.Value {
		return Estimate{Status: Reached, Points: 1,
			Reason: fmt.Sprintf("%s %s has reached the goal %s", name, num(now), num(goal.Value))}
	}
	if len(idx) < MinReports {
		return Estimate{Points: len(idx),
			Reason: fmt.Sprintf("only %d report(s) of %s so far; need %d", len(idx), name, MinReports)}
	}

	xs, unit, rate := axis(history)
	est := Estimate{Unit: unit, Rate: rate}
	px := make([]float64, len(idx))
	py := make([]float64, len(idx))
	for k, i := range idx {
		px[k] = xs[i]
		py[k] = sign * history[i].Metric.Value
	}
	lo, hi := px[0], px[0]
	for _, x := range px {
		lo, hi = min(lo, x), max(hi, x)
	}
	if !(hi > lo) {
		est.Reason = fmt.Sprintf("no training progress between the %d reports of %s", len(idx), name)
		return est
	}
	xNow := xs[len(xs)-1]
	g := sign * goal.Value
	state := fmt.Sprintf("%s %s, goal %s", name, num(now), num(goal.Value))

	why := "too few reports for a curve"
	if len(idx) >= minCurveReports {
		c := fitCurve(px, py)
		switch {
		case !(c.B > 0):
			why = "no learning curve in the reports"
		case c.R2 < 0.6:
			why = fmt.Sprintf("the curve fits poorly, R² %.2f", c.R2)
		case c.Edge:
			why = "no curvature yet"
		case g >= c.A:
			est.Status, est.Points, est.Method = Unreachable, len(idx), "curve"
			est.Reason = fmt.Sprintf("unreachable: %s levels off at %s on the fitted curve (%s; %d reports)",
				name, num(sign*c.A), state, len(idx))
			return est
		default:
			x := c.X0 - c.Tau*math.Log((c.A-g)/c.B)
			if left := x - xNow; left > 0 {
				est.Status, est.Remaining, est.Points, est.Method = Estimated, left, len(idx), "curve"
				est.Reason = fmt.Sprintf("%s %s to go (%s; the fitted curve levels off at %s; %d reports)",
					amount(left), unit, state, num(sign*c.A), len(idx))
				return est
			}
			why = "the fitted curve is already past the goal"
		}
	}

	w := max(MinReports, len(idx)/3)
	tx, ty := px[len(px)-w:], py[len(py)-w:]
	a, b, ok := line(tx, ty)
	est.Points, est.Method = w, "trend"
	if !ok {
		est.Method = ""
		est.Reason = fmt.Sprintf("no training progress between the last %d reports of %s", w, name)
		return est
	}
	if !(b > 0) {
		est.Status = Unreachable
		est.Reason = fmt.Sprintf("unreachable at the current trend: %s has not improved over the last %d reports (%s; %s)",
			name, w, state, why)
		return est
	}
	left := (g - (a + b*xNow)) / b
	if !(left > 0) { // the line is past the goal, the latest value is not
		left = (g - ty[len(ty)-1]) / b
	}
	est.Status, est.Remaining = Estimated, left
	est.Reason = fmt.Sprintf("%s %s to go at the trend of the last %d reports (%s; %s)",
		amount(left), unit, w, state, why)
	return est
}

// RemainingWork converts work left (as Estimate.Remaining) into
// policy.Progress.RemainingWork, seconds of training on one GPU:
//
//	RemainingWork = remaining / throughput * speedup
//
// throughput is the job's rate, in remaining's unit per second (as
// Estimate.Rate), measured at some GPU count g, and speedup is the
// job's speedup at g (policy.SpeedupAt(table, g)). At g GPUs the job then needs
// remaining/throughput = RemainingWork/speedup seconds, which is how
// policies read it. Take g as the count the throughput was measured at
// (the last report's world_size times per_worker), which is not the count
// the job holds now if it was resized or stopped since. It returns 0
// (unknown, for policies) unless all three are positive numbers.
func RemainingWork(remaining, throughput, speedup float64) float64 {
	if !positive(remaining) || !positive(throughput) || !positive(speedup) {
		return 0
	}
	return remaining / throughput * speedup
}

// pauseFactor: an interval whose samples per step exceed this many times
// the job's usual is taken as a pause (see ToGoal).
const pauseFactor = 4

// axis is the x of every report in h (see ToGoal), its unit, and the
// latest rate in that unit per second: in samples where the job reports
// samples_per_sec at all, else in steps.
func axis(h []structs.ProgressReport) (xs []float64, unit Unit, rate float64) {
	for _, r := range h {
		if _, ok := reportedRate(r); ok {
			xs, rate = samplesAxis(h)
			return xs, Samples, rate
		}
	}
	xs, rate = stepsAxis(h)
	return xs, Steps, rate
}

// reportedRate is r's samples per second, where it gives a usable one (a
// finite number above 0).
func reportedRate(r structs.ProgressReport) (float64, bool) {
	if r.SamplesPerSec == nil || !positive(*r.SamplesPerSec) {
		return 0, false
	}
	return *r.SamplesPerSec, true
}

// secondsBefore is the time from report i-1 to report i.
func secondsBefore(h []structs.ProgressReport, i int) float64 {
	return h[i].Time.Sub(h[i-1].Time).Seconds()
}

// stepsBefore is the steps from report i-1 to report i (negative after a
// restart from an earlier checkpoint).
func stepsBefore(h []structs.ProgressReport, i int) int64 { return h[i].Step - h[i-1].Step }

// stepsAxis is the axis of a job that never reports samples_per_sec: the
// steps since the first report; and its rate, the median steps per second
// over the last five intervals that moved forward (0 where none did), so
// that one paused interval does not sway it.
func stepsAxis(h []structs.ProgressReport) ([]float64, float64) {
	xs := make([]float64, len(h))
	for i := range h {
		xs[i] = float64(h[i].Step - h[0].Step)
	}
	var rs []float64
	for i := len(h) - 1; i >= 1 && len(rs) < 5; i-- {
		if stepsBefore(h, i) > 0 && secondsBefore(h, i) > 0 {
			rs = append(rs, float64(stepsBefore(h, i))/secondsBefore(h, i))
		}
	}
	rate := 0.0
	if len(rs) > 0 {
		rate = median(rs)
	}
	return xs, rate
}

// samplesAxis is the axis of a job that reports samples_per_sec (at
// least one of h does): the samples trained since the first report, an
// interval at a time (see nextX); and the latest rate reported.
func samplesAxis(h []structs.ProgressReport) ([]float64, float64) {
	xs := make([]float64, len(h))
	ws := worldSizes(h)
	per := usualSamplesPerStep(h, ws)
	rate := 0.0
	if r, ok := reportedRate(h[0]); ok {
		rate = r
	}
	for i := 1; i < len(h); i++ {
		xs[i] = nextX(h, xs, i, per.at(ws[i]), rate)
		if r, ok := reportedRate(h[i]); ok {
			rate = r
		}
	}
	return xs, rate
}

// worldSizes is the world size at each report, carried forward over the
// reports that give none (0 before the first that does).
func worldSizes(h []structs.ProgressReport) []int {
	ws := make([]int, len(h))
	cur := 0
	for i, r := range h {
		if r.WorldSize > 0 {
			cur = r.WorldSize
		}
		ws[i] = cur
	}
	return ws
}

// samplesPerStep is how many samples a step usually holds: at each world
// size (usual), and over every size (fallback, 0 with no interval at
// all) for a size with no interval of its own.
type samplesPerStep struct {
	usual    map[int]float64
	fallback float64
}

// at is the usual samples per step at world size ws.
func (s samplesPerStep) at(ws int) float64 {
	if b, ok := s.usual[ws]; ok {
		return b
	}
	return s.fallback
}

// usualSamplesPerStep measures samplesPerStep from the intervals of h
// that report a rate, move forward in steps and time, and do not
// straddle a change of world size (ws, see worldSizes): the rate times
// the seconds over the steps, the median of each size's intervals.
func usualSamplesPerStep(h []structs.ProgressReport, ws []int) samplesPerStep {
	per := map[int][]float64{}
	var all []float64
	for i := 1; i < len(h); i++ {
		r, ok := reportedRate(h[i])
		if !ok || stepsBefore(h, i) <= 0 || secondsBefore(h, i) <= 0 || ws[i] != ws[i-1] {
			continue
		}
		b := r * secondsBefore(h, i) / float64(stepsBefore(h, i))
		per[ws[i]] = append(per[ws[i]], b)
		all = append(all, b)
	}
	s := samplesPerStep{usual: map[int]float64{}}
	for k, bs := range per {
		s.usual[k] = median(bs)
	}
	if len(all) > 0 {
		s.fallback = median(all)
	}
	return s
}

// nextX is where report i stands on the samples axis, given where the
// reports before it stand (xs[:i]), b the usual samples per step at its
// world size, and rate the latest rate reported before it. In order:
//   - a step back (a restart from a checkpoint) takes the axis back to
//     where it was at that step (see rewound);
//   - an interval without steps trained nothing;
//   - an interval with a rate counts it over its time, unless that is
//     more than pauseFactor times the usual samples for its steps (the
//     job was paused or queued between the reports);
//   - else its steps count the usual samples per step;
//   - else (no usual yet) its time counts at the latest rate;
//   - else it trained nothing that can be told.
func nextX(h []structs.ProgressReport, xs []float64, i int, b, rate float64) float64 {
	r, ok := reportedRate(h[i])
	d, t := float64(stepsBefore(h, i)), secondsBefore(h, i)
	switch {
	case d < 0:
		return rewound(h, xs, i, b)
	case d == 0:
		return xs[i-1]
	case ok && t > 0 && (b == 0 || r*t <= pauseFactor*b*d):
		return xs[i-1] + r*t
	case b > 0:
		return xs[i-1] + b*d
	case rate > 0 && t > 0:
		return xs[i-1] + rate*t
	}
	return xs[i-1]
}

// rewound is where report i, whose step went back, stands: the last
// report before it at or below its step, plus the steps beyond that one
// at b samples each (from the first report's step and the axis's start
// where every report before it is beyond its step).
func rewound(h []structs.ProgressReport, xs []float64, i int, b float64) float64 {
	j := i - 1
	for j >= 0 && h[j].Step > h[i].Step {
		j--
	}
	if j >= 0 {
		return xs[j] + b*float64(h[i].Step-h[j].Step)
	}
	return b * float64(h[i].Step-h[0].Step)
}

// curve is m(x) = A - B*exp(-(x-X0)/Tau), fitted with R²; Edge is true
// when Tau is at the top of the search range (no curvature seen).
type curve struct {
	A, B, Tau, X0, R2 float64
	Edge              bool
}

// fitCurve fits a curve to (xs, ys) (at least two distinct xs) by least
// squares: for each tau, A and B are a linear least-squares fit (B >= 0;
// a constant where the best B would be negative); tau is searched on a
// log grid from 1/100 to 10 times the span of xs, then refined by golden
// section between the grid's neighbours of the best point.
func fitCurve(xs, ys []float64) curve {
	x0, x1 := xs[0], xs[0]
	for _, x := range xs {
		x0, x1 = min(x0, x), max(x1, x)
	}
	span := x1 - x0
	var my float64
	for _, y := range ys {
		my += y
	}
	my /= float64(len(ys))
	var sst float64
	for _, y := range ys {
		sst += (y - my) * (y - my)
	}
	e := make([]float64, len(xs))
	// fit returns A, B and the squared error at tau = exp(lt) spans.
	fit := func(lt float64) (a, b, sse float64) {
		tau := math.Exp(lt)
		for i, x := range xs {
			e[i] = math.Exp(-(x - x0) / span / tau)
		}
		c0, c1, ok := line(e, ys)
		if !ok || c1 >= 0 { // y = c0 + c1*e: B = -c1 must be > 0
			return my, 0, sst
		}
		for i, y := range ys {
			d := y - (c0 + c1*e[i])
			sse += d * d
		}
		return c0, -c1, sse
	}
	const steps = 60
	lo, hi := math.Log(0.01), math.Log(10)
	at := func(k int) float64 { return lo + (hi-lo)*float64(k)/steps }
	bestK, bestE := 0, math.Inf(1)
	for k := 0; k <= steps; k++ {
		if _, _, sse := fit(at(k)); sse < bestE {
			bestK, bestE = k, sse
		}
	}
	lt := golden(func(lt float64) float64 { _, _, s := fit(lt); return s },
		at(max(0, bestK-1)), at(min(steps, bestK+1)), 40)
	if _, _, s := fit(lt); s > bestE {
		lt = at(bestK)
	}
	a, b, sse := fit(lt)
	c := curve{A: a, B: b, Tau: math.Exp(lt) * span, X0: x0, Edge: bestK == steps}
	if sst > 0 {
		c.R2 = 1 - sse/sst
	}
	return c
}
