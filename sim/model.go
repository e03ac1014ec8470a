package sim

import (
	"fmt"
	"math"
	"strconv"
	"sync"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Model is a job's work and how fast it gets done on an allocation.
// Progress is in the model's own units, from 0 to Work.
type Model interface {
	// Work is the progress at which the job is done.
	Work() float64
	// Rate returns the progress per second on placement (GPUs per node,
	// largest first, zeros dropped; never empty) at progress done, and the
	// progress up to which that rate holds (math.Inf(1) if to the end).
	Rate(placement []int, done float64) (rate, until float64)
	// Speedup returns the table for policy.Job.Speedup at progress done, for
	// 1..maxGPUs GPUs packed on nodes of gpusPerNode (nil if unknown), and
	// the progress up to which the table holds.
	Speedup(done float64, maxGPUs, gpusPerNode int) (table []float64, until float64)
	// Best returns the least run time over the counts req allows, packed on
	// nodes of gpusPerNode, and the least GPU-seconds; no rescale costs.
	Best(req policy.GPURequest, gpusPerNode int) (runTime, gpuSeconds float64)
}

// WholeSecondModel is a Model whose rate changes and end fall on whole
// seconds: with Config.WholeSeconds, the simulator rounds the time at
// which the job reaches the end of a rate (Rate's until, or Work) to the
// nearest second (half to even), never before its last (re)start ends;
// the progress there is exact. A time rounded down onto a round's time is
// taken after that round, as Pollux's simulator, which plans before its
// jobs step on, sees it.
type WholeSecondModel interface {
	Model
	WholeSeconds() bool
}

// Rigid is a job that runs for a fixed time on its fixed GPU count, as a
// trace recorded it (Philly).
type Rigid struct {
	Duration float64
	GPUs     int
}

// Work implements Model.
func (r *Rigid) Work() float64 { return r.Duration }

// Rate implements Model: one second of work per second.
func (r *Rigid) Rate([]int, float64) (float64, float64) { return 1, math.Inf(1) }

// Speedup implements Model: unknown.
func (r *Rigid) Speedup(float64, int, int) ([]float64, float64) { return nil, math.Inf(1) }

// Best implements Model.
func (r *Rigid) Best(policy.GPURequest, int) (float64, float64) {
	return r.Duration, r.Duration * float64(r.GPUs)
}

// BatchMode is how an elastic job's total batch size follows its GPUs.
type BatchMode string

const (
	// BatchAuto is BatchFixed for rigid jobs and BatchAdaptive for elastic
	// ones, as in the Pollux paper's comparison.
	BatchAuto BatchMode = "auto"
	// BatchFixed keeps the job's requested total batch size; the per-GPU
	// batch is divided by the replicas, with gradient accumulation where it
	// exceeds the GPU's limit (Pollux's simulator for its baselines).
	BatchFixed BatchMode = "fixed"
	// BatchScaled keeps the requested per-GPU batch: the total batch scales
	// with the replicas, clamped to the validated batch sizes.
	BatchScaled BatchMode = "scaled"
	// BatchAdaptive picks, on each allocation, the total batch size of
	// greatest goodput (Pollux's co-adaptive batch size) from the true
	// (oracle) throughput and gradient statistics, over 50 sizes spaced
	// geometrically from max(InitBatch, MinLocal x replicas) to MaxBatch.
	BatchAdaptive BatchMode = "adaptive"
)

// ParseBatchMode parses a -batch value.
func ParseBatchMode(s string) (BatchMode, error) {
	switch m := BatchMode(s); m {
	case BatchAuto, BatchFixed, BatchScaled, BatchAdaptive:
		return m, nil
	}
	return "", fmt.Errorf("batch mode %q is not auto, fixed, scaled or adaptive", s)
}

// Goodput is a job of a Pollux application: it is done when its progress
// reaches the end of the application's validation curves, and its
// progress per second on an allocation is its goodput, throughput (from the
// placement's measured step and sync times) times statistical efficiency
// (from the gradient noise scale at its total batch size in its current
// epoch), as in Pollux's simulator.
type Goodput struct {
	App *App
	// Mode is how the total batch size follows the replicas (not Auto).
	Mode BatchMode
	// Batch and Replicas are what the user asked for (the trace's
	// batch_size and num_replicas).
	Batch    float64
	Replicas int

	cache *rateCache // shared by the jobs of one (App, Mode, Batch, Replicas)
}

// rateCache memoises goodput by placement and epoch; it is safe for
// concurrent use, so runs of several policies can share it.
type rateCache struct {
	mu     sync.Mutex
	m      map[string]float64
	tables map[[3]int][]float64 // (epoch, maxGPUs, gpusPerNode) -> speedup table
}

// NewGoodput returns the model of a job of app.
func NewGoodput(app *App, mode BatchMode, batch float64, replicas int) *Goodput {
	return &Goodput{App: app, Mode: mode, Batch: batch, Replicas: replicas, cache: &rateCache{m: make(map[string]float64), tables: make(map[[3]int][]float64)}}
}

// Work implements Model.
func (g *Goodput) Work() float64 { return g.App.Work() }

// Rate implements Model.
func (g *Goodput) Rate(placement []int, done float64) (float64, float64) {
	e := g.App.epoch(done)
	if e >= g.App.Epochs {
		return 1, math.Inf(1)
	}
	return g.goodput(placement, e), g.App.progress[e+1]
}

// WholeSeconds implements WholeSecondModel: Pollux's simulator advances a
// job in whole seconds to each epoch's end (simulator.py, Job.step:
// delta = round(...)), so an epoch, and the job, ends on a whole second.
func (g *Goodput) WholeSeconds() bool { return true }

// MaxReplicas returns the most GPUs the job can use in its batch mode: the
// per-GPU batch must stay at least MinLocal and the total at most MaxBatch.
func (g *Goodput) MaxReplicas() int {
	a := g.App
	var r float64
	switch g.Mode {
	case BatchFixed:
		r = g.Batch / a.MinLocal
	case BatchScaled:
		r = a.MaxBatch * float64(g.Replicas) / g.Batch
	default:
		r = a.MaxBatch / a.MinLocal
	}
	return max(1, int(math.Floor(r+1e-9)))
}

// goodput returns progress per second on placement in epoch e.
func (g *Goodput) goodput(placement []int, e int) float64 {
	key := make([]byte, 0, 2*len(placement)+4)
	for _, n := range placement {
		key = strconv.AppendInt(key, int64(n), 10)
		key = append(key, ',')
	}
	key = strconv.AppendInt(append(key, '@'), int64(e), 10)
	g.cache.mu.Lock()
	v, ok := g.cache.m[string(key)]
	g.cache.mu.Unlock()
	if ok {
		return v
	}
	v = g.compute(placement, e)
	g.cache.mu.Lock()
	g.cache.m[string(key)] = v
	g.cache.mu.Unlock()
	return v
}

func (g *Goodput) compute(placement []int, e int) float64 {
	a := g.App
	r := 0
	for _, n := range placement {
		r += n
	}
	switch g.Mode {
	case BatchFixed:
		return g.at(placement, r, g.Batch, e)
	case BatchScaled:
		m := g.Batch * float64(r) / float64(g.Replicas)
		return g.at(placement, r, min(max(m, a.InitBatch), a.MaxBatch), e)
	}
	lo := max(a.InitBatch, a.MinLocal*float64(r))
	hi := max(a.MaxBatch, lo)
	best := 0.0
	const samples = 50
	for i := range samples {
		m := lo * math.Pow(hi/lo, float64(i)/(samples-1))
		best = max(best, g.at(placement, r, m, e))
	}
	return best
}

// at returns the goodput with total batch size m on r replicas, split as
// Pollux's simulator does: per-GPU batch ceil(m/r), in atomic batches of at
// most MaxLocal with gradient accumulation (at least one accumulation step
// on a single GPU above InitBatch).
func (g *Goodput) at(placement []int, r int, m float64, e int) float64 {
	a := g.App
	const eps = 1e-8
	rf := float64(r)
	local := math.Ceil(m/rf - eps)
	accum := math.Ceil(local/a.MaxLocal-eps) - 1
	if r == 1 && m > a.InitBatch+eps {
		accum = max(accum, 1)
	}
	atomic := math.Ceil(local/(accum+1) - eps)
	atomic = min(atomic, math.Floor(a.MaxBatch/(rf*(accum+1))))
	atomic = max(atomic, 1)
	step, sync := a.Throughput(placement, atomic)
	total := step + (step-sync)*accum
	if total <= 0 {
		return 0
	}
	return a.Efficiency(rf*atomic*(accum+1), e) / total
}

// Speedup implements Model. Tables are shared between jobs (read-only).
func (g *Goodput) Speedup(done float64, maxGPUs, gpusPerNode int) ([]float64, float64) {
	e := min(g.App.epoch(done), g.App.Epochs-1)
	until := g.App.progress[e+1]
	key := [3]int{e, maxGPUs, gpusPerNode}
	g.cache.mu.Lock()
	tab, ok := g.cache.tables[key]
	g.cache.mu.Unlock()
	if ok {
		return tab, until
	}
	base := g.goodput([]int{1}, e)
	if base > 0 && maxGPUs >= 1 {
		tab = make([]float64, maxGPUs)
		for n := 1; n <= maxGPUs; n++ {
			tab[n-1] = g.goodput(packed(n, gpusPerNode), e) / base
		}
	}
	g.cache.mu.Lock()
	g.cache.tables[key] = tab
	g.cache.mu.Unlock()
	return tab, until
}

// Best implements Model.
func (g *Goodput) Best(req policy.GPURequest, gpusPerNode int) (float64, float64) {
	bestT, bestG := math.Inf(1), math.Inf(1)
	for n := req.Min; n <= req.Max; n += req.PerWorker {
		p := packed(n, gpusPerNode)
		t := 0.0
		for e := 0; e < g.App.Epochs; e++ {
			t += (g.App.progress[e+1] - g.App.progress[e]) / g.goodput(p, e)
		}
		bestT = min(bestT, t)
		bestG = min(bestG, t*float64(n))
	}
	return bestT, bestG
}

// packed is n GPUs on as few nodes of gpusPerNode as possible.
func packed(n, gpusPerNode int) []int {
	var p []int
	for n > 0 {
		k := min(n, gpusPerNode)
		p = append(p, k)
		n -= k
	}
	return p
}
