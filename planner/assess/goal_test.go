package assess

import (
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// phase is a stretch of training: n reports, one every dt seconds, at
// rate samples/s, batch samples per step, on ws workers (0: not reported).
type phase struct {
	n          int
	dt, rate   float64
	batch      float64
	ws         int
	noRate     bool // the reports carry no samples_per_sec
	gapBefore  float64
	stepBefore int64 // steps the job goes back before this phase (a restart from a checkpoint)
}

// train simulates a job through phases and returns its history, with the
// metric m(x) at every report (x: samples processed), and the true x of
// every report. The first report is at x = 0. Each report's
// samples_per_sec is the mean rate over the interval it ends, as a
// script measuring its own throughput would report it.
func train(name string, m func(x float64) float64, phases ...phase) ([]structs.ProgressReport, []float64) {
	t := time.Unix(1_700_000_000, 0)
	var h []structs.ProgressReport
	var xs []float64
	x, step := 0.0, 0.0
	// stepX remembers x at each step reached, for restarts.
	type mark struct{ step, x float64 }
	var marks []mark
	add := func(rate float64, p phase) {
		r := structs.ProgressReport{Time: t, Step: int64(math.Round(step)), WorldSize: p.ws,
			Metric: &structs.Metric{Name: name, Value: m(x)}}
		if !p.noRate && rate > 0 {
			r.SamplesPerSec = f64(rate)
		}
		h = append(h, r)
		xs = append(xs, x)
		marks = append(marks, mark{step, x})
	}
	add(0, phases[0])
	for _, p := range phases {
		t = t.Add(time.Duration(p.gapBefore * float64(time.Second)))
		if p.stepBefore > 0 {
			step -= float64(p.stepBefore)
			for i := len(marks) - 1; i >= 0; i-- {
				if marks[i].step <= step {
					x = marks[i].x + (step-marks[i].step)*p.batch
					break
				}
			}
		}
		for range p.n {
			t = t.Add(time.Duration(p.dt * float64(time.Second)))
			x += p.rate * p.dt
			step += p.rate * p.dt / p.batch
			add(p.rate, p)
		}
	}
	return h, xs
}

// Accuracy 0.95 - 0.85*exp(-x/2e6), and the x where it reaches goal.
func acc(x float64) float64 { return 0.95 - 0.85*math.Exp(-x/2e6) }
func accAt(goal float64) float64 {
	return -2e6 * math.Log((0.95-goal)/0.85)
}

func within(t *testing.T, what string, got, want, rel float64) {
	t.Helper()
	if math.Abs(got-want) > rel*math.Abs(want) {
		t.Errorf("%s = %.6g, want %.6g within %.1f%% (off by %.2f%%)", what, got, want, 100*rel, 100*(got-want)/want)
	}
}

func TestToGoalExactCurve(t *testing.T) {
	// 50 reports a minute apart at 1000 samples/s: x up to 3e6.
	h, xs := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	goal := Goal{Metric: "accuracy", Value: 0.93}
	got := ToGoal(h, goal)
	if got.Status != Estimated || got.Method != "curve" || got.Unit != Samples || got.Points != 51 || got.Rate != 1000 {
		t.Fatalf("got %+v, want a curve estimate in samples from 51 points at rate 1000", got)
	}
	want := accAt(0.93) - xs[len(xs)-1] // 4.5e6
	within(t, "remaining", got.Remaining, want, 0.01)
	if want := "4.5M samples to go (accuracy 0.76, goal 0.93; the fitted curve levels off at 0.95; 51 reports)"; got.Reason != want {
		t.Errorf("Reason\n got %q\nwant %q", got.Reason, want)
	}
}

func TestToGoalNoisyCurve(t *testing.T) {
	for seed := range uint64(5) {
		rng := rand.New(rand.NewPCG(seed, 1))
		h, xs := train("accuracy", acc, phase{n: 80, dt: 60, rate: 1000, batch: 32, ws: 1})
		for i := range h {
			h[i].Metric.Value += 0.004 * rng.NormFloat64()
		}
		got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.9})
		if got.Status != Estimated || got.Method != "curve" {
			t.Fatalf("seed %d: %+v, want a curve estimate", seed, got)
		}
		within(t, "remaining (noisy)", got.Remaining, accAt(0.9)-xs[len(xs)-1], 0.10)
	}
}

