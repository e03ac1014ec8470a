package place

import (
	"math/bits"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// This file holds the placement stages. Their order matters:
//
//  1. candidates: the nodes a job may gain GPUs on (constraints, then
//     anti-affinity), computed once per placement;
//  2. room: what the job can gain, own nodes (where MaxGPUsPerNode counts
//     what it holds) apart from the rest, so that a placement is checked
//     whole before anything moves and a gang is never half placed;
//  3. Grow: own nodes first (fewer nodes, no new hosts for Horovod), then
//     nodes of jobs it has affinity with, then best-fit packing.

// nodeRoom is how many GPUs, in whole workers of w, fit on a node with free
// GPUs where the job holds held, under the per-node cap capN (0: none).
func nodeRoom(free, held, w, capN int) int {
	u := free
	if capN > 0 {
		u = min(u, capN-held)
	}
	if u < w {
		return 0
	}
	return u / w * w
}

// candidates fills c.cand with the nodes job j may gain GPUs on: eligible,
// of its GPU model where it holds GPUs (models.go), and not holding a job
// it conflicts with.
func (c *Board) candidates(j int32) {
	c.stale = -1
	c.candSet = setOther
	copy(c.cand, c.eligible(j).bits)
	if m := c.heldModel(j); m >= 0 {
		c.restrict(m)
	}
	job := c.jobs[j]
	if len(c.antiJobs) == 0 {
		return
	}
	drop := func(k int32) {
		for _, s := range c.alloc[k] {
			c.cand.clear(s.node)
		}
	}
	anti := &job.AntiAffinity
	for _, id := range anti.Jobs {
		if k, ok := c.index(id); ok && k != j {
			drop(k)
		}
	}
	if len(anti.Labels) > 0 {
		for k := range c.jobs {
			if int32(k) != j && c.total[k] > 0 && anti.Matches(c.jobs[k]) {
				drop(int32(k))
			}
		}
	}
	for _, k := range c.antiJobs {
		if k != j && c.total[k] > 0 && c.jobs[k].AntiAffinity.Matches(job) {
			drop(k)
		}
	}
}

// capacity is the GPUs, in whole workers of w and under cap capN, that the
// nodes of mask can take from a job holding nothing on them.
func (c *Board) capacity(mask bitset, w, capN int) int {
	r := 0
	for f := w; f <= c.maxFree; f++ {
		if u := nodeRoom(f, 0, w, capN); u > 0 {
			r += countAnd(c.buckets[f], mask) * u
		}
	}
	return r
}

// room returns what job j can gain now. It leaves c.own the room on j's
// own nodes, and c.cand the candidate nodes other than j's own, or, where
// it read the room from the counts (counts.go), c.stale set for fillCand
// to fill them in: a caller that places after room calls fillCand first.
// On a board of several GPU models, a job that holds none can gain GPUs of
// one model only: room is the most it can gain on any one, and it leaves
// the room on each in c.modelRoom (see settle).
func (c *Board) room(j int32) int {
	job := c.jobs[j]
	w, capN := job.GPUs.PerWorker, job.Constraints.MaxGPUsPerNode
	c.own = c.own[:0]
	if c.totalFree < w {
		clear(c.cand)
		c.stale = -1
		clear(c.modelRoom)
		return 0
	}
	set := c.countedSet(j)
	if set == setOther {
		c.candidates(j)
	} else {
		// Most jobs asked fail to fit (a goodput round asks tens of
		// thousands): their candidates are not copied out at all.
		c.stale = j
	}
	if c.modelMask != nil && len(c.alloc[j]) == 0 {
		return c.roomByModel(set, w, capN)
	}
	// r is the room on j's own nodes; out what those nodes count for in
	// the set's capacity, whose counts include them.
	r, out := 0, 0
	for _, s := range c.alloc[j] {
		if set == setOther {
			if !c.cand.has(s.node) {
				continue
			}
			c.cand.clear(s.node)
		} else if !c.inSet(set, s.node) {
			continue
		}
		out += nodeRoom(c.free[s.node], 0, w, capN)
		if x := nodeRoom(c.free[s.node], s.gpus, w, capN); x > 0 {
			c.own = append(c.own, slot{node: s.node, gpus: x})
			r += x
		}
	}
	if set == setOther {
		return r + c.capacity(c.cand, w, capN)
	}
	return r + c.setCapacity(set, w, capN) - out
}

// fillCand fills in c.cand where the last room left it stale: job j's
// candidates but its own nodes, as room leaves them.
func (c *Board) fillCand() {
	j := c.stale
	if j < 0 {
		return
	}
	c.candidates(j)
	c.candSet = c.countedSet(j) // room read it from the counts
	for _, s := range c.alloc[j] {
		c.cand.clear(s.node)
	}
}

// Grow adds g GPUs (a multiple of PerWorker) to job j, or nothing and false
// if they do not fit: its own nodes first, then the nodes of jobs it has
// affinity with and those matching its locality hints, then packed best fit
// (see Resize).
func (c *Board) Grow(j int32, g int) bool {
	if g <= 0 {
		return g == 0
	}
	if c.room(j) < g {
		return false
	}
	c.fillCand()
	c.settle(j, g)
	mark := len(c.undo)
	rem := g
	for _, s := range c.own {
		if take := min(s.gpus, rem); take > 0 {
			c.add(j, s.node, take)
			rem -= take
		}
	}
	return c.growNew(j, rem, mark, false)
}

// growNew places rem more GPUs of job j on nodes where it holds none: the
// nodes of jobs it has affinity with and those matching its locality hints
// first, then the other candidates; packed best fit, or worst fit (see
// pack). If they do not all fit, it undoes every change since the
// undo log had length mark and returns false.
func (c *Board) growNew(j int32, rem, mark int, worst bool) bool {
	job := c.jobs[j]
	w, capN := job.GPUs.PerWorker, job.Constraints.MaxGPUsPerNode
	if rem > 0 && (!job.Affinity.IsZero() || len(job.Locality) > 0) && c.preferred(j) {
		if take := min(rem, c.capacity(c.aux, w, capN)); take > 0 {
			rem -= take - c.pack(j, take, c.aux, setOther, worst)
			for _, s := range c.alloc[j] {
				c.cand.clear(s.node)
			}
		}
	}
	if rem > 0 {
		rem = c.pack(j, rem, c.cand, c.candSet, worst)
	}
	if rem != 0 {
		// Unreachable while room is exact; never leave half a gang.
		c.rollback(mark)
		return false
	}
	return true
}

// preferred fills c.aux with the candidate nodes that hold jobs job j has
// affinity with, or match its locality hints, and reports whether there
// are any.
func (c *Board) preferred(j int32) bool {
	clear(c.aux)
	for _, want := range c.jobs[j].Locality {
		for i, n := range c.nodes {
			if n.Matches(want) {
				c.aux.set(int32(i))
			}
		}
	}
	aff := &c.jobs[j].Affinity
	mark := func(k int32) {
		for _, s := range c.alloc[k] {
			c.aux.set(s.node)
		}
	}
	for _, id := range aff.Jobs {
		if k, ok := c.index(id); ok && k != j {
			mark(k)
		}
	}
	if len(aff.Labels) > 0 {
		for k := range c.jobs {
			if int32(k) != j && c.total[k] > 0 && aff.Matches(c.jobs[k]) {
				mark(int32(k))
			}
		}
	}
	any := false
	for i := range c.aux {
		c.aux[i] &= c.cand[i]
		any = any || c.aux[i] != 0
	}
	return any
}

// pack places g GPUs of job j on the nodes of mask, where j holds nothing,
// on as few nodes as possible: if one node can take the rest, the one whose
// free GPUs fit most tightly (lowest index among equals); otherwise the node
// with the most room, and repeat. With worst, always the node with the most
// room (worst fit). Used nodes leave mask. It returns the GPUs it could not
// place (0 unless the caller skipped the room check). The nodes of mask
// are some of set's (setAll or a model's; setOther: unknown): a free count
// that no node of set has is skipped without a pass over its bits (on a
// full cluster most are empty, and each pass is nodes/64 words).
func (c *Board) pack(j int32, g int, mask bitset, set int, worst bool) int {
	job := c.jobs[j]
	w, capN := job.GPUs.PerWorker, job.Constraints.MaxGPUsPerNode
	for g > 0 {
		n, take := int32(-1), 0
		if !worst && (capN == 0 || capN >= g) {
			for f := g; f <= c.maxFree; f++ {
				if c.noneOf(set, f) {
					continue
				}
				if n = firstAnd(c.buckets[f], mask); n >= 0 {
					take = g
					break
				}
			}
		}
		if n < 0 {
			for f := c.maxFree; f >= w; f-- {
				u := nodeRoom(f, 0, w, capN)
				if u == 0 || c.noneOf(set, f) {
					continue
				}
				if n = firstAnd(c.buckets[f], mask); n >= 0 {
					take = min(u, g)
					break
				}
			}
		}
		if n < 0 {
			return g
		}
		c.add(j, n, take)
		mask.clear(n)
		g -= take
	}
	return 0
}

// GrowMostFree places g GPUs (a multiple of PerWorker) of job j, which
// holds none, worst fit: on the node with the most room (lowest index among
// equals), then the next, until they are placed, as the Tiresias port of
// Pollux's simulator allocates; the nodes of jobs it has affinity with and
// those matching its locality hints first, as in Grow. It places nothing
// and returns false if they do not fit.
func (c *Board) GrowMostFree(j int32, g int) bool {
	if g <= 0 || c.total[j] != 0 {
		return g == 0
	}
	if c.room(j) < g {
		return false
	}
	c.fillCand()
	c.settle(j, g)
	return c.growNew(j, g, len(c.undo), true)
}

// Spread places g GPUs of job j, which holds none, one worker per node in
// turn, starting at node index from (nodes are indexed in ID order) and going
// round the nodes; it returns the first node used, or -1 and nothing placed
// if they do not fit.
func (c *Board) Spread(j int32, g int, from int32) int32 {
	if c.room(j) < g || g <= 0 || c.total[j] != 0 {
		return -1
	}
	c.fillCand()
	c.settle(j, g)
	mark := len(c.undo)
	job := c.jobs[j]
	w, capN := job.GPUs.PerWorker, job.Constraints.MaxGPUsPerNode
	first, pos := int32(-1), from
	for g > 0 {
		n := c.nextRoom(c.cand, w, pos)
		if n < 0 {
			c.rollback(mark)
			return -1
		}
		c.add(j, n, w)
		g -= w
		if first < 0 {
			first = n
		}
		if nodeRoom(c.free[n], c.heldOn(j, n), w, capN) == 0 {
			c.cand.clear(n)
		}
		pos = n + 1
	}
	return first
}

// nextRoom returns the first node of mask, at index pos or after and going
// round, with at least w free GPUs; -1 if none.
func (c *Board) nextRoom(mask bitset, w int, pos int32) int32 {
	nw := len(mask)
	if nw == 0 || w > c.maxFree {
		return -1
	}
	if int(pos) >= len(c.nodes) || pos < 0 {
		pos = 0
	}
	start, bit := int(pos)>>6, uint(pos)&63
	for k := 0; k <= nw; k++ {
		i := (start + k) % nw
		var x uint64
		for f := w; f <= c.maxFree; f++ {
			x |= c.buckets[f][i]
		}
		x &= mask[i]
		switch k {
		case 0:
			x &= ^uint64(0) << bit
		case nw:
			x &= (1 << bit) - 1
		}
		if x != 0 {
			return int32(i*64 + bits.TrailingZeros64(x))
		}
	}
	return -1
}

// Shrink takes g GPUs from job j, whole workers from the nodes where it
// holds the fewest (highest index among equals), so that it keeps to few
// nodes.
func (c *Board) Shrink(j int32, g int) {
	for g > 0 && len(c.alloc[j]) > 0 {
		a := c.alloc[j]
		best := 0
		for i, s := range a {
			if s.gpus < a[best].gpus || (s.gpus == a[best].gpus && s.node > a[best].node) {
				best = i
			}
		}
		take := min(a[best].gpus, g)
		c.add(j, a[best].node, -take)
		g -= take
	}
}

// repair brings running jobs whose allocation breaks the gang rule back
// within it; see Board.
func (c *Board) repair() {
	var nodes []slot
	for j := range c.jobs {
		jj := int32(j)
		if c.total[j] == 0 {
			continue
		}
		r := c.jobs[j].GPUs
		if d := c.repairModels(jj); d > 0 {
			c.Notef(jj, "repaired: held GPUs of more than one model; kept those of %s, dropped %s",
				c.ModelOf(jj), policy.GPUs(d))
		}
		before, mark := c.total[j], len(c.undo)
		nodes = append(nodes[:0], c.alloc[j]...)
		for _, s := range nodes {
			if part := s.gpus % r.PerWorker; part != 0 {
				c.add(jj, s.node, -part)
			}
		}
		if c.total[j] > r.Max {
			c.Shrink(jj, c.total[j]-r.Max)
		}
		if t := c.total[j]; t > 0 && t < r.Min && !c.Grow(jj, r.Min-t) {
			c.Shrink(jj, t)
			c.Notef(jj, "stopped: held %s, below its minimum %d, and could not grow back", policy.GPUs(t), r.Min)
			continue
		}
		if len(c.undo) > mark {
			c.Notef(jj, "repaired: held %s in a shape the gang rule forbids; now %d", policy.GPUs(before), c.total[j])
		}
	}
	c.undo = c.undo[:0]
}
