package assess

import (
	"cmp"
	"maps"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A job's speed is kept per GPU model (issue 29): one training job runs
// at another pace on an A100 than on a V100, so the observations of each
// model are read apart. The scaling with the GPU count (the speedup
// table) is fitted on one model's observations (FitModel); the speed of
// one GPU of each model (PerGPU) is read through that table.

// OfModel returns the observations of obs on GPU model model, in order.
// obs itself where none names a model (a record from before models were
// stamped): they are all the job's.
func OfModel(obs []Observation, model string) []Observation {
	if !slices.ContainsFunc(obs, func(o Observation) bool { return o.Model != "" }) {
		return obs
	}
	var out []Observation
	for _, o := range obs {
		if o.Model == model {
			out = append(out, o)
		}
	}
	return out
}

// FitModel returns the GPU model whose observations the speedup table is
// fitted on: cur (the model the job runs on) where it has been measured
// at two GPU counts or more, else the model measured at the most counts
// (cur first among equals, then by name); cur where no observation names
// a model. A table fitted across models would read an A100's speed at 2
// GPUs against a V100's at 1 as scaling.
func FitModel(obs []Observation, cur string) string {
	counts := map[string]map[int]bool{}
	for _, o := range obs {
		if o.Model == "" || o.GPUs < 1 || !positive(o.Throughput) {
			continue
		}
		if counts[o.Model] == nil {
			counts[o.Model] = map[int]bool{}
		}
		counts[o.Model][o.GPUs] = true
	}
	if len(counts) == 0 || len(counts[cur]) >= 2 {
		return cur
	}
	best := cur
	for _, m := range slices.Sorted(maps.Keys(counts)) {
		if len(counts[m]) > len(counts[best]) {
			best = m
		}
	}
	return best
}

// Rate is a job's speed on one GPU model, read from its observations
// there (see PerGPU).
type Rate struct {
	PerGPU   float64
	Measured int // the largest GPU count observed
	N        int // the observations read
	// Fitted is whether the model's own observations, at two GPU counts
	// or more, fit its scaling (Amdahl's law, Serial as ChooseGPUs's):
	// then PerGPU is the fit's one-GPU throughput, and the model's table
	// is PerGPU times amdahl(Serial, g) (see ModelTable).
	Fitted bool
	Serial float64
}

// PerGPU returns, for each GPU model of obs, the job's throughput on one
// GPU of it: each observation's throughput divided by the speedup at its
// GPU count (speedup: the job's table, policy.Job.Speedup's format; nil
// is linear), the median of those. Observations with no model, a count
// below 1 or a throughput that is not a positive number are left out; a
// model with none left is absent.
func PerGPU(obs []Observation, speedup []float64) map[string]Rate {
	by := map[string][]float64{}
	most := map[string]int{}
	for _, o := range obs {
		if o.Model == "" || o.GPUs < 1 || !positive(o.Throughput) {
			continue
		}
		if x := o.Throughput / policy.SpeedupAt(speedup, o.GPUs); positive(x) {
			by[o.Model] = append(by[o.Model], x)
			most[o.Model] = max(most[o.Model], o.GPUs)
		}
	}
	out := make(map[string]Rate, len(by))
	for m, xs := range by {
		r := Rate{PerGPU: median(xs), Measured: most[m], N: len(xs)}
		// A model measured at two counts or more has a step-time fit
		// of its own: its scaling need not be the table's model's.
		if sc := ChooseGPUs(OfModel(obs, m), Counts{Min: 1, Max: most[m], PerWorker: 1}, DefaultThreshold); !sc.Measuring && positive(sc.T1) {
			r.PerGPU, r.Fitted, r.Serial = sc.T1, true, sc.Serial
		}
		out[m] = r
	}
	return out
}

// ModelTable is Table for a model whose speed r carries its own fit
// (Fitted: PerGPU times its Amdahl speedup), else Table on the job's
// speedup table.
func ModelTable(perGPU float64, fitted bool, serial float64, speedup []float64, n int) []float64 {
	if !fitted || !finite(serial) || serial < 0 || serial > 1 {
		return Table(perGPU, speedup, n)
	}
	own := make([]float64, min(max(n, 0), MaxSpeedupTable))
	for g := range own {
		own[g] = amdahl(serial, g+1)
	}
	return Table(perGPU, own, n)
}

// Table is a job's goodput table on a model whose one GPU does perGPU
// samples/s: entry g-1 is perGPU times the speedup at g GPUs (speedup nil:
// linear), for g = 1..n (n at most MaxSpeedupTable); the format of
// policy.Job.ByModel's entries. Nil for n < 1 or a rate that is not a
// positive number.
func Table(perGPU float64, speedup []float64, n int) []float64 {
	if n < 1 || !positive(perGPU) {
		return nil
	}
	out := make([]float64, min(n, MaxSpeedupTable))
	for g := range out {
		out[g] = perGPU * policy.SpeedupAt(speedup, g+1)
	}
	return out
}

// Bootstrap estimates a job's speed per GPU on a model it has not run on
// from its measured speeds (rates, by model) and what other jobs of its
// application showed between models (ratio(from, to) returns the median
// ratio and whether there is one): the estimate from the model it was
// measured on most recently (order: its models, most recent first) that
// has a ratio to the new one. ok is false where none has (the model is
// then left unknown: the job explores it).
func Bootstrap(rates map[string]float64, order []string, to string, ratio func(from, to string) (float64, bool)) (perGPU float64, from string, ok bool) {
	for _, m := range order {
		r, has := ratio(m, to)
		if x := rates[m]; has && positive(r) && positive(x) {
			return x * r, m, true
		}
	}
	return 0, "", false
}

// ByRecency returns the models of rates, the most recently updated first
// (then by name), for Bootstrap's order.
func ByRecency[T any](rates map[string]T, updated func(T) int64) []string {
	out := slices.Collect(maps.Keys(rates))
	slices.SortFunc(out, func(a, b string) int {
		return cmp.Or(cmp.Compare(updated(rates[b]), updated(rates[a])), cmp.Compare(a, b))
	})
	return out
}