func TestToGoalLowerIsBetter(t *testing.T) {
	loss := func(x float64) float64 { return 0.2 + 2*math.Exp(-x/2e6) }
	h, xs := train("val_loss", loss, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	got := ToGoal(h, Goal{Metric: "val_loss", Value: 0.25, Lower: true})
	if got.Status != Estimated || got.Method != "curve" {
		t.Fatalf("%+v, want a curve estimate", got)
	}
	within(t, "remaining", got.Remaining, 2e6*math.Log(2/0.05)-xs[len(xs)-1], 0.01)
	if !strings.Contains(got.Reason, "levels off at 0.2;") {
		t.Errorf("Reason %q, want the asymptote 0.2", got.Reason)
	}

	// Lower is better: a goal above the current loss (0.646) is reached;
	// 0.15 is below the asymptote, out of reach.
	if got := ToGoal(h, Goal{Metric: "val_loss", Value: 0.7, Lower: true}); got.Status != Reached {
		t.Errorf("loss goal 0.7: %+v, want reached", got)
	}
	got = ToGoal(h, Goal{Metric: "val_loss", Value: 0.15, Lower: true})
	if got.Status != Unreachable || got.Remaining != 0 || !strings.Contains(got.Reason, "levels off at 0.2 ") {
		t.Errorf("loss goal 0.15: %+v, want unreachable (levels off at 0.2)", got)
	}
	// Read the wrong way round, the loss never improves.
	if got := ToGoal(h, Goal{Metric: "val_loss", Value: 5}); got.Status != Unreachable || got.Method != "trend" {
		t.Errorf("loss read as higher-is-better: %+v, want unreachable by the trend", got)
	}
}

func TestToGoalReached(t *testing.T) {
	h, _ := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	last := h[len(h)-1].Metric.Value // 0.760
	for _, g := range []float64{0.5, last} {
		got := ToGoal(h, Goal{Metric: "accuracy", Value: g})
		if got.Status != Reached || got.Remaining != 0 {
			t.Errorf("goal %v: %+v, want reached", g, got)
		}
	}
	// Reached is the latest value, so one report is enough.
	got := ToGoal(h[:1], Goal{Metric: "accuracy", Value: 0.05})
	if got.Status != Reached || got.Reason != "accuracy 0.1 has reached the goal 0.05" {
		t.Errorf("one report: %+v", got)
	}
}

func TestToGoalUnreachable(t *testing.T) {
	h, _ := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.97})
	if got.Status != Unreachable || got.Method != "curve" || got.Remaining != 0 {
		t.Fatalf("%+v, want unreachable by the curve", got)
	}
	if want := "unreachable: accuracy levels off at 0.95 on the fitted curve (accuracy 0.76, goal 0.97; 51 reports)"; got.Reason != want {
		t.Errorf("Reason\n got %q\nwant %q", got.Reason, want)
	}

	// A noisy plateau: not improving.
	rng := rand.New(rand.NewPCG(5, 5))
	h, _ = train("accuracy", func(float64) float64 { return 0.7 }, phase{n: 30, dt: 60, rate: 1000, batch: 32})
	for i := range h {
		h[i].Metric.Value += 0.01 * rng.NormFloat64()
	}
	h[len(h)-1].Metric.Value = 0.69
	got = ToGoal(h, Goal{Metric: "accuracy", Value: 0.9})
	if got.Status != Unreachable {
		t.Errorf("plateau: %+v, want unreachable", got)
	}
}

func TestToGoalTooFew(t *testing.T) {
	h, _ := train("accuracy", acc, phase{n: 2, dt: 60, rate: 1000, batch: 32, ws: 1})
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	if got.Status != Unknown || got.Points != 3 || got.Reason != "only 3 report(s) of accuracy so far; need 4" {
		t.Errorf("3 reports: %+v", got)
	}
	// Reports of other metrics, or none at all, do not count.
	h, _ = train("top5", acc, phase{n: 30, dt: 60, rate: 1000, batch: 32, ws: 1})
	for _, hist := range [][]structs.ProgressReport{h, nil} {
		got = ToGoal(hist, Goal{Metric: "accuracy", Value: 0.93})
		if got.Status != Unknown || got.Reason != "no reports of accuracy yet" {
			t.Errorf("no accuracy reports: %+v", got)
		}
	}
	// Reports with no progress between them.
	h, _ = train("accuracy", acc, phase{n: 5, dt: 60, rate: 1000, batch: 32, ws: 1})
	for i := range h {
		h[i].Step, h[i].Metric.Value, h[i].SamplesPerSec = 7, 0.1*float64(i), nil
	}
	if got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93}); got.Status != Unknown {
		t.Errorf("no progress: %+v, want unknown", got)
	}
}

