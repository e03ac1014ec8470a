package assess

import (
	"cmp"
	"math"
	"slices"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// StepModel is a job's time per optimizer step on g GPUs at m samples per
// GPU: T = Overhead(g) + PerSample*m, the overhead (synchronisation, the
// step's fixed costs) measured per GPU count, the per-sample compute
// shared by all counts. FitStep fits it to observations.
type StepModel struct {
	PerSample float64
	// Overheads are the measured counts' overheads, by count ascending.
	Overheads []CountOverhead
}

// CountOverhead is the step overhead measured at a GPU count.
type CountOverhead struct {
	GPUs     int
	Overhead float64
}

// Overhead is the step overhead on g GPUs: measured, or linear between
// the nearest measured counts, or past the largest on the line through
// the last two (never falling: synchronisation does not get cheaper with
// more GPUs), or below the smallest the smallest's.
func (s StepModel) Overhead(g int) float64 {
	o := s.Overheads
	i, found := slices.BinarySearchFunc(o, g, func(c CountOverhead, g int) int { return cmp.Compare(c.GPUs, g) })
	switch {
	case found:
		return o[i].Overhead
	case i == 0:
		return o[0].Overhead
	case i < len(o):
		lo, hi := o[i-1], o[i]
		return lo.Overhead + (hi.Overhead-lo.Overhead)*float64(g-lo.GPUs)/float64(hi.GPUs-lo.GPUs)
	case len(o) == 1:
		return o[0].Overhead
	}
	lo, hi := o[len(o)-2], o[len(o)-1]
	slope := max(0, (hi.Overhead-lo.Overhead)/float64(hi.GPUs-lo.GPUs))
	return hi.Overhead + slope*float64(g-hi.GPUs)
}

// At is the time of one optimizer step of accum micro-batches of m
// samples on each of g GPUs: the overhead once, the compute accum times.
func (s StepModel) At(g, m, accum int) float64 {
	return s.Overhead(g) + s.PerSample*float64(m*accum)
}

// FitStep fits a StepModel to the observations that report their batch:
// each is a step time T = Batch/Throughput at m = Batch/GPUs samples per
// GPU. The step times of one (GPUs, batch) are reduced to their median
// (steps that also commit, checkpoint or measure take longer, and a mean
// would let a few of them tilt the slope); the per-sample time is the
// least-squares slope of those medians over m within each GPU count (each
// count its own intercept); where no count was measured at two per-GPU
// batches it is the slope over all of them together (one intercept), which
// takes two per-GPU batches anywhere (a resize at a fixed global batch
// gives them). ok is false while the data cannot tell the slope, or tell a
// positive one, or tell a finite model (a throughput so small that a step
// time overflows is no measurement).
func FitStep(obs []Observation) (StepModel, bool) {
	type key struct{ gpus, batch int }
	times := map[key][]float64{}
	for _, o := range obs {
		if o.Batch <= 0 || o.GPUs <= 0 || !positive(o.Throughput) {
			continue
		}
		t := float64(o.Batch) / o.Throughput
		if !positive(t) {
			continue
		}
		k := key{o.GPUs, o.Batch}
		times[k] = append(times[k], t)
	}
	type pt struct{ m, t float64 }
	byGPUs := map[int][]pt{}
	var all []pt
	for k, ts := range times {
		p := pt{float64(k.batch) / float64(k.gpus), median(ts)}
		byGPUs[k.gpus] = append(byGPUs[k.gpus], p)
		all = append(all, p)
	}
	slope := func(groups [][]pt) (float64, bool) {
		var sxy, sxx float64
		for _, ps := range groups {
			var mm, mt float64
			for _, p := range ps {
				mm += p.m
				mt += p.t
			}
			mm /= float64(len(ps))
			mt /= float64(len(ps))
			for _, p := range ps {
				sxy += (p.m - mm) * (p.t - mt)
				sxx += (p.m - mm) * (p.m - mm)
			}
		}
		// Per-GPU batches that differ by less than a sample in all tell
		// nothing.
		if sxx < 0.25 {
			return 0, false
		}
		return sxy / sxx, true
	}
	groups := make([][]pt, 0, len(byGPUs))
	for _, ps := range byGPUs {
		groups = append(groups, ps)
	}
	b, ok := slope(groups)
	if !ok {
		b, ok = slope([][]pt{all})
	}
	if !ok || !positive(b) {
		return StepModel{}, false
	}
	s := StepModel{PerSample: b}
	for g, ps := range byGPUs {
		var o float64
		for _, p := range ps {
			o += p.t - b*p.m
		}
		o = max(0, o/float64(len(ps)))
		if !finite(o) {
			return StepModel{}, false
		}
		s.Overheads = append(s.Overheads, CountOverhead{g, o})
	}
	slices.SortFunc(s.Overheads, func(x, y CountOverhead) int { return cmp.Compare(x.GPUs, y.GPUs) })
	return s, true
}

// batchGrid is how many global batches AdviseBatch weighs between the
// block's size and max (evenly on a log scale, both ends included).
const batchGrid = 64

// AdviseBatch is the batch a job with the batch block b should train at
// on gpus GPUs (Pollux's co-adaptive batch size): of the global batches
// in [b.Size, b.Max] that split evenly into gpus x per-GPU x accumulation
// with per-GPU at most b.MaxPerGPU, the one of most goodput,
//
//	goodput(M) = M / T(gpus, per-GPU, accumulation) * E(M),
//	E(M) = (noise + b.Size) / (noise + M),
//
// E being the statistical efficiency of M against b.Size (a sample at M
// makes E(M) of the progress it makes at b.Size; McCandlish et al.'s
// model, with noise the gradient noise scale in samples) and T the fitted
// step time (FitStep).
//
// Until the step time can be fitted (the job has run at one per-GPU batch
// only, as a script that keeps its per-GPU batch across resizes does) the
// advice explores, as Pollux does: twice the per-GPU batch last measured
// (half, where that is at max_per_gpu already), Exploring and no gain, so
// that the next reports measure a second point. Nil without a block, GPUs,
// a noise scale, or a throughput report that carries its batch.
func AdviseBatch(b *jobspec.Batch, obs []Observation, noise float64, gpus int) *structs.BatchAdvice {
	a, _ := Batch(b, obs, noise, gpus, 0)
	return a
}

// BatchSpeedup is the speedup table of a job that follows the batch
// advice, in policy.Job.Speedup's format (entry g-1: goodput on g GPUs at
// the best batch for g, over that on one GPU at the best batch for one),
// for g up to maxGPUs (at most MaxSpeedupTable): Pollux's co-adaptation,
// with which more GPUs are worth more to a job whose gradient is noisy
// (its batch grows with them). Nil while AdviseBatch cannot fit the step
// time.
func BatchSpeedup(b *jobspec.Batch, obs []Observation, noise float64, maxGPUs int) []float64 {
	_, tab := Batch(b, obs, noise, 0, maxGPUs)
	return tab
}

// Batch is AdviseBatch's advice for gpus GPUs and BatchSpeedup's table up
// to maxGPUs (either nil where gpus or maxGPUs is 0), from one fit of the
// step time: the planner needs both on every progress report. Neither
// ever holds NaN or an infinity: where extreme reports (a throughput of
// 1e-305 samples/s) take a step time or a goodput out of float64's range,
// that one is nil instead.
func Batch(b *jobspec.Batch, obs []Observation, noise float64, gpus, maxGPUs int) (*structs.BatchAdvice, []float64) {
	if b == nil || !positive(noise) {
		return nil, nil
	}
	var a *structs.BatchAdvice
	var tab []float64
	if model, ok := FitStep(obs); ok {
		a, tab = advise(b, model, noise, gpus), speedupTable(b, model, noise, maxGPUs)
	} else if gpus >= 1 {
		a = explore(b, obs, gpus, noise)
	}
	if a != nil && !(finite(a.Efficiency) && finite(a.NoiseScale) && finite(a.GoodputGain)) {
		a = nil
	}
	if slices.ContainsFunc(tab, func(x float64) bool { return !finite(x) || x < 0 }) {
		tab = nil
	}
	return a, tab
}

// advise is the goodput-best split on gpus GPUs for a fitted model (nil
// with no GPUs, or when the block's size does not split on them).
func advise(b *jobspec.Batch, model StepModel, noise float64, gpus int) *structs.BatchAdvice {
	if gpus < 1 {
		return nil
	}
	base, ok := split(b.Size, gpus, b.MaxPerGPU, b.Max)
	if !ok {
		return nil
	}
	best, bestG := bestSplit(b, model, noise, gpus)
	best.GPUs = gpus
	best.Efficiency = efficiency(b, noise, best.Size)
	best.NoiseScale = noise
	best.GoodputGain = bestG / goodput(b, model, noise, gpus, base)
	return &best
}

// speedupTable is BatchSpeedup's table for a fitted model.
func speedupTable(b *jobspec.Batch, model StepModel, noise float64, maxGPUs int) []float64 {
	if maxGPUs < 1 {
		return nil
	}
	_, one := bestSplit(b, model, noise, 1)
	if !positive(one) {
		return nil
	}
	out := make([]float64, min(maxGPUs, MaxSpeedupTable))
	for g := 1; g <= len(out); g++ {
		_, gp := bestSplit(b, model, noise, g)
		out[g-1] = gp / one
	}
	return out
}

// efficiency is the statistical efficiency of a global batch m against
// the block's size, for a gradient noise scale noise (McCandlish et al.).
func efficiency(b *jobspec.Batch, noise float64, m int) float64 {
	return (noise + float64(b.Size)) / (noise + float64(m))
}

// goodput is samples a second times efficiency for split a on gpus GPUs.
func goodput(b *jobspec.Batch, model StepModel, noise float64, gpus int, a structs.BatchAdvice) float64 {
	return float64(a.Size) / model.At(gpus, a.PerGPU, a.Accumulation) * efficiency(b, noise, a.Size)
}

// bestSplit is the split of most goodput on gpus GPUs among the block's
// global batches (batchGrid of them, and the block's size), with its
// goodput (0 when none splits).
func bestSplit(b *jobspec.Batch, model StepModel, noise float64, gpus int) (structs.BatchAdvice, float64) {
	best, bestG := structs.BatchAdvice{}, 0.0
	if a, ok := split(b.Size, gpus, b.MaxPerGPU, b.Max); ok {
		best, bestG = a, goodput(b, model, noise, gpus, a)
	}
	for i := range batchGrid {
		want := float64(b.Size) * math.Pow(float64(b.Max)/float64(b.Size), float64(i)/(batchGrid-1))
		a, ok := split(int(math.Round(want)), gpus, b.MaxPerGPU, b.Max)
		if !ok {
			continue
		}
		if g := goodput(b, model, noise, gpus, a); g > bestG*(1+1e-9) {
			best, bestG = a, g
		}
	}
	return best, bestG
}

// explore is the advice that measures a second per-GPU batch: twice the
// last one measured (half where that is at most), on gpus GPUs, within
// the block; nil when no report carries its batch or no such split
// exists. (Doubling the batch never halves the efficiency, (noise + M) /
// (noise + 2M) > 1/2, so the larger batch might always pay.)
func explore(b *jobspec.Batch, obs []Observation, gpus int, noise float64) *structs.BatchAdvice {
	last := -1
	for i, o := range obs {
		if o.Batch > 0 && o.GPUs > 0 && positive(o.Throughput) {
			last = i
		}
	}
	if last < 0 {
		return nil
	}
	m := max(1, obs[last].Batch/obs[last].GPUs)
	next := 2 * m
	if next > b.MaxPerGPU {
		next = m / 2
	}
	a, ok := split(gpus*next, gpus, b.MaxPerGPU, b.Max)
	if !ok || a.Size < b.Size || a.PerGPU == m || next < 1 {
		return nil
	}

	a.GPUs, a.Efficiency, a.NoiseScale, a.Exploring = gpus, efficiency(b, noise, a.Size), noise, true
	return &a
}

// split is the even split of a global batch of about want samples over
// gpus GPUs: the fewest micro-batches a step (accumulation) that keep the
// per-GPU batch at most perGPU, and the per-GPU batch that brings the
// total nearest want from above without passing most (false: none does).
func split(want, gpus, perGPU, most int) (structs.BatchAdvice, bool) {
	accum := max(1, ceilDiv(want, gpus*perGPU))
	m := max(1, ceilDiv(want, gpus*accum))
	if gpus*accum*m > most {
		m = most / (gpus * accum)
	}
	if m < 1 || m > perGPU {
		return structs.BatchAdvice{}, false
	}
	return structs.BatchAdvice{Size: gpus * accum * m, PerGPU: m, Accumulation: accum}, true
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
