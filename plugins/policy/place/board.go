package place

import (
	"cmp"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// ErrNoRoom is returned by Board.Resize when the GPUs do not fit.
var ErrNoRoom = errors.New("not enough room")

// Board is a working copy of a snapshot's allocations with an index of
// free capacity. A policy builds its plan by resizing jobs in a Board and
// then calling Plan; every placement it makes honours the rules of
// policy.Validate (whole workers, capacity, constraints, anti-affinity). The
// builtins are written on it, and so can external policies be.
//
// Placement is indexed: nodes are sorted by ID and kept in one bitset per
// free-GPU count, so finding the tightest-fitting eligible node costs
// (free-count buckets) x (nodes/64) word operations and allocates nothing.
//
// NewBoard repairs running jobs whose allocation breaks the gang rule (a
// node died under a worker, a snapshot reports a part of a worker), in
// submission order: partial workers are dropped, a total above Max is shrunk
// to Max, a total below Min is grown back to Min where it fits and otherwise
// stopped. Each repair leaves a reason.
//
// A Board is not safe for concurrent use.
type Board struct {
	nodes   []*policy.Node // sorted by ID; a node's index is its place here
	nodeIdx map[string]int32
	// at is each node's index here by its index in the snapshot's Nodes,
	// for a vouched snapshot (policy.Snapshot.Vouched); nil for others.
	at      []int32
	free    []int
	buckets []bitset // buckets[f]: the nodes with exactly f free GPUs
	all     bitset   // the nodes that have GPUs to give at all
	// counts[m*(maxFree+1)+f] is the number of nodes of GPU model m (0 on
	// a board of one model) with exactly f free GPUs: the buckets'
	// populations by model, kept by apply, so that the room of a job whose
	// candidates are all the nodes of a model (countedSet) is read from them
	// instead of counted over every node's bits (room).
	counts    []int32
	maxFree   int
	totalFree int
	// modelFree[m] is the free GPUs of model m's nodes (nil on a board of
	// one model), kept by apply: FreeFor's answer for a job of one model.
	modelFree []int

	jobs   []*policy.Job    // submission order
	jobIdx map[string]int32 // nil until an ID is looked up (index)
	alloc  [][]slot         // per job, sorted by node
	total  []int
	moved  []bool               // per job: its allocation changed since NewBoard (apply)
	masks  map[string]*nodeMask // eligible nodes per constraint set
	// modelMasks are the masks of the constraint sets of a GPU model
	// alone, by the model's name (eligible).
	modelMasks map[string]*nodeMask
	jobMask    []*nodeMask // per constrained job, nil until first needed (eligible)
	// pins are the GPU models jobs are confined to by PinModel, per job
	// ("" for none); nil until the first pin.
	pins     []string
	noMask   nodeMask // no node: a job pinned to a model its constraint forbids
	allMask  nodeMask // all as a nodeMask: unconstrained jobs'
	antiJobs []int32  // jobs with an anti-affinity selector

	// notes are the reasons noted per job since the last Plan: in few
	// while at most fewNotes jobs have some (a round that starts nobody
	// notes one or two), then by job index; extra those for IDs that are
	// not in the snapshot; noted counts the jobs with notes.
	few   []jobNotes
	notes [][]string
	extra map[string][]string
	noted int
	// waiting is the reason of the jobs without notes that wait (wait):
	// the plan's Waiting.
	waiting []string
	// starts are the starts noted this round (NoteStarted), by job.
	starts map[int32]startNote
	undo   []change

	// The GPU models, where the nodes with GPUs are of more than one
	// (models.go): their names sorted, each node's, and the nodes of each;
	// all nil on a board of one model.
	models    []string
	modelOf   []int16
	modelMask []bitset

	// Scratch space for one placement at a time; stale is the job whose
	// candidates cand is yet to hold (room, fillCand), or -1.
	cand, aux bitset
	stale     int32
	// candSet is a set (counts.go) that holds every node of cand: setAll,
	// a model's index, or setOther where none is known.
	candSet int
	// countsOff makes room count every job's candidates over the bits
	// (counts.go), for the tests that compare the two.
	countsOff bool
	own       []slot
	modelRoom []int // per model: the room of the job last asked (room)
}

// slot is a job's GPUs on one node (or, in Board.own, its room there).
type slot struct {
	node int32
	gpus int
}

// change is one entry of the undo log.
type change struct {
	job, node int32
	gpus      int
}

// NewBoard indexes snapshot s. It returns an error if s is not consistent
// (see policy.Snapshot) or a job's GPU request is malformed (PerWorker < 1,
// Min < PerWorker, Max < Min, or Min or Max not a multiple of PerWorker);
// the planner must not pass such snapshots.
func NewBoard(s *policy.Snapshot) (*Board, error) {
	c := &Board{
		nodes:   make([]*policy.Node, len(s.Nodes)),
		nodeIdx: make(map[string]int32, len(s.Nodes)),
		free:    make([]int, len(s.Nodes)),
		jobs:    make([]*policy.Job, len(s.Jobs)),
		masks:   make(map[string]*nodeMask),
		stale:   -1,
	}
	// order is the nodes' indices in s.Nodes, sorted by ID; a vouched
	// snapshot's slots (policy.Job.Held) are turned into the board's
	// node indices with it (at).
	order := make([]int32, len(s.Nodes))
	for i := range order {
		order[i] = int32(i)
	}
	if !slices.IsSortedFunc(s.Nodes, func(a, b policy.Node) int { return strings.Compare(a.ID, b.ID) }) {
		slices.SortFunc(order, func(a, b int32) int { return strings.Compare(s.Nodes[a].ID, s.Nodes[b].ID) })
	}
	if s.Vouched() {
		c.at = make([]int32, len(s.Nodes))
		for i, k := range order {
			c.at[k] = int32(i)
		}
	}
	for i, k := range order {
		c.nodes[i] = &s.Nodes[k]
	}
	for i, n := range c.nodes {
		if _, dup := c.nodeIdx[n.ID]; dup || n.ID == "" {
			return nil, fmt.Errorf("invalid snapshot: node ID %q is empty or listed twice", n.ID)
		}
		if n.Reserved < 0 || n.GPUs-n.Reserved < 0 {
			return nil, fmt.Errorf("invalid snapshot: node %s has %s, %d reserved", n.ID, policy.GPUs(n.GPUs), n.Reserved)
		}
		c.nodeIdx[n.ID] = int32(i)
		c.free[i] = n.GPUs - n.Reserved
		c.maxFree = max(c.maxFree, c.free[i])
	}

	for i := range s.Jobs {
		c.jobs[i] = &s.Jobs[i]
	}
	c.alloc = make([][]slot, len(c.jobs))
	c.total = make([]int, len(c.jobs))
	c.moved = make([]bool, len(c.jobs))
	// A planner's or simulator's snapshot lists its jobs in submission
	// order already: load checks the order as it goes (one pass over the
	// jobs, each a cache miss with thousands queued), and only where it
	// is not does the board sort them and load them again.
	sorted, err := c.load(true)
	if !sorted {
		slices.SortFunc(c.jobs, bySubmission)
		for i, n := range c.nodes {
			c.free[i] = n.GPUs - n.Reserved
		}
		clear(c.alloc)
		clear(c.total)
		c.antiJobs = nil
		_, err = c.load(false)
	}
	if err != nil {
		return nil, err
	}

	c.buckets = make([]bitset, c.maxFree+1)
	for f := range c.buckets {
		c.buckets[f] = newBitset(len(c.nodes))
	}
	c.all = newBitset(len(c.nodes))
	c.cand = newBitset(len(c.nodes))
	c.aux = newBitset(len(c.nodes))
	c.modelIndex()
	c.counts = make([]int32, max(1, len(c.models))*(c.maxFree+1))
	for i, f := range c.free {
		if f < 0 {
			n := c.nodes[i]
			return nil, fmt.Errorf("invalid snapshot: node %s is overcommitted: jobs hold %d GPUs, %d of %d are free to them",
				n.ID, n.GPUs-n.Reserved-f, n.GPUs-n.Reserved, n.GPUs)
		}
		c.buckets[f].set(int32(i))
		c.counts[c.countAt(int32(i), f)]++
		c.totalFree += f
		if c.modelFree != nil {
			c.modelFree[c.modelOf[i]] += f
		}
		if c.nodes[i].GPUs-c.nodes[i].Reserved > 0 {
			c.all.set(int32(i))
		}
	}
	c.allMask = nodeMask{bits: c.all, set: setAll}
	c.repair()
	return c, nil
}

// slotsHint is the number of node slots of the last board loaded, the
// next one's first guess (a round's board has about as many running jobs
// as the last round's).
var slotsHint atomic.Int64

// bySubmission is the order of a board's jobs: submission, then ID.
func bySubmission(a, b *policy.Job) int {
	if x := a.Submitted.Compare(b.Submitted); x != 0 {
		return x
	}
	return strings.Compare(a.ID, b.ID)
}

// load checks and indexes the jobs (c.jobs, in this order) into a new
// board: each ID must be its own, each request well formed and each
// allocation on known nodes; it fills the jobs' slots and totals, the
// nodes' free GPUs, and the jobs with anti-affinity. With check, it
// reports sorted false, and nothing more, where the jobs are not in
// submission order (the board must sort them and load again from
// scratch), so that its error is the one for the sorted jobs.
//
// A vouched snapshot's IDs and order are not checked (its maker says
// they are unique, and in submission order), and its jobs' GPUs are read
// from their slots (policy.Job.Held, an array) instead of their maps.
func (c *Board) load(check bool) (sorted bool, err error) {
	var ids *idSet
	if c.at == nil {
		ids = newIDSet(c.jobs)
		defer ids.done()
	}
	// dup is the first empty or repeated ID, bad the first other job's
	// error: the pass goes on to the end to check the order.
	var dup, bad error
	// The running jobs' slots share arrays (not one allocation per job);
	// each job's is capped at its length, so a job that gains a node
	// (apply) moves to an array of its own. The array starts as large as
	// the last board's (slotsHint): the running jobs are not counted first.
	slots := make([]slot, 0, min(int(slotsHint.Load()), len(c.jobs)))
	defer func() { slotsHint.Store(int64(len(slots))) }()
	for j, job := range c.jobs {
		if check && c.at == nil && j > 0 && bySubmission(job, c.jobs[j-1]) < 0 {
			return false, nil
		}
		if dup != nil {
			continue
		}
		if ids != nil && !ids.add(j) {
			dup = fmt.Errorf("invalid snapshot: job ID %q is empty or listed twice", job.ID)
			continue
		}
		if bad != nil {
			continue
		}
		if r := job.GPUs; r.PerWorker < 1 || r.Min < r.PerWorker || r.Max < r.Min ||
			!multiple(r.Min, r.PerWorker) || !multiple(r.Max, r.PerWorker) {
			bad = fmt.Errorf("invalid snapshot: job %s: malformed GPU request min=%d max=%d per_worker=%d",
				job.ID, r.Min, r.Max, r.PerWorker)
			continue
		}
		if !job.AntiAffinity.IsZero() {
			c.antiJobs = append(c.antiJobs, int32(j))
		}
		first := len(slots)
		if c.at != nil {
			for _, h := range job.Held {
				n, g := c.at[h.Node], h.GPUs
				slots = append(slots, slot{node: n, gpus: g})
				c.free[n] -= g
				c.total[j] += g
			}
			c.keep(j, slots, first)
			continue
		}
		if len(job.Allocation) == 0 {
			continue // queued: no slots (and no iterator to set up)
		}
		for nodeID, g := range job.Allocation {
			if g == 0 {
				continue
			}
			n, ok := c.nodeIdx[nodeID]
			if !ok || g < 0 {
				bad = fmt.Errorf("invalid snapshot: job %s holds %d GPUs on node %q, which is unknown or the count negative",
					job.ID, g, nodeID)
				break
			}
			slots = append(slots, slot{node: n, gpus: g})
			c.free[n] -= g
			c.total[j] += g
		}
		if bad != nil {
			continue
		}
		c.keep(j, slots, first)
	}
	return true, cmp.Or(dup, bad)
}

// multiple reports whether x is a multiple of w >= 1: without a division
// where w is a power of two (most workers' GPUs), as it is asked of every
// job each round.
func multiple(x, w int) bool {
	if w&(w-1) == 0 {
		return x&(w-1) == 0
	}
	return x%w == 0
}

// keep makes slots[first:] job j's, sorted by node.
func (c *Board) keep(j int, slots []slot, first int) {
	if k := len(slots); k > first {
		c.alloc[j] = slots[first:k:k]
		if k > first+1 {
			slices.SortFunc(c.alloc[j], func(a, b slot) int { return cmp.Compare(a.node, b.node) })
		}
	}
}

// Jobs returns the snapshot's jobs in submission order (Submitted, then ID).
// The slice is shared: do not modify it.
func (c *Board) Jobs() []*policy.Job { return c.jobs }

// FreeGPUs returns the number of free GPUs in the cluster.
func (c *Board) FreeGPUs() int { return c.totalFree }

// Total returns the GPUs job id holds in the working state (0 if unknown).
func (c *Board) Total(id string) int {
	j, ok := c.index(id)
	if !ok {
		return 0
	}
	return c.total[j]
}

// Allocation returns job id's allocation in the working state (nil for a
// job the board does not know).
func (c *Board) Allocation(id string) policy.Allocation {
	j, ok := c.index(id)
	if !ok {
		return nil
	}
	return c.allocation(j)
}

// Room returns how many GPUs job id could gain now, in whole workers, on
// nodes its constraints and anti-affinity allow; it is not capped by Max.
func (c *Board) Room(id string) int {
	j, ok := c.index(id)
	if !ok {
		return 0
	}
	return c.room(j)
}

// Resize sets job id's total to total GPUs, which must be 0 or a multiple of
// PerWorker within [Min, Max]. Growing fills the job's own nodes first, then
// nodes of jobs it has affinity with, then packs the rest onto as few nodes
// as possible (best fit). Shrinking takes whole workers from the nodes where
// the job holds the fewest GPUs. If the GPUs do not fit, it returns an error
// wrapping ErrNoRoom and changes nothing.
func (c *Board) Resize(id string, total int) error {
	j, ok := c.index(id)
	if !ok {
		return fmt.Errorf("failed to resize job %s: not in the snapshot", id)
	}
	r := c.jobs[j].GPUs
	if total != 0 && (total < r.Min || total > r.Max || total%r.PerWorker != 0) {
		return fmt.Errorf("failed to resize job %s to %s: not 0 or a multiple of %d in [%d, %d]",
			id, policy.GPUs(total), r.PerWorker, r.Min, r.Max)
	}
	switch d := total - c.total[j]; {
	case d > 0:
		if !c.Grow(j, d) {
			return fmt.Errorf("failed to resize job %s to %s: %w", id, policy.GPUs(total), ErrNoRoom)
		}
	case d < 0:
		c.Shrink(j, -d)
	}
	return nil
}

// Note adds a reason to job id's entry in the plan.
func (c *Board) Note(id, reason string) {
	if j, ok := c.index(id); ok {
		c.note(j, reason)
		return
	}
	if c.extra == nil {
		c.extra = make(map[string][]string)
	}
	c.extra[id] = append(c.extra[id], reason)
}

// Notef adds a reason, formatted as fmt.Sprintf does, to job j's entry in
// the plan.
func (c *Board) Notef(j int32, format string, args ...any) {
	c.note(j, fmt.Sprintf(format, args...))
}

// NoteStarted notes that job j, queued in the snapshot, starts with what
// it holds now: "started with 1 GPU on 1 node (how)", detail, if not
// empty, following after a colon. A growth of j later in the round
// (NoteGrown) folds into this reason while it is j's latest, so that a
// job admitted at its minimum and grown in the same round has one reason
// that agrees with the plan's one change (start: 0 -> 4): "started with
// 4 GPUs on 1 node (its minimum: 1 GPU, then grown into idle GPUs)", not
// "started with 1 GPU" beside "grown from 1 to 4".
func (c *Board) NoteStarted(j int32, how, detail string) {
	st := startNote{first: c.total[j], how: how, detail: detail}
	c.note(j, c.startReason(j, st))
	st.at = len(c.notesOf(j)) - 1
	if c.starts == nil {
		c.starts = make(map[int32]startNote)
	}
	c.starts[j] = st
}

// NoteGrown notes that job j grew from from GPUs to what it holds now,
// how saying how ("into idle GPUs"): "grown from 2 to 4 GPUs into idle
// GPUs", detail, if not empty, following after a colon. If j's latest
// reason is its start this round (NoteStarted), it is folded into that
// one, and detail, if not empty, replaces the start's.
func (c *Board) NoteGrown(j int32, from int, how, detail string) {
	if st, ok := c.starts[j]; ok && st.at == len(c.notesOf(j))-1 {
		st.grown = how
		if detail != "" {
			st.detail = detail
		}
		c.starts[j] = st
		c.notesOf(j)[st.at] = c.startReason(j, st)
		return
	}
	s := fmt.Sprintf("grown from %d to %s %s", from, policy.GPUs(c.total[j]), how)
	if detail != "" {
		s += ": " + detail
	}
	c.note(j, s)
}

// startNote is a start noted this round (NoteStarted).
type startNote struct {
	at     int // its index in the job's notes
	first  int // the GPUs the job started with
	how    string
	grown  string // how it grew after, if it did (NoteGrown)
	detail string
}

// startReason is job j's start reason st, with what j holds now.
func (c *Board) startReason(j int32, st startNote) string {
	held := c.total[j]
	s := "started with " + policy.GPUs(held) + " on " + policy.Count(len(c.alloc[j]), "node")
	switch {
	case st.grown != "" && held != st.first:
		s += " (" + st.how + ": " + policy.GPUs(st.first) + ", then grown " + st.grown + ")"
	case st.how != "":
		s += " (" + st.how + ")"
	}
	if st.detail != "" {
		s += ": " + st.detail
	}
	return s
}

// notesOf are job j's notes so far.
func (c *Board) notesOf(j int32) []string {
	if c.notes != nil {
		return c.notes[j]
	}
	if i := c.fewAt(j); i >= 0 {
		return c.few[i].why
	}
	return nil
}

// fewNotes is how many jobs' notes a board keeps in a list before it
// keeps them by job index.
const fewNotes = 16

// jobNotes are job j's notes.
type jobNotes struct {
	j   int32
	why []string
}

// note adds reasons to job j's entry in the plan.
func (c *Board) note(j int32, reasons ...string) {
	if c.notes == nil {
		if i := c.fewAt(j); i >= 0 {
			c.few[i].why = append(c.few[i].why, reasons...)
			return
		}
		if len(c.few) < fewNotes {
			c.few = append(c.few, jobNotes{j: j, why: append([]string(nil), reasons...)})
			c.noted++
			return
		}
		c.notes = make([][]string, len(c.jobs))
		for _, n := range c.few {
			c.notes[n.j] = n.why
		}
		c.few = c.few[:0]
	}
	if c.notes[j] == nil {
		c.noted++
	}
	c.notes[j] = append(c.notes[j], reasons...)
}

// hasNotes reports whether job j has notes.
func (c *Board) hasNotes(j int32) bool {
	if c.notes != nil {
		return c.notes[j] != nil
	}
	return c.fewAt(j) >= 0
}

// fewAt is the index of job j's notes in few, or -1.
func (c *Board) fewAt(j int32) int {
	return slices.IndexFunc(c.few, func(n jobNotes) bool { return n.j == j })
}

// index returns the index of job id, building the ID index on first use
// (the index-keyed rounds never need it).
func (c *Board) index(id string) (int32, bool) {
	if c.jobIdx == nil {
		c.jobIdx = make(map[string]int32, len(c.jobs))
		for j, job := range c.jobs {
			c.jobIdx[job.ID] = int32(j)
		}
	}
	j, ok := c.jobIdx[id]
	return j, ok
}

// Plan returns the working state as a plan made by the policy called name:
// every job whose allocation changed gets an entry (empty for one that
// holds none now); the others are absent, and so keep what they hold
// (Plan.Target). The reasons noted so far move into the plan.
func (c *Board) Plan(name string) *policy.Plan {
	reasons := make(map[string][]string, c.noted+len(c.extra))
	for j, why := range c.notes {
		if why != nil {
			reasons[c.jobs[j].ID] = why
		}
	}
	for _, n := range c.few {
		reasons[c.jobs[n.j].ID] = n.why
	}
	c.few = c.few[:0]
	for id, why := range c.extra {
		reasons[id] = append(reasons[id], why...)
	}
	clear(c.notes)
	p := &policy.Plan{Policy: name, Allocations: make(map[string]policy.Allocation), Reasons: reasons, Waiting: c.waiting}
	c.noted, c.extra, c.waiting, c.starts = 0, nil, nil, nil
	for j, job := range c.jobs {
		if c.unchanged(int32(j)) {
			continue
		}
		p.Allocations[job.ID] = c.allocation(int32(j))
	}
	return p
}

// unchanged reports whether job j holds what it holds in the snapshot: a
// job the board never moved does (NewBoard read its allocation as it is);
// one it moved may have come back to it.
func (c *Board) unchanged(j int32) bool {
	if !c.moved[j] {
		return true
	}
	n := 0
	for _, g := range c.jobs[j].Allocation {
		if g != 0 {
			n++
		}
	}
	if n != len(c.alloc[j]) {
		return false
	}
	for _, s := range c.alloc[j] {
		if c.jobs[j].Allocation[c.nodes[s.node].ID] != s.gpus {
			return false
		}
	}
	return true
}

func (c *Board) allocation(j int32) policy.Allocation {
	if len(c.alloc[j]) == 0 {
		return nil
	}
	a := make(policy.Allocation, len(c.alloc[j]))
	for _, s := range c.alloc[j] {
		a[c.nodes[s.node].ID] = s.gpus
	}
	return a
}

// add changes job j's GPUs on node n by d and logs it for rollback.
func (c *Board) add(j, n int32, d int) {
	c.apply(j, n, d)
	c.undo = append(c.undo, change{job: j, node: n, gpus: d})
}

// rollback undoes every change since the undo log had length mark.
func (c *Board) rollback(mark int) {
	for i := len(c.undo) - 1; i >= mark; i-- {
		e := c.undo[i]
		c.apply(e.job, e.node, -e.gpus)
	}
	c.undo = c.undo[:mark]
}

func (c *Board) apply(j, n int32, d int) {
	old := c.free[n]
	c.buckets[old].clear(n)
	c.buckets[old-d].set(n)
	c.counts[c.countAt(n, old)]--
	c.counts[c.countAt(n, old-d)]++
	c.free[n] = old - d
	c.totalFree -= d
	if c.modelFree != nil {
		c.modelFree[c.modelOf[n]] -= d
	}
	c.total[j] += d
	c.moved[j] = true
	a := c.alloc[j]
	i, found := slices.BinarySearchFunc(a, n, func(s slot, n int32) int { return cmp.Compare(s.node, n) })
	switch {
	case !found:
		a = slices.Insert(a, i, slot{node: n, gpus: d})
	case a[i].gpus+d == 0:
		a = slices.Delete(a, i, i+1)
	default:
		a[i].gpus += d
	}
	c.alloc[j] = a
}

// heldOn returns job j's GPUs on node n.
func (c *Board) heldOn(j, n int32) int {
	for _, s := range c.alloc[j] {
		if s.node == n {
			return s.gpus
		}
	}
	return 0
}

// PinModel confines job j from now on to nodes of GPU model model, as if
// its constraints named that model (one they allow, or j has no room at
// all), without a copy of the job to set it in: goodput-hetero chooses a
// model for every job of a round. The placements already made stay; call
// it before j's next room or placement.
func (c *Board) PinModel(j int32, model string) {
	if c.pins == nil {
		c.pins = make([]string, len(c.jobs))
	}
	c.pins[j] = model
	if c.jobMask != nil {
		c.jobMask[j] = nil
	}
	if c.stale == j {
		c.stale = -1
	}
}

// eligible returns the nodes job j's constraints allow, its GPU model
// pinned where PinModel set one (shared; read-only).
func (c *Board) eligible(j int32) *nodeMask {
	if c.jobMask != nil {
		// Asked before: without a read of the job (a cache miss a job
		// at 100,000 jobs, and a round asks most jobs' room).
		if m := c.jobMask[j]; m != nil {
			return m
		}
	}
	cons := &c.jobs[j].Constraints
	model := cons.GPUModel
	if c.pins != nil && c.pins[j] != "" {
		if model != "" && model != c.pins[j] {
			// Pinned to a model its constraint forbids: no node.
			if c.noMask.bits == nil {
				c.noMask = nodeMask{bits: newBitset(len(c.nodes)), set: setOther}
			}
			return &c.noMask
		}
		model = c.pins[j]
	}
	if model == "" && cons.MinGPUMemoryMiB == 0 && cons.Pool == "" && len(cons.NodeAttributes) == 0 {
		return &c.allMask
	}
	if c.jobMask == nil {
		c.jobMask = make([]*nodeMask, len(c.jobs))
	}
	// Most constrained jobs name a GPU model and nothing more (goodput-
	// hetero sets one on every job): their masks are found by the model's
	// name, without a key built for each job.
	byModel := cons.MinGPUMemoryMiB == 0 && cons.Pool == "" && len(cons.NodeAttributes) == 0
	if byModel {
		if m, ok := c.modelMasks[model]; ok {
			c.jobMask[j] = m
			return m
		}
	}
	var b strings.Builder
	b.WriteString(model)
	b.WriteByte(0)
	b.WriteString(strconv.Itoa(cons.MinGPUMemoryMiB))
	b.WriteByte(0)
	b.WriteString(cons.Pool)
	for _, k := range sortedKeys(cons.NodeAttributes) {
		b.WriteByte(0)
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(cons.NodeAttributes[k])
	}
	key := b.String()
	m, ok := c.masks[key]
	if !ok {
		bits := newBitset(len(c.nodes))
		pinned := *cons
		pinned.GPUModel = model
		for i, n := range c.nodes {
			if c.all.has(int32(i)) && pinned.Allows(n) {
				bits.set(int32(i))
			}
		}
		m = &nodeMask{bits: bits, set: c.setOf(bits)}
		c.masks[key] = m
	}
	if byModel {
		if c.modelMasks == nil {
			c.modelMasks = make(map[string]*nodeMask)
		}
		c.modelMasks[model] = m
	}
	c.jobMask[j] = m
	return m
}

// sortedKeys returns m's keys, sorted; nil, with nothing allocated, for an
// empty m.
func sortedKeys(m map[string]string) []string {
	if len(m) == 0 {
		return nil
	}
	return slices.Sorted(maps.Keys(m))
}