// Few points: a straight line through them.
func TestToGoalTrend(t *testing.T) {
	lin := func(x float64) float64 { return 0.5 + 1e-7*x } // reaches 0.8 at x = 3e6
	h, xs := train("accuracy", lin, phase{n: 4, dt: 60, rate: 1000, batch: 32, ws: 1})
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.8})
	if got.Status != Estimated || got.Method != "trend" || got.Points != 4 {
		t.Fatalf("%+v, want a trend estimate from the last 4 points", got)
	}
	within(t, "remaining", got.Remaining, 3e6-xs[len(xs)-1], 1e-6)
	if !strings.HasSuffix(got.Reason, "; too few reports for a curve)") {
		t.Errorf("Reason %q", got.Reason)
	}

	// Many points on a straight line: no curvature to fit, the trend of
	// the last third.
	h, xs = train("accuracy", lin, phase{n: 20, dt: 60, rate: 1000, batch: 32, ws: 1})
	got = ToGoal(h, Goal{Metric: "accuracy", Value: 0.8})
	if got.Status != Estimated || got.Method != "trend" || got.Points != 7 {
		t.Fatalf("%+v, want a trend estimate from the last 7 points", got)
	}
	within(t, "remaining", got.Remaining, 3e6-xs[len(xs)-1], 1e-6)
	if !strings.Contains(got.Reason, "no curvature yet") {
		t.Errorf("Reason %q", got.Reason)
	}
}

// Without samples_per_sec the axis is the step.
func TestToGoalSteps(t *testing.T) {
	h, xs := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 40, ws: 1, noRate: true})
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	if got.Status != Estimated || got.Unit != Steps {
		t.Fatalf("%+v, want an estimate in steps", got)
	}
	within(t, "remaining steps", got.Remaining, (accAt(0.93)-xs[len(xs)-1])/40, 0.01)
	within(t, "rate (steps/s)", got.Rate, 1000.0/40, 0.01)
	if !strings.Contains(got.Reason, " steps to go") {
		t.Errorf("Reason %q", got.Reason)
	}
}

// The job grows from one to two workers mid-way, each with the same batch
// per worker: samples per step and samples per second jump. The
// straddling report has the interval's mean rate.
func TestToGoalRescale(t *testing.T) {
	h, xs := train("accuracy", acc,
		phase{n: 25, dt: 60, rate: 1000, batch: 32, ws: 1},
		phase{n: 1, dt: 60, rate: 1400, batch: 48, ws: 2}, // half the minute at each size
		phase{n: 24, dt: 60, rate: 1800, batch: 64, ws: 2},
	)
	ax, unit, rate := axis(h)
	if unit != Samples || rate != 1800 {
		t.Fatalf("axis unit %s rate %v, want samples, 1800", unit, rate)
	}
	for i := range xs {
		if math.Abs(ax[i]-xs[i]) > 1e-6*xs[len(xs)-1] {
			t.Fatalf("x of report %d = %v, want %v", i, ax[i], xs[i])
		}
	}
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	if got.Status != Estimated || got.Method != "curve" {
		t.Fatalf("%+v, want a curve estimate", got)
	}
	within(t, "remaining", got.Remaining, accAt(0.93)-xs[len(xs)-1], 0.01)
}

// Reports only some of which carry the rate: the others count their steps
// at the usual samples per step.
func TestToGoalSomeRates(t *testing.T) {
	h, xs := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	for i := range h {
		if i%3 != 0 {
			h[i].SamplesPerSec = nil
		}
	}
	ax, unit, _ := axis(h)
	if unit != Samples {
		t.Fatalf("unit %s, want samples", unit)
	}
	for i := range xs {
		if math.Abs(ax[i]-xs[i]) > 1e-3*xs[len(xs)-1] {
			t.Fatalf("x of report %d = %v, want %v", i, ax[i], xs[i])
		}
	}
}

