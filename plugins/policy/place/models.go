package place

import (
	"math"
	"math/bits"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A job runs on one GPU model at a time (policy.Validate's one-model rule):
// one training job across A100s and V100s runs at the speed of its slowest
// worker, and Horovod's and torchrun's collectives assume peers alike. On a
// board whose nodes with GPUs are of more than one model (policy.Node.
// GPUModel), every placement keeps each job's GPUs on nodes of one model:
//
//   - a job that holds GPUs grows only on nodes of its model (candidates);
//   - a job that holds none is placed on the model that suits it best among
//     those where the GPUs fit (chooseModel), unless the caller names one
//     (GrowOn);
//   - NewBoard repairs a running job that holds GPUs of more than one model
//     (a snapshot from before this rule, or an external policy's kept
//     plan): it keeps the model holding most of its GPUs.
//
// On a board of one model (most clusters) none of this costs anything:
// modelMask is nil.

// modelIndex fills the board's model index: the models of the nodes with
// GPUs, sorted, each node's model and a bitset of nodes per model; nothing
// where there is at most one model.
func (c *Board) modelIndex() {
	var names []string
	for _, n := range c.nodes {
		if n.GPUs > 0 && !slices.Contains(names, n.GPUModel) {
			names = append(names, n.GPUModel)
		}
	}
	if len(names) < 2 {
		return
	}
	slices.Sort(names)
	c.models = names
	c.modelOf = make([]int16, len(c.nodes))
	c.modelMask = make([]bitset, len(names))
	c.modelRoom = make([]int, len(names))
	c.modelFree = make([]int, len(names))
	for m := range names {
		c.modelMask[m] = newBitset(len(c.nodes))
	}
	for i, n := range c.nodes {
		m, ok := slices.BinarySearch(names, n.GPUModel)
		if !ok {
			// A node without GPUs whose model no node with GPUs has: it
			// has nothing to give, so any model will do.
			m = 0
		}
		c.modelOf[i] = int16(m)
		c.modelMask[m].set(int32(i))
	}
}

// Models returns the GPU models of the board's nodes with GPUs, sorted,
// where there are at least two; nil on a board of one model (where jobs
// need no choice of model). The slice is shared: do not modify it.
func (c *Board) Models() []string { return c.models }

// ModelOf returns the GPU model of the nodes job j holds GPUs on in the
// working state, or "" if it holds none.
func (c *Board) ModelOf(j int32) string {
	if len(c.alloc[j]) == 0 {
		return ""
	}
	return c.nodes[c.alloc[j][0].node].GPUModel
}

// heldModel is the model index of job j's GPUs, or -1 if it holds none or
// the board has one model.
func (c *Board) heldModel(j int32) int {
	if c.modelMask == nil || len(c.alloc[j]) == 0 {
		return -1
	}
	return int(c.modelOf[c.alloc[j][0].node])
}

// ModelRoom returns how many GPUs job j could gain now on nodes of GPU
// model model: 0 where the job holds GPUs of another model, or the board
// has no such model. On a board of one model it is RoomOf(j) for that
// model.
func (c *Board) ModelRoom(j int32, model string) int {
	if c.modelMask == nil {
		if c.hasModel(model) {
			return c.room(j)
		}
		return 0
	}
	m, ok := slices.BinarySearch(c.models, model)
	if !ok {
		return 0
	}
	r := c.room(j)
	if len(c.alloc[j]) > 0 {
		if c.heldModel(j) != m {
			return 0
		}
		return r
	}
	return c.modelRoom[m]
}

// hasModel reports, on a board of one model, whether model is it.
func (c *Board) hasModel(model string) bool {
	for _, n := range c.nodes {
		if n.GPUs > 0 {
			return n.GPUModel == model
		}
	}
	return false
}

// GrowOn places g GPUs (a multiple of PerWorker) of job j, which holds
// none, on nodes of GPU model model, as Grow packs them; or places nothing
// and returns false if they do not fit there. A job that holds GPUs grows
// with Grow, on its own model.
func (c *Board) GrowOn(j int32, g int, model string) bool {
	if g <= 0 || c.total[j] != 0 {
		return g == 0
	}
	if c.modelMask == nil {
		return c.hasModel(model) && c.Grow(j, g)
	}
	m, ok := slices.BinarySearch(c.models, model)
	if !ok || c.room(j) < g || c.modelRoom[m] < g {
		return false
	}
	c.fillCand()
	c.restrict(m)
	return c.growNew(j, g, len(c.undo), false)
}

// roomByModel is room's last step for job j, which holds no GPUs, on a
// board of several models, its candidates being set (those of c.cand for
// setOther): the room on each model (modelRoom), of which it returns the
// largest, since the job's GPUs must all be of one.
func (c *Board) roomByModel(set, w, capN int) int {
	best := 0
	for m, mask := range c.modelMask {
		r := 0
		switch set {
		case setOther:
			for f := w; f <= c.maxFree; f++ {
				if u := nodeRoom(f, 0, w, capN); u > 0 {
					r += countAnd3(c.buckets[f], c.cand, mask) * u
				}
			}
		case setAll, m:
			// The candidates of model m are all its nodes (counts.go).
			r = c.setCapacity(m, w, capN)
		}
		// (Candidates of another model: none of m's.)
		c.modelRoom[m] = r
		best = max(best, r)
	}
	return best
}

// settle narrows c.cand, after room found at least g GPUs of room for job
// j, to the nodes of the model j's g GPUs go to: none to do where j holds
// GPUs (candidates kept to its model) or the board has one model.
func (c *Board) settle(j int32, g int) {
	if c.modelMask == nil || c.total[j] > 0 {
		return
	}
	c.restrict(c.chooseModel(c.jobs[j], g))
}

// restrict narrows c.cand to the nodes of model m.
func (c *Board) restrict(m int) {
	c.candSet = m
	for i, w := range c.modelMask[m] {
		c.cand[i] &= w
	}
}

// chooseModel returns the model that g GPUs of job, which holds none, go
// to, among those with room for them (modelRoom, which room filled): the
// one where the job is fastest at g GPUs by its measured or estimated
// goodput (policy.Job.ByModel); among equals the one with the most room,
// so that the job leaves the tighter model to others; then the first by
// name. A model without a figure counts as good as the job's best model
// with one (optimism: a job measured on V100s only is not kept from
// A100s it has never tried; it explores them where they have more room).
func (c *Board) chooseModel(job *policy.Job, g int) int {
	known := 0.0
	for m := range c.modelRoom {
		known = max(known, modelRate(job, c.models[m], g))
	}
	best, bestRate := -1, 0.0
	for m, r := range c.modelRoom {
		if r < g {
			continue
		}
		rate := modelRate(job, c.models[m], g)
		if rate == 0 {
			rate = known
		}
		switch {
		case best < 0, rate > bestRate, rate == bestRate && r > c.modelRoom[best]:
			best, bestRate = m, rate
		}
	}
	return best
}

// modelRate is job's goodput with g GPUs of model (ByModel), or 0 where it
// has no usable figure.
func modelRate(job *policy.Job, model string, g int) float64 {
	tab := job.ByModel[model]
	if len(tab) == 0 {
		return 0
	}
	x := tab[min(g, len(tab))-1]
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	return x
}

// repairModels keeps job j, holding GPUs of more than one model, on the
// model that holds most of them (the first by name among equals), and
// returns the GPUs it dropped; 0 where j holds one model's.
func (c *Board) repairModels(j int32) int {
	if c.modelMask == nil || len(c.alloc[j]) < 2 {
		return 0
	}
	first := c.modelOf[c.alloc[j][0].node]
	mixed := false
	for _, s := range c.alloc[j][1:] {
		mixed = mixed || c.modelOf[s.node] != first
	}
	if !mixed {
		return 0
	}
	clear(c.modelRoom)
	for _, s := range c.alloc[j] {
		c.modelRoom[c.modelOf[s.node]] += s.gpus
	}
	keep := 0
	for m, g := range c.modelRoom {
		if g > c.modelRoom[keep] {
			keep = m
		}
	}
	dropped := 0
	for _, s := range slices.Clone(c.alloc[j]) {
		if int(c.modelOf[s.node]) != keep {
			c.add(j, s.node, -s.gpus)
			dropped += s.gpus
		}
	}
	return dropped
}

// countAnd3 returns the number of indexes in all of a, b and m.
func countAnd3(a, b, m bitset) int {
	n := 0
	for i, w := range a {
		n += bits.OnesCount64(w & b[i] & m[i])
	}
	return n
}
