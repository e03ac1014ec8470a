package place

// The room of a job (Board.room) is what its candidate nodes can take:
// per free-GPU count f, the candidates with f free GPUs times what one of
// them takes. Counted over the bits, that is (free counts) x (models) x
// (nodes/64) words for every room asked, and a goodput round at 10,000
// nodes asks it of tens of thousands of jobs (most of a round's time).
// But the candidates of almost every job are a set the board counts
// anyway: all the nodes (no constraints), or all the nodes of one GPU
// model (a model constraint, or the model a job holds; goodput-hetero
// sets one on every job). For those, room reads the board's counts of
// nodes by model and free GPUs (Board.counts, kept by apply) and takes out
// the job's own nodes, which it counts apart; any other set of candidates
// (other constraints, anti-affinity) is counted over the bits as before.
// Both give the same numbers: a node with f >= 1 free GPUs has GPUs to
// give (it is in Board.all), so for f >= 1 the nodes of model m counted
// are exactly buckets[f] & all & modelMask[m].

// The sets of nodes a nodeMask can be, besides a model's index (>= 0).
const (
	setAll   = -1 // all the nodes with GPUs to give (Board.all)
	setOther = -2 // any other: counted over the bits
)

// nodeMask is a set of eligible nodes and which set it is: setAll, the
// index of a GPU model where it is exactly all the nodes of that model
// with GPUs to give, or setOther.
type nodeMask struct {
	bits bitset
	set  int
}

// setOf says which set the nodes of m are (see nodeMask).
func (c *Board) setOf(m bitset) int {
	if equalAnd(m, c.all, c.all) {
		return setAll
	}
	for k, mm := range c.modelMask {
		if equalAnd(m, c.all, mm) {
			return k
		}
	}
	return setOther
}

// countedSet is the set of job j's candidates where room can read their
// room from the counts (setAll or a model's index), else setOther.
func (c *Board) countedSet(j int32) int {
	if c.countsOff || len(c.antiJobs) > 0 {
		return setOther
	}
	set := c.eligible(j).set
	if h := c.heldModel(j); h >= 0 {
		// Its candidates are kept to the model it holds.
		switch set {
		case setAll, h:
			return h
		default:
			return setOther
		}
	}
	return set
}

// inSet reports whether node n is in set (setAll or a model's index).
func (c *Board) inSet(set int, n int32) bool {
	return c.all.has(n) && (set == setAll || int(c.modelOf[n]) == set)
}

// countAt is the index in counts of node n's entry with f free GPUs.
func (c *Board) countAt(n int32, f int) int {
	if c.modelOf == nil {
		return f
	}
	return int(c.modelOf[n])*(c.maxFree+1) + f
}

// setCapacity is capacity(nodes of set, w, capN) read from the counts:
// set is setAll or a model's index.
func (c *Board) setCapacity(set, w, capN int) int {
	r := 0
	for f := w; f <= c.maxFree; f++ {
		if u := nodeRoom(f, 0, w, capN); u > 0 {
			r += c.nodesWith(set, f) * u
		}
	}
	return r
}

// nodesWith is the number of nodes of set (setAll or a model's index)
// with exactly f free GPUs, read from the counts.
func (c *Board) nodesWith(set, f int) int {
	stride := c.maxFree + 1
	lo, hi := 0, len(c.counts)/stride // the models counted
	if set >= 0 {
		lo, hi = set, set+1
	}
	n := 0
	for m := lo; m < hi; m++ {
		n += int(c.counts[m*stride+f])
	}
	return n
}

// FreeFor returns a bound on the GPUs job j could gain now, at least its
// room (RoomOf) and far cheaper: the free GPUs of its GPU model's nodes
// where its candidates are all of them (countedSet), else all the free
// GPUs. A step larger than it cannot be placed, so a policy handing out
// free GPUs skips it without asking for the room (most steps, on a board
// whose jobs' models are full).
func (c *Board) FreeFor(j int32) int {
	set := c.countedSet(j)
	if set < 0 || c.modelOf == nil {
		return c.totalFree
	}
	return c.modelFree[set] // every free GPU of the set's nodes
}

// noneOf reports whether no node of set (setAll or a model's index) has
// exactly f free GPUs, from the counts; false for setOther (and with the
// counts off, so that the tests compare pack with and without it).
func (c *Board) noneOf(set, f int) bool {
	return set != setOther && !c.countsOff && c.nodesWith(set, f) == 0
}