// The job waits two hours without GPUs between two reports: the gap is
// not training.
func TestToGoalPause(t *testing.T) {
	h, xs := train("accuracy", acc,
		phase{n: 25, dt: 60, rate: 1000, batch: 32, ws: 1},
		phase{n: 25, dt: 60, rate: 1000, batch: 32, ws: 1, gapBefore: 7200},
	)
	ax, _, _ := axis(h)
	for i := range xs {
		if math.Abs(ax[i]-xs[i]) > 1e-6*xs[len(xs)-1] {
			t.Fatalf("x of report %d = %v, want %v", i, ax[i], xs[i])
		}
	}
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	within(t, "remaining", got.Remaining, accAt(0.93)-xs[len(xs)-1], 0.01)
}

// The job restarts from a checkpoint 5 reports back (and 10 minutes
// later): the axis goes back with the step, and the metric with it.
func TestToGoalRestart(t *testing.T) {
	h, xs := train("accuracy", acc,
		phase{n: 30, dt: 60, rate: 1000, batch: 32, ws: 1},
		phase{n: 20, dt: 60, rate: 1000, batch: 32, ws: 1, gapBefore: 600, stepBefore: 5 * 60 * 1000 / 32},
	)
	if h[31].Step >= h[30].Step {
		t.Fatalf("the test's restart does not go back: steps %d, %d", h[30].Step, h[31].Step)
	}
	ax, _, _ := axis(h)
	for i := range xs {
		if math.Abs(ax[i]-xs[i]) > 1e-3*xs[len(xs)-1] {
			t.Fatalf("x of report %d = %v, want %v", i, ax[i], xs[i])
		}
	}
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	within(t, "remaining", got.Remaining, accAt(0.93)-xs[len(xs)-1], 0.01)
}

// Only reports of the target's metric are points, whatever else the
// job reports in between; the axis still counts every report.
func TestToGoalOtherMetrics(t *testing.T) {
	h, xs := train("accuracy", acc, phase{n: 60, dt: 60, rate: 1000, batch: 32, ws: 1})
	for i := range h {
		if i%2 == 1 {
			h[i].Metric = &structs.Metric{Name: "loss", Value: 9}
		}
	}
	h[len(h)-1].Metric = nil
	before := cloneHistory(h)
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	if got.Status != Estimated || got.Points != 30 {
		t.Fatalf("%+v, want an estimate from 30 points", got)
	}
	within(t, "remaining", got.Remaining, accAt(0.93)-xs[len(xs)-1], 0.01)
	if !reflect.DeepEqual(h, before) {
		t.Error("ToGoal modified the history")
	}
}

func cloneHistory(h []structs.ProgressReport) []structs.ProgressReport {
	p := (&structs.Progress{History: h}).Clone()
	return p.History
}

func TestRemainingWork(t *testing.T) {
	// 1e6 samples at 2000 samples/s on 4 GPUs that do 3.2 times one GPU:
	// 500 s at 4 GPUs, 1600 s on one.
	if got := RemainingWork(1e6, 2000, policy.SpeedupAt([]float64{1, 1.8, 2.5, 3.2}, 4)); got != 1600 {
		t.Errorf("RemainingWork = %v, want 1600", got)
	}
	for _, tc := range []struct{ r, t, s float64 }{
		{0, 2000, 2}, {1e6, 0, 2}, {1e6, 2000, 0}, {-1, 2000, 2}, {math.NaN(), 1, 1}, {1, math.Inf(1), 1},
	} {
		if got := RemainingWork(tc.r, tc.t, tc.s); got != 0 {
			t.Errorf("RemainingWork(%v, %v, %v) = %v, want 0 (unknown)", tc.r, tc.t, tc.s, got)
		}
	}
}

// From a job's history to policy.Progress.RemainingWork, as the planner
// will do it.
func TestRemainingWorkFromHistory(t *testing.T) {
	h, xs := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 2})
	est := ToGoal(h, Goal{Metric: "accuracy", Value: 0.93})
	speedup := []float64{1, 1.6, 2}
	work := RemainingWork(est.Remaining, est.Rate, policy.SpeedupAt(speedup, 2))
	// At 2 GPUs (1.6x one) the job does 1000 samples/s: 625 on one GPU.
	want := (accAt(0.93) - xs[len(xs)-1]) / 625
	within(t, "RemainingWork", work, want, 0.01)
}

