package assess

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// MaxSpeedupTable bounds a speedup table's length (ChooseGPUs,
// BatchSpeedup): a jobspec may ask for up to 2^20 GPUs, and the table is
// written with the job on every progress report. Past its end policies
// read its last entry (policy.SpeedupAt): no gain beyond 4,096 GPUs.
const MaxSpeedupTable = 4096

// DefaultThreshold is the default of ChooseGPUs's threshold: a worker is
// worth adding while each of its GPUs adds at least half of what one GPU
// alone does.
const DefaultThreshold = 0.5

// Observation is one throughput measurement of a job: Throughput
// samples/s, all workers together, while it ran on GPUs GPUs at a global
// batch of Batch samples per step (0: not reported).
type Observation struct {
	GPUs       int
	Throughput float64
	Batch      int
	// Model is the GPU model the job ran on ("": not known).
	Model string
}

// Point is the throughput measured at one GPU count: the median of the
// observations at that count, and how many there were.
type Point struct {
	GPUs       int
	Throughput float64
	N          int
}

// Counts are the GPU counts a job may hold: the multiples of PerWorker in
// [Min, Max] (as policy.GPURequest). Max must be a count: resolve
// jobspec's Max 0 ("up to what a pool offers") before calling, as the
// planner's snapshot does (the largest node). PerWorker < 1 counts as 1;
// Max below the smallest allowed count counts as that count.
type Counts struct {
	Min, Max, PerWorker int
}

// Scaling is ChooseGPUs's answer.
type Scaling struct {
	// GPUs is the count to give the job: the largest allowed count whose
	// last worker still pays (see ChooseGPUs). While Measuring, it is the
	// largest allowed count, so that the job may grow and be measured.
	GPUs int
	// Speedup is the fitted curve in policy.Job.Speedup's format:
	// Speedup[g-1] = T(g)/T(1) for g = 1..Max (at most MaxSpeedupTable). Nil while Measuring
	// (unknown: policies then assume linear scaling).
	Speedup []float64
	// Measuring is true while fewer than two distinct counts have been
	// measured: the curve is unknown, and the job should be let grow.
	Measuring bool
	// Points are the measured counts, ascending, each with its median.
	Points []Point
	// T1 and Serial are the fitted model T(g) = T1*g/(1+Serial*(g-1))
	// (Amdahl's law; Serial in [0,1]: 0 is linear scaling, 1 is no gain
	// from more GPUs). Zero while Measuring.
	T1, Serial float64
	// Reason says in one line why, for events and `job status`.
	Reason string
}

// Throughputs extracts ChooseGPUs's observations from a job's progress
// history (oldest first): one per report that has both samples_per_sec
// (> 0) and world_size, at GPUs = world_size (the training processes, one
// a GPU: the driver runs a worker's GPUs as that many slots). The first
// report after each change of world size is skipped, since its throughput
// straddles the rescale (the job's very first report is kept); so is the
// first after a change of GPU model (a move). Reports without world_size
// neither give an observation nor mark a change.
func Throughputs(history []structs.ProgressReport) []Observation {
	var out []Observation
	last, model := 0, ""
	for _, r := range history {
		if r.WorldSize <= 0 {
			continue
		}
		changed := last != 0 && (r.WorldSize != last || r.GPUModel != model)
		last, model = r.WorldSize, r.GPUModel
		if changed || r.SamplesPerSec == nil || !positive(*r.SamplesPerSec) {
			continue
		}
		out = append(out, Observation{GPUs: r.WorldSize, Throughput: *r.SamplesPerSec, Batch: r.BatchSize, Model: r.GPUModel})
	}
	return out
}

