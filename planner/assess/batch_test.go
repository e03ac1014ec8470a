package assess

import (
	"math"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// stepTime is a made-up job: 0.3 s of synchronisation a step on 2 or more
// GPUs (0.05 s on one), 2 ms a sample on each GPU.
func stepTime(g, m int) float64 {
	o := 0.05
	if g > 1 {
		o = 0.3
	}
	return o + 0.002*float64(m)
}

// observeBatch is what the job reports at global batch batch on g GPUs.
func observeBatch(g, batch int) Observation {
	return Observation{GPUs: g, Batch: batch, Throughput: float64(batch) / stepTime(g, batch/g)}
}

// The step model is recovered from reports at two per-GPU batches: within
// one GPU count (the script tried two batches), or across counts at one
// global batch (a resize), where each count's overhead is its own only if
// measured at two batches.
func TestFitStep(t *testing.T) {
	s, ok := FitStep([]Observation{observeBatch(4, 256), observeBatch(4, 512), observeBatch(4, 512), observeBatch(1, 64), observeBatch(1, 128)})
	must.True(t, ok)
	must.InDelta(t, 0.002, s.PerSample, 1e-12)
	must.InDelta(t, 0.3, s.Overhead(4), 1e-9)
	must.InDelta(t, 0.05, s.Overhead(1), 1e-9)
	must.InDelta(t, 0.3+0.002*64*2, s.At(4, 64, 2), 1e-9)

	_, ok = FitStep([]Observation{observeBatch(4, 256), observeBatch(4, 256), {GPUs: 8, Throughput: 900}})
	must.False(t, ok, must.Sprint("one per-GPU batch (and one report without a batch) tells no slope"))
	_, ok = FitStep([]Observation{{GPUs: 2, Batch: 64, Throughput: 100}, {GPUs: 2, Batch: 128, Throughput: 400}})
	must.False(t, ok, must.Sprint("a step time falling as the batch grows is no model"))

	// A resize at a fixed global batch: the slope over all reports.
	s, ok = FitStep([]Observation{observeBatch(2, 256), observeBatch(4, 256)})
	must.True(t, ok)
	must.Positive(t, s.PerSample)
}

func goodputOf(b *jobspec.Batch, noise float64, g int, a structs.BatchAdvice) float64 {
	return float64(a.Size) / stepTime(g, a.PerGPU*a.Accumulation) * (noise + float64(b.Size)) / (noise + float64(a.Size))
}

// The advice is the global batch of (nearly) most goodput among every
// even split the block allows, for the GPUs the job holds: larger when
// the gradient is noisy and the step's overhead dominates, the jobspec's
// size when it is not noisy, never over max or max_per_gpu a micro-batch.
func TestAdviseBatch(t *testing.T) {
	b := &jobspec.Batch{Size: 64, Max: 4096, MaxPerGPU: 128}
	obs := []Observation{observeBatch(4, 64), observeBatch(4, 128), observeBatch(8, 128)}
	for _, c := range []struct {
		noise float64
		gpus  int
	}{{2000, 4}, {2000, 8}, {50, 4}, {1e6, 4}, {1e6, 16}, {5, 2}} {
		a := AdviseBatch(b, obs, c.noise, c.gpus)
		must.NotNil(t, a)
		must.Eq(t, c.gpus, a.GPUs)
		must.Eq(t, a.Size, a.GPUs*a.PerGPU*a.Accumulation)
		must.Between(t, b.Size, a.Size, b.Max)
		must.LessEq(t, b.MaxPerGPU, a.PerGPU)
		// Against every global batch the block allows, split the same way.
		best := 0.0
		for want := b.Size; want <= b.Max; want++ {
			if s, ok := split(want, c.gpus, b.MaxPerGPU, b.Max); ok {
				best = max(best, goodputOf(b, c.noise, c.gpus, s))
			}
		}
		got := goodputOf(b, c.noise, c.gpus, *a)
		must.Greater(t, 0.99*best, got, must.Sprintf("noise %g on %d GPUs: advised %+v, %.1f of the best %.1f", c.noise, c.gpus, *a, got, best))
		base, _ := split(b.Size, c.gpus, b.MaxPerGPU, b.Max)
		must.InDelta(t, got/goodputOf(b, c.noise, c.gpus, base), a.GoodputGain, 1e-6)
		must.InDelta(t, (c.noise+64)/(c.noise+float64(a.Size)), a.Efficiency, 1e-12)
	}
	noisy, quiet := AdviseBatch(b, obs, 1e6, 4), AdviseBatch(b, obs, 5, 4)
	must.Greater(t, 1000, noisy.Size)
	must.Greater(t, 1, noisy.Accumulation, must.Sprint("past max_per_gpu on 4 GPUs takes accumulation"))
	must.Eq(t, 64, quiet.Size)

	must.Nil(t, AdviseBatch(nil, obs, 2000, 4))
	must.Nil(t, AdviseBatch(b, obs, 0, 4))
	must.Nil(t, AdviseBatch(b, obs, 2000, 0))
	// One per-GPU batch measured (16 a GPU on 4): explore twice it.
	ex := AdviseBatch(b, obs[:1], 2000, 4)
	must.Eq(t, structs.BatchAdvice{Size: 128, PerGPU: 32, Accumulation: 1, GPUs: 4, Efficiency: 2064.0 / 2128, NoiseScale: 2000, Exploring: true}, *ex)
	// At max_per_gpu already: half of it.
	ex = AdviseBatch(&jobspec.Batch{Size: 16, Max: 4096, MaxPerGPU: 32}, []Observation{observeBatch(2, 64)}, 2000, 2)
	must.Eq(t, structs.BatchAdvice{Size: 32, PerGPU: 16, Accumulation: 1, GPUs: 2, Efficiency: 2016.0 / 2032, NoiseScale: 2000, Exploring: true}, *ex)
	must.Nil(t, AdviseBatch(&jobspec.Batch{Size: 64, Max: 4096, MaxPerGPU: 32}, []Observation{observeBatch(2, 64)}, 2000, 2),
		must.Sprint("half is below the block's size"))
	must.Nil(t, AdviseBatch(b, []Observation{{GPUs: 4, Throughput: 100}}, 2000, 4), must.Sprint("no report carries its batch"))
	must.Nil(t, AdviseBatch(&jobspec.Batch{Size: 4, Max: 8, MaxPerGPU: 4}, obs, 2000, 16), must.Sprint("more GPUs than samples in max"))
}

func TestSplit(t *testing.T) {
	for _, c := range []struct {
		want, gpus, perGPU, most int
		ok                       bool
		size, m, accum           int
	}{
		{64, 4, 128, 4096, true, 64, 16, 1},
		{100, 3, 128, 4096, true, 102, 34, 1},
		{100, 3, 128, 100, true, 99, 33, 1},
		{1000, 4, 128, 4096, true, 1000, 125, 2},
		{1001, 4, 128, 4096, true, 1008, 126, 2},
		{5, 8, 128, 4096, true, 8, 1, 1},
		{5, 8, 128, 4, false, 0, 0, 0},
		{math.MaxInt32, 1 << 20, 1 << 24, math.MaxInt32, true, 2047 << 20, 2047, 1},
	} {
		a, ok := split(c.want, c.gpus, c.perGPU, c.most)
		must.Eq(t, c.ok, ok, must.Sprintf("%+v", c))
		if ok {
			must.Eq(t, structs.BatchAdvice{Size: c.size, PerGPU: c.m, Accumulation: c.accum}, a, must.Sprintf("%+v", c))
		}
	}
}

// Counts not measured take the overhead on the line between the nearest
// measured ones, past the largest the line through the last two (never
// falling), below the smallest the smallest's.
func TestStepModel_Overhead(t *testing.T) {
	s := StepModel{PerSample: 0.001, Overheads: []CountOverhead{{2, 0.2}, {4, 0.3}, {8, 0.5}}}
	for g, want := range map[int]float64{1: 0.2, 2: 0.2, 3: 0.25, 4: 0.3, 6: 0.4, 8: 0.5, 16: 0.9} {
		must.InDelta(t, want, s.Overhead(g), 1e-12, must.Sprintf("%d GPUs", g))
	}
	falling := StepModel{Overheads: []CountOverhead{{2, 0.4}, {4, 0.3}}}
	must.InDelta(t, 0.3, falling.Overhead(16), 1e-12)
	one := StepModel{Overheads: []CountOverhead{{4, 0.3}}}
	must.InDelta(t, 0.3, one.Overhead(16), 1e-12)
}

// With the batch following the GPUs, a noisy job's speedup is better than
// at a fixed per-GPU batch (its batch grows with the GPUs), and each entry
// is the best goodput on that many GPUs over the best on one.
func TestBatchSpeedup(t *testing.T) {
	b := &jobspec.Batch{Size: 64, Max: 4096, MaxPerGPU: 128}
	obs := []Observation{observeBatch(1, 32), observeBatch(1, 64), observeBatch(4, 128), observeBatch(4, 256)}
	model, ok := FitStep(obs)
	must.True(t, ok)
	tab := BatchSpeedup(b, obs, 2000, 16)
	must.Len(t, 16, tab)
	must.InDelta(t, 1, tab[0], 1e-12)
	_, one := bestSplit(b, model, 2000, 1)
	for g := 1; g <= 16; g++ {
		_, gp := bestSplit(b, model, 2000, g)
		must.InDelta(t, gp/one, tab[g-1], 1e-9)
	}
	// At a fixed 32 a GPU: T(g) = overhead(g) + 0.002*32.
	fixed := func(g int) float64 { return float64(32*g) / model.At(g, 32, 1) }
	must.Greater(t, fixed(8)/fixed(1), tab[7])
	// A gradient without noise gains nothing from a larger batch: its
	// table is the fixed batch's, about.
	quiet := BatchSpeedup(b, obs, 1e-3, 16)
	must.Less(t, tab[7], quiet[7])
	must.Nil(t, BatchSpeedup(b, obs[:1], 2000, 16))
	must.Nil(t, BatchSpeedup(nil, obs, 2000, 16))
}

// A jobspec may ask for 2^20 GPUs: the tables stop at MaxSpeedupTable.
func TestSpeedupTablesAreBounded(t *testing.T) {
	b := &jobspec.Batch{Size: 64, Max: 4096, MaxPerGPU: 128}
	obs := []Observation{observeBatch(1, 32), observeBatch(1, 64), observeBatch(4, 128), observeBatch(8, 128)}
	must.Len(t, MaxSpeedupTable, BatchSpeedup(b, obs, 2000, jobspec.MaxGPUs))
	sc := ChooseGPUs(obs, Counts{Min: 1, Max: jobspec.MaxGPUs, PerWorker: 1}, DefaultThreshold)
	must.Len(t, MaxSpeedupTable, sc.Speedup)
}

// Steps that also commit or measure take longer; a few of them at one
// batch do not tilt the fit (medians, not means).
func TestFitStep_SlowStepsDoNotTiltIt(t *testing.T) {
	var obs []Observation
	for i := range 20 {
		a, b := observeBatch(4, 256), observeBatch(4, 512)
		if i%5 == 0 {
			a.Throughput /= 3 // a commit step at the smaller batch
		}
		obs = append(obs, a, b)
	}
	s, ok := FitStep(obs)
	must.True(t, ok)
	must.InDelta(t, 0.002, s.PerSample, 1e-12)
	must.InDelta(t, 0.3, s.Overhead(4), 1e-9)
}

// N7: reports with a finite but extreme throughput (2.56e-305 samples/s,
// or 1.7e308) never make the advice or the table NaN or infinite (the
// planner's reply to the report is JSON, which holds neither): where the
// numbers leave float64's range there is no advice, or no table.
func TestN7_BatchAdviceStaysFinite(t *testing.T) {
	blocks := []*jobspec.Batch{{Size: 8192, Max: 16384, MaxPerGPU: 16384}, {Size: 64, Max: 4096, MaxPerGPU: 128},
		{Size: 1, Max: jobspec.MaxBatch, MaxPerGPU: jobspec.MaxBatch}}
	rates := []float64{2.56e-305, 5e-324, 1e-200, 1, 1e300, math.MaxFloat64}
	for _, b := range blocks {
		for _, r1 := range rates {
			for _, r2 := range rates {
				for _, g := range []int{1, 8} {
					for _, noise := range []float64{1e-3, 1000, 1e12} {
						obs := []Observation{{GPUs: g, Batch: 64 * g, Throughput: r1}, {GPUs: g, Batch: 128 * g, Throughput: r2}}
						a, tab := Batch(b, obs, noise, g, 16)
						what := must.Sprintf("block %+v, %g and %g samples/s on %d GPUs, noise %g: %+v %v", *b, r1, r2, g, noise, a, tab)
						if a != nil {
							for _, x := range []float64{a.Efficiency, a.NoiseScale, a.GoodputGain} {
								must.True(t, finite(x), what)
							}
							must.Positive(t, a.Size, what)
						}
						for _, x := range tab {
							must.True(t, finite(x) && x >= 0, what)
						}
					}
				}
			}
		}
	}
	// The probe's case: a block whose size the fit's step time cannot
	// reach in float64 gets no advice rather than a NaN gain.
	b := &jobspec.Batch{Size: 8192, Max: 16384, MaxPerGPU: 16384}
	obs := []Observation{{GPUs: 1, Batch: 64, Throughput: 2.56e-305}, {GPUs: 1, Batch: 128, Throughput: 2.56e-305}}
	a, _ := Batch(b, obs, 1000, 1, 4)
	must.Nil(t, a)
	// Ordinary reports still get their advice.
	a, _ = Batch(b, []Observation{observeBatch(1, 64), observeBatch(1, 128)}, 1000, 1, 4)
	must.NotNil(t, a)
}
