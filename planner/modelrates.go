package planner

import (
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/assess"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// modelRates is a job's outlook's speed per GPU model (structs.Outlook.
// Rates) after a batch of reports received at now while the job ran on
// cur: measured, the speeds its progress history shows per model, replaces
// the last outlook's (prev) for those models, and the others are kept (a
// history thinned to its bound may no longer hold a model's reports). A
// model is counted as measured now only if it is cur; the others keep
// their time. At most structs.MaxOutlookModels are kept, the most
// recently measured.
func modelRates(prev *structs.Outlook, measured map[string]assess.Rate, cur string, now time.Time) map[string]structs.ModelRate {
	var out map[string]structs.ModelRate
	if prev != nil && len(prev.Rates) > 0 {
		out = maps.Clone(prev.Rates)
	}
	for m, r := range measured {
		if out == nil {
			out = make(map[string]structs.ModelRate, len(measured))
		}
		at := now
		if old, ok := out[m]; ok && m != cur {
			at = old.Updated
		}
		rate := structs.ModelRate{PerGPU: r.PerGPU, Measured: r.Measured, Reports: r.N, Updated: at}
		if r.Fitted {
			rate.Serial = &r.Serial
		}
		out[m] = rate
	}
	for len(out) > structs.MaxOutlookModels {
		order := assess.ByRecency(out, func(r structs.ModelRate) int64 { return r.Updated.UnixNano() })
		delete(out, order[len(order)-1])
	}
	return out
}

// modelPriors is what the jobs of each application (jobspec name) showed
// between GPU models: for a pair of models, each job's speed per GPU on
// the second over its speed on the first, of the jobs measured on both.
// A job new to a model is estimated from its speed on another scaled by
// the median of these (assess.Bootstrap). It is bounded: maxPriorNames
// applications (the least recently reported forgotten first), and per
// pair the ratios of the last maxPriorJobs jobs.
type modelPriors struct {
	mu    sync.Mutex
	names map[string]*namePriors
	tick  uint64 // a count of observations, for recency
	// table is the medians as of the last read (Ratio), renewed on the
	// first read after an observation; nil while dirty.
	table map[priorKey]float64
}

// namePriors are one application's ratios, by pair of models.
type namePriors struct {
	seen  uint64
	pairs map[[2]string][]jobRatio
}

type jobRatio struct {
	job   string
	ratio float64
}

type priorKey struct {
	name     string
	from, to string
}

// Bounds of modelPriors.
const (
	maxPriorNames = 4096
	maxPriorJobs  = 16
)

// observe records what job id of application name measured per GPU on
// each model (rates): a job on one model teaches nothing.
func (p *modelPriors) observe(name, id string, rates map[string]structs.ModelRate) {
	if len(rates) < 2 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.names == nil {
		p.names = map[string]*namePriors{}
	}
	np := p.names[name]
	if np == nil {
		if len(p.names) >= maxPriorNames {
			p.forgetOldest()
		}
		np = &namePriors{pairs: map[[2]string][]jobRatio{}}
		p.names[name] = np
	}
	p.tick++
	np.seen = p.tick
	for a, ra := range rates {
		for b, rb := range rates {
			if a == b || !(ra.PerGPU > 0) || !(rb.PerGPU > 0) {
				continue
			}
			k := [2]string{a, b}
			rs := slices.DeleteFunc(np.pairs[k], func(r jobRatio) bool { return r.job == id })
			rs = append(rs, jobRatio{job: id, ratio: rb.PerGPU / ra.PerGPU})
			if len(rs) > maxPriorJobs {
				rs = rs[len(rs)-maxPriorJobs:]
			}
			np.pairs[k] = rs
		}
	}
	p.table = nil
}

// forgetOldest drops the application reported least recently.
func (p *modelPriors) forgetOldest() {
	var oldest string
	for n, np := range p.names {
		if oldest == "" || np.seen < p.names[oldest].seen {
			oldest = n
		}
	}
	delete(p.names, oldest)
}

// ratios returns the medians by application and pair, to read without a
// lock (a snapshot's look-ups); renewed after an observation.
func (p *modelPriors) ratios() map[priorKey]float64 {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.table != nil {
		return p.table
	}
	t := map[priorKey]float64{}
	for n, np := range p.names {
		for k, rs := range np.pairs {
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = r.ratio
			}
			slices.Sort(xs)
			t[priorKey{n, k[0], k[1]}] = median(xs)
		}
	}
	p.table = t
	return t
}

// median of sorted xs (not empty).
func median(xs []float64) float64 {
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// byModel is job j's goodput by GPU model for the policies
// (policy.Job.ByModel) on a cluster of models (sorted; at least two), at
// up to n GPUs: its measured speed per GPU on each model it has run on
// (scaled by the model's own step-time fit where it has one, else by the
// job's speedup table), and on a model it has not, an estimate from its
// speed on another scaled by what jobs of its application showed between
// the two (ratios); a model with neither is absent (the job explores it).
// Nil without a measured speed on any model.
func byModel(j *structs.Job, models []string, n int, ratios map[priorKey]float64) map[string][]float64 {
	o := j.Outlook
	if o == nil || len(o.Rates) == 0 || len(models) < 2 {
		return nil
	}
	rates := make(map[string]float64, len(o.Rates))
	for m, r := range o.Rates {
		rates[m] = r.PerGPU
	}
	table := func(m string, perGPU float64) []float64 {
		if r, ok := o.Rates[m]; ok && r.Serial != nil {
			return assess.ModelTable(perGPU, true, *r.Serial, o.Speedup, n)
		}
		return assess.Table(perGPU, o.Speedup, n) // measured at one count, or estimated
	}
	order := assess.ByRecency(o.Rates, func(r structs.ModelRate) int64 { return r.Updated.UnixNano() })
	out := make(map[string][]float64, len(models))
	for _, m := range models {
		perGPU, ok := rates[m]
		if !ok {
			perGPU, _, ok = assess.Bootstrap(rates, order, m, func(from, to string) (float64, bool) {
				r, ok := ratios[priorKey{j.Spec.Name, from, to}]
				return r, ok
			})
		}
		if tab := table(m, perGPU); ok && tab != nil {
			out[m] = tab
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// clusterModels returns the GPU models of nodes with GPUs, sorted, where
// there are at least two; nil otherwise.
func clusterModels(nodes []policy.Node) []string {
	var out []string
	for i := range nodes {
		if n := &nodes[i]; n.GPUs > 0 && !slices.Contains(out, n.GPUModel) {
			out = append(out, n.GPUModel)
		}
	}
	if len(out) < 2 {
		return nil
	}
	slices.Sort(out)
	return out
}