// ChooseGPUs assesses how many GPUs a job is worth from its throughput
// observations (see Throughputs).
//
// The observations are grouped by GPU count and each count reduced to its
// median (robust to noisy and stray reports; observations with a count
// < 1 or a throughput that is not a positive number are dropped). With
// fewer than two distinct counts the scaling is unknown: the answer is
// Measuring, with GPUs = the largest allowed count. Otherwise Amdahl's law
// T(g) = T1*g/(1+s*(g-1)), s in [0,1], is fitted to the medians by least
// squares on relative errors (each count weighs the same), and the chosen
// count is the largest allowed count c (at least the smallest allowed)
// such that every worker added on the way still pays:
//
//	T(c) - T(c-PerWorker) >= threshold * PerWorker * T1
//
// that is, the last worker's GPUs each add at least threshold times one
// GPU's throughput. With the fitted curve the gains only shrink as GPUs
// are added, so this is also the first count whose next worker does not
// pay. threshold <= 0 or NaN means DefaultThreshold (0.5); a threshold
// above 1 keeps the job at its smallest count.
func ChooseGPUs(obs []Observation, allowed Counts, threshold float64) Scaling {
	if !(threshold > 0) {
		threshold = DefaultThreshold
	}
	pw := max(allowed.PerWorker, 1)
	lo := max(pw, (allowed.Min+pw-1)/pw*pw)
	hi := max(lo, allowed.Max/pw*pw)

	pts := medians(obs)
	res := Scaling{Points: pts}
	if len(pts) < 2 {
		res.GPUs, res.Measuring = hi, true
		switch len(pts) {
		case 0:
			res.Reason = "measuring: no throughput measured yet"
		default:
			res.Reason = fmt.Sprintf("measuring: only %s measured so far (%s samples/s)", policy.GPUs(pts[0].GPUs), num(pts[0].Throughput))
		}
		return res
	}

	res.T1, res.Serial = fitAmdahl(pts)
	f := func(g int) float64 { return amdahl(res.Serial, g) }
	res.Speedup = make([]float64, min(hi, MaxSpeedupTable))
	for g := 1; g <= len(res.Speedup); g++ {
		res.Speedup[g-1] = f(g)
	}
	gain := func(c int) float64 { return (f(c) - f(c-pw)) / float64(pw) } // per GPU, in units of T1
	res.GPUs = lo
	for c := lo + pw; c <= hi && gain(c) >= threshold; c += pw {
		res.GPUs = c
	}

	from := fitted(pts)
	c := res.GPUs
	switch {
	case lo == hi:
		res.Reason = fmt.Sprintf("%s, the only count allowed (%s)", policy.GPUs(c), from)
	case c == hi:
		res.Reason = fmt.Sprintf("%s, the most allowed: %s still adds %.2fx of one GPU's throughput%s (>= %g; %s)",
			policy.GPUs(c), lastWorker(c, pw), gain(c), each(pw), threshold, from)
	default:
		res.Reason = fmt.Sprintf("%s: %s would add %.2fx of one GPU's throughput%s (< %g; %s)",
			policy.GPUs(c), nextWorker(c, pw), gain(c+pw), each(pw), threshold, from)
	}
	if top := pts[len(pts)-1].GPUs; c > top {
		res.Reason += fmt.Sprintf("; extrapolated beyond %s", policy.GPUs(top))
	}
	return res
}

// medians groups obs by count, ascending, each with its median throughput.
func medians(obs []Observation) []Point {
	by := map[int][]float64{}
	for _, o := range obs {
		if o.GPUs >= 1 && positive(o.Throughput) {
			by[o.GPUs] = append(by[o.GPUs], o.Throughput)
		}
	}
	pts := make([]Point, 0, len(by))
	for g, ts := range by {
		pts = append(pts, Point{GPUs: g, Throughput: median(ts), N: len(ts)})
	}
	slices.SortFunc(pts, func(a, b Point) int { return a.GPUs - b.GPUs })
	return pts
}

// amdahl is the speedup g/(1+s(g-1)).
func amdahl(s float64, g int) float64 {
	return float64(g) / (1 + s*float64(g-1))
}

// fitAmdahl fits T(g) = t1*amdahl(s, g) to pts, minimising the sum of
// squared relative errors (1 - T(g)/y)^2: for a given s, t1 has a closed
// form; s is searched on a grid over [0,1], then refined by golden section
// around the best grid point.
func fitAmdahl(pts []Point) (t1, s float64) {
	cost := func(s float64) (float64, float64) {
		// r_i = f_i/y_i; minimise sum (1 - t1 r_i)^2.
		var sr, srr float64
		for _, p := range pts {
			r := amdahl(s, p.GPUs) / p.Throughput
			sr += r
			srr += r * r
		}
		t1 := sr / srr
		var c float64
		for _, p := range pts {
			d := 1 - t1*amdahl(s, p.GPUs)/p.Throughput
			c += d * d
		}
		return c, t1
	}
	const n = 100
	best, bestC := 0.0, math.Inf(1)
	for i := 0; i <= n; i++ {
		s := float64(i) / n
		if c, _ := cost(s); c < bestC {
			best, bestC = s, c
		}
	}
	s = golden(func(s float64) float64 { c, _ := cost(s); return c },
		max(0, best-1.0/n), min(1, best+1.0/n), 40)
	if c, _ := cost(s); c > bestC { // the grid point was better (a flat or odd cost)
		s = best
	}
	_, t1 = cost(s)
	return t1, s
}

// fitted is "fit from 1, 2, 4 GPUs: 150, 290, 540 samples/s".
func fitted(pts []Point) string {
	gs := make([]string, len(pts))
	ts := make([]string, len(pts))
	for i, p := range pts {
		gs[i] = fmt.Sprint(p.GPUs)
		ts[i] = num(p.Throughput)
	}
	return fmt.Sprintf("fit from %s GPUs: %s samples/s", strings.Join(gs, ", "), strings.Join(ts, ", "))
}

// nextWorker names the worker after count c: "a 5th", or "2 more (GPUs 9-10)".
func nextWorker(c, pw int) string {
	if pw == 1 {
		return "a " + structs.Ordinal(c+1)
	}
	return fmt.Sprintf("%d more (GPUs %d-%d)", pw, c+1, c+pw)
}

// lastWorker names the worker that brought the job to c: "the 8th", or
// "the last worker (GPUs 7-8)".
func lastWorker(c, pw int) string {
	if pw == 1 {
		return "the " + structs.Ordinal(c)
	}
	return fmt.Sprintf("the last worker (GPUs %d-%d)", c-pw+1, c)
}

func each(pw int) string {
	if pw == 1 {
		return ""
	}
	return " each"
}
