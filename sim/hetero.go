package sim

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// TypedModel is a Model whose speed depends on the GPU model it runs on: a
// job of a heterogeneous cluster (Config.Groups). The simulator asks it
// with the GPU model of the job's GPUs; Model's own methods answer for its
// Default model.
type TypedModel interface {
	Model
	// RateOn is Rate on GPUs of model gpu.
	RateOn(gpu string, placement []int, done float64) (rate, until float64)
	// SpeedupOn is Speedup on nodes of model gpu.
	SpeedupOn(gpu string, done float64, maxGPUs, gpusPerNode int) (table []float64, until float64)
	// ByModel returns the job's goodput by GPU model and count
	// (policy.Job.ByModel) at progress done, on nodes of perNode[model]
	// GPUs, at most maxGPUs and capacity[model] GPUs of a model, and the
	// progress up to which it holds. The maps are shared: read-only.
	ByModel(done float64, maxGPUs int, perNode, capacity map[string]int) (byModel map[string][]float64, until float64)
}

// Hetero is a goodput job (Goodput) of a heterogeneous cluster: one
// Goodput model per GPU model, from that model's profile of the job's
// application (Sia's per-type placements and scalability; the validation
// curves, and so the work, are the same), every rate divided by Slowdown
// (Sia's calibration of its simulator to its testbed).
type Hetero struct {
	// Models are by GPU model (policy.Node.GPUModel); Default is the one
	// whose rate Model's methods give.
	Models   map[string]*Goodput
	Default  string
	Slowdown float64
	// PerNode is the GPUs a node of each model has, for Best.
	PerNode map[string]int

	cache *heteroCache // shared by the jobs of one application and request
}

type heteroCache struct {
	mu sync.Mutex
	m  map[[2]int]map[string][]float64 // (epoch, maxGPUs) -> ByModel
}

// NewHetero returns the model of a job over models, all of the same
// application (the same work) and batch mode.
func NewHetero(models map[string]*Goodput, def string, slowdown float64, perNode map[string]int) (*Hetero, error) {
	if _, ok := models[def]; !ok {
		return nil, fmt.Errorf("default GPU model %q has no job model", def)
	}
	if !(slowdown >= 1e-3 && slowdown <= 1e3) {
		return nil, fmt.Errorf("slowdown %g is not from 0.001 to 1000", slowdown)
	}
	w := models[def].Work()
	for m, g := range models {
		if g.Work() != w {
			return nil, fmt.Errorf("GPU model %s: the work %g differs from %s's %g (not one application?)", m, g.Work(), def, w)
		}
	}
	return &Hetero{Models: models, Default: def, Slowdown: slowdown, PerNode: perNode,
		cache: &heteroCache{m: make(map[[2]int]map[string][]float64)}}, nil
}

// Work implements Model.
func (h *Hetero) Work() float64 { return h.Models[h.Default].Work() }

// WholeSeconds implements WholeSecondModel, as Goodput.
func (h *Hetero) WholeSeconds() bool { return true }

// Rate implements Model: on the Default model.
func (h *Hetero) Rate(placement []int, done float64) (float64, float64) {
	return h.RateOn(h.Default, placement, done)
}

// RateOn implements TypedModel. A model it has no profile of runs it at
// the rate of the slowest it has (never faster than measured).
func (h *Hetero) RateOn(gpu string, placement []int, done float64) (float64, float64) {
	g, ok := h.Models[gpu]
	if !ok {
		rate, until := math.Inf(1), 0.0
		for _, m := range slices.Sorted(maps.Keys(h.Models)) {
			r, u := h.Models[m].Rate(placement, done)
			rate, until = min(rate, r), u
		}
		return rate / h.Slowdown, until
	}
	r, u := g.Rate(placement, done)
	if g.App.epoch(done) >= g.App.Epochs {
		return r, u // done: Goodput's rate there is a placeholder
	}
	return r / h.Slowdown, u
}

// Speedup implements Model: on the Default model.
func (h *Hetero) Speedup(done float64, maxGPUs, gpusPerNode int) ([]float64, float64) {
	return h.SpeedupOn(h.Default, done, maxGPUs, gpusPerNode)
}

// SpeedupOn implements TypedModel (the slowdown cancels in a ratio).
func (h *Hetero) SpeedupOn(gpu string, done float64, maxGPUs, gpusPerNode int) ([]float64, float64) {
	g, ok := h.Models[gpu]
	if !ok {
		g = h.Models[h.Default]
	}
	return g.Speedup(done, min(maxGPUs, g.MaxReplicas()), gpusPerNode)
}

// ByModel implements TypedModel: goodput in progress a second, so one
// unit for all models of the job.
func (h *Hetero) ByModel(done float64, maxGPUs int, perNode, capacity map[string]int) (map[string][]float64, float64) {
	d := h.Models[h.Default]
	e := min(d.App.epoch(done), d.App.Epochs-1)
	until := d.App.progress[e+1]
	key := [2]int{e, maxGPUs}
	h.cache.mu.Lock()
	out, ok := h.cache.m[key]
	h.cache.mu.Unlock()
	if ok {
		return out, until
	}
	out = make(map[string][]float64, len(perNode))
	for m, gpn := range perNode {
		g, ok := h.Models[m]
		if !ok || gpn < 1 {
			continue
		}
		n := min(maxGPUs, g.MaxReplicas(), capacity[m])
		if n < 1 {
			continue
		}
		tab := make([]float64, n)
		for k := 1; k <= n; k++ {
			tab[k-1] = g.goodput(packed(k, gpn), e) / h.Slowdown
		}
		out[m] = tab
	}
	h.cache.mu.Lock()
	h.cache.m[key] = out
	h.cache.mu.Unlock()
	return out, until
}