// Noise larger than the trend: the curve explains little of it, and the
// estimate falls back to the recent trend, saying why.
func TestToGoalPoorFit(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	h, _ := train("accuracy", func(x float64) float64 { return 0.5 + 2e-8*x }, phase{n: 60, dt: 60, rate: 1000, batch: 32, ws: 1})
	for i := range h {
		h[i].Metric.Value += 0.03 * rng.NormFloat64()
	}
	h[len(h)-1].Metric.Value = 0.55
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.9})
	if got.Method != "trend" || !strings.Contains(got.Reason, "the curve fits poorly, R² 0.") {
		t.Errorf("%+v, want the trend, as the curve fits poorly", got)
	}
}

// The curve crosses the goal before now, but the latest value (a dip) has
// not reached it: the recent trend says how far.
func TestToGoalCurvePastGoal(t *testing.T) {
	h, _ := train("accuracy", acc, phase{n: 50, dt: 60, rate: 1000, batch: 32, ws: 1})
	h[len(h)-1].Metric.Value = 0.74 // the curve: 0.760 here, 0.75 at x = 2.89e6
	got := ToGoal(h, Goal{Metric: "accuracy", Value: 0.75})
	if got.Status != Estimated || got.Method != "trend" || !strings.Contains(got.Reason, "the fitted curve is already past the goal") {
		t.Fatalf("%+v, want a trend estimate", got)
	}
	// The line through the last 17 points is past 0.75 now, so the 0.01
	// from the latest value goes at its slope, about 1.15e-7 per sample
	// (the curve's slope around x = 2.5e6): some 87k samples.
	if got.Remaining < 7e4 || got.Remaining > 1.1e5 {
		t.Errorf("remaining %v, want about 8.7e4", got.Remaining)
	}
}

// Whatever the reports say, an answer is consistent: a finite Remaining,
// positive exactly when Estimated.
func TestToGoalGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	pick := func(xs ...float64) float64 { return xs[rng.IntN(len(xs))] }
	t0 := time.Unix(1_700_000_000, 0)
	for n := range 2000 {
		h := make([]structs.ProgressReport, rng.IntN(30))
		for i := range h {
			r := structs.ProgressReport{
				Time:      t0.Add(time.Duration(rng.IntN(100)-10) * time.Duration(i) * time.Second),
				Step:      int64(rng.IntN(50) * i),
				WorldSize: rng.IntN(3),
			}
			if rng.IntN(3) > 0 {
				r.SamplesPerSec = f64(pick(0, -1, 100, 1e6, math.NaN(), math.Inf(1), rng.Float64()*1000))
			}
			if rng.IntN(4) > 0 {
				r.Metric = &structs.Metric{Name: "m", Value: pick(0, 1, math.NaN(), math.Inf(-1), rng.Float64(), float64(i)/30)}
			}
			h[i] = r
		}
		goal := Goal{Metric: "m", Value: pick(0.5, 2, -1, math.NaN()), Lower: rng.IntN(2) == 0}
		got := ToGoal(h, goal)
		if !finite(got.Remaining) || got.Remaining < 0 || (got.Remaining > 0) != (got.Status == Estimated) || got.Reason == "" {
			t.Fatalf("history %d, goal %+v: %+v", n, goal, got)
		}
		if !finite(got.Rate) || got.Rate < 0 {
			t.Fatalf("history %d: rate %v", n, got.Rate)
		}
	}
}

func TestChooseGPUsGarbage(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	for n := range 2000 {
		obs := make([]Observation, rng.IntN(12))
		for i := range obs {
			obs[i] = Observation{GPUs: rng.IntN(10) - 1, Throughput: []float64{0, -1, math.NaN(), 1e-300, 1e300, rng.Float64() * 1000}[rng.IntN(6)]}
		}
		c := Counts{Min: rng.IntN(6) - 1, Max: rng.IntN(12) - 1, PerWorker: rng.IntN(4) - 1}
		got := ChooseGPUs(obs, c, rng.Float64())
		if got.GPUs < 1 || got.Reason == "" || (got.Speedup == nil) != got.Measuring {
			t.Fatalf("case %d, %v, %+v: %+v", n, obs, c, got)
		}
		for _, s := range got.Speedup {
			if !positive(s) {
				t.Fatalf("case %d, %v: speedup %v", n, obs, got.Speedup)
			}
		}
		if !got.Measuring && len(got.Speedup) < got.GPUs {
			t.Fatalf("case %d: %d GPUs but %d speedup entries", n, got.GPUs, len(got.Speedup))
		}
	}
}