// Best implements Model: the best over the models it has nodes of
// (PerNode), each packed on its own nodes.
func (h *Hetero) Best(req policy.GPURequest, _ int) (float64, float64) {
	bestT, bestG := math.Inf(1), math.Inf(1)
	for m, gpn := range h.PerNode {
		g, ok := h.Models[m]
		if !ok {
			continue
		}
		r := req
		r.Max = min(r.Max, g.MaxReplicas())
		if r.Max < r.Min {
			continue
		}
		t, gs := g.Best(r, gpn)
		bestT, bestG = min(bestT, t*h.Slowdown), min(bestG, gs*h.Slowdown)
	}
	return bestT, bestG
}

// MaxReplicas returns the most GPUs the job can use on any one model.
func (h *Hetero) MaxReplicas() int {
	n := 1
	for _, g := range h.Models {
		n = max(n, g.MaxReplicas())
	}
	return n
}

// buildCluster makes the run's nodes from its config: the groups in order,
// node IDs numbered across them.
func (s *simulator) buildCluster() {
	groups := s.cfg.ClusterGroups()
	total := 0
	for _, g := range groups {
		total += g.Nodes
	}
	s.nodeIdx = make(map[string]int, total)
	s.perNode = make(map[string]int, len(groups))
	s.capacity = make(map[string]int, len(groups))
	width := len(fmt.Sprint(total - 1))
	most := 0
	for _, g := range groups {
		for range g.Nodes {
			i := len(s.nodes)
			id := fmt.Sprintf("node-%0*d", width, i)
			s.nodes = append(s.nodes, policy.Node{ID: id, Name: id, GPUs: g.GPUsPerNode, GPUModel: g.Model})
			s.nodeIdx[id] = i
			s.gpuBase = append(s.gpuBase, int32(s.gpus))
			s.gpus += g.GPUsPerNode
		}
		s.perNode[g.Model] = g.GPUsPerNode
		s.capacity[g.Model] += g.Nodes * g.GPUsPerNode
		if c := g.Nodes * g.GPUsPerNode; c > most {
			most, s.defModel = c, g.Model
		}
	}
	if s.cfg.Gantt {
		s.owner = make([][]int32, len(s.nodes))
		s.since = make([][]float64, len(s.nodes))
		for i, n := range s.nodes {
			s.owner[i] = slices.Repeat([]int32{-1}, n.GPUs)
			s.since[i] = make([]float64, n.GPUs)
		}
	}
}

// setGPUModel notes the GPU model of job j's GPUs (counts per node): the
// model they are all of, or, where they mix models, the one holding most
// of them (ties: the first node's), with the models in mixed. A job that
// holds none keeps the model it last held.
func (s *simulator) setGPUModel(j *simJob, counts []int) {
	j.mixed = j.mixed[:0]
	var per []int // GPUs by j.mixed's models
	for n, g := range counts {
		if g <= 0 {
			continue
		}
		m := s.nodes[n].GPUModel
		i := slices.Index(j.mixed, m)
		if i < 0 {
			j.mixed, per = append(j.mixed, m), append(per, 0)
			i = len(per) - 1
		}
		per[i] += g
	}
	if len(per) == 0 {
		return
	}
	top := 0
	for i := range per {
		if per[i] > per[top] {
			top = i
		}
	}
	if j.gpu != j.mixed[top] {
		j.speedTo = 0 // its speedup table is another model's
	}
	j.gpu = j.mixed[top]
	if len(j.mixed) == 1 {
		j.mixed = j.mixed[:0]
	}
}

// rateOf returns job j's rate on its placement: on the model of its GPUs
// for a TypedModel; a job whose GPUs mix models runs at the slowest of
// their rates (a synchronous data-parallel step waits for its slowest
// worker).
func (s *simulator) rateOf(j *simJob) (float64, float64) {
	if j.typed == nil {
		return j.spec.Model.Rate(j.placement, j.done)
	}
	if len(j.mixed) == 0 {
		return j.typed.RateOn(j.gpu, j.placement, j.done)
	}
	rate, until := math.Inf(1), math.Inf(1)
	for _, m := range j.mixed {
		r, u := j.typed.RateOn(m, j.placement, j.done)
		rate, until = min(rate, r), min(until, u)
	}
	return rate, until
}

// speedupOf returns job j's speedup table (policy.Job.Speedup): on the
// nodes of the model it runs on for a TypedModel.
func (s *simulator) speedupOf(j *simJob) ([]float64, float64) {
	gpn := s.cfg.SpeedupNodeGPUs
	if j.typed == nil {
		if gpn == 0 {
			gpn = s.cfg.LargestNode()
		}
		return j.spec.Model.Speedup(j.done, j.spec.GPUs.Max, gpn)
	}
	gpu := j.gpu
	if s.cfg.SpeedupModel != "" {
		gpu = s.cfg.SpeedupModel
	}
	if gpn == 0 {
		gpn = s.perNode[gpu]
	}
	return j.typed.SpeedupOn(gpu, j.done, j.spec.GPUs.Max, gpn)
}

// byModelOf brings job j's goodput by model up to date: nil on a cluster
// of one model or for a model that is not a TypedModel.
func (s *simulator) byModelOf(j *simJob) {
	if j.typed == nil || len(s.perNode) < 2 || (j.byModel != nil && j.done < j.byTo) {
		return
	}
	j.byModel, j.byTo = j.typed.ByModel(j.done, j.spec.GPUs.Max, s.perNode, s.capacity)
}

// sameByModel reports whether a and b are the same shared map.
func sameByModel(a, b map[string][]float64) bool {
	if len(a) != len(b) {
		return false
	}
	for m, t := range a {
		if !sameTable(t, b[m]) {
			return false
		}
	}
	return true
}
