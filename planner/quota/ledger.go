package quota

import (
	"cmp"
	"fmt"
	"maps"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Ledger is a tree's accounting over one round's snapshot: what each queue
// holds of each resource (a GPU model, or AnyModel where quotas are not
// per model), and what it may hold. Build one per round with NewLedger.
type Ledger struct {
	t *Tree
	s *policy.Snapshot

	res     []string       // the round's resources
	nodeRes map[string]int // node ID -> resource
	nodeCap map[string]int // node ID -> GPUs - Reserved; nil until needed (caps)
	nodeAt  map[string]int // node ID -> index in s.Nodes; nil until needed (nodeIndex)
	jobIdx  map[string]int // job ID -> index in s.Jobs; nil until needed (hasJob)
	// leaf is each job's queue (index into t.queues), -1 when the job
	// names no queue of the tree, or one with children.
	leaf []int
	// gpus is the GPUs each job holds (its allocation's Total), read
	// once here for the passes over the queued jobs.
	gpus []int
	// nominal, limit (nominal + borrowing limit) and guard (the part of
	// the nominal quota never lent) per queue and resource.
	nominal, limit, guard [][]int
	// capacity is the root's bound per resource: the cluster's GPUs, or
	// the top-level queues' nominal sum where that is more (nominal quotas
	// may promise more than the cluster has; what is physically there is
	// the gang rule's to enforce).
	capacity, physical []int
	cur                [][]int // usage by current allocations, held GPUs included
	// reserved is the GPUs held for jobs outside the snapshot (NewLedger's
	// held), per queue and resource: part of every usage.
	reserved [][]int

	allow map[string][]bool // allowed, by constraints
	anyOK []bool            // allowed, for a job without constraints
	// anti is whether some job has anti-affinity, once antiRead (hasAnti).
	anti, antiRead bool

	// Read in NewLedger's pass over the jobs, so that Gate and Enforce need
	// no pass of their own over a default tree's thousands of queued jobs
	// (each a cache miss): onePrio, every job has the same priority; and
	// for the default tree (one queue, one resource) fit, every queued job
	// is of the queue, may use some node and has Min >= 0, and need, the
	// sum of their minimums.
	onePrio, fit bool
	need         int

	// gate's results: queued jobs kept from the policy, and why.
	held map[string]string
	// why queued jobs still wait after Enforce, where quota is the reason.
	why map[string]string
	// taken is the jobs Enforce's reclaim shrank or stopped, and for whom.
	taken map[string]Taken
}

// Held is GPUs held for a job that is not in the snapshot: a job moving
// between GPU models waits, out of the policy's sight, for its run on the
// old model to end, with the GPUs it moves to held for it (its nodes
// reserve them: policy.Node.Reserved). They are its queue's, not work from
// outside the planner.
type Held struct {
	Queue string            // the job's queue ("" is DefaultQueue)
	GPUs  policy.Allocation // by node ID, within what the nodes reserve
}

// NewLedger accounts snapshot s against tree t. Jobs name their queue in
// policy.Job.Queue ("" is DefaultQueue). The GPUs of held count as their
// queues' use, of the cluster's GPUs (the nodes' reservations that hold
// them are the queues').
func NewLedger(t *Tree, s *policy.Snapshot, held ...Held) *Ledger {
	v := &Ledger{t: t, s: s, nodeRes: make(map[string]int, len(s.Nodes)),
		leaf: make([]int, len(s.Jobs)), gpus: make([]int, len(s.Jobs)),
		held: map[string]string{}, why: map[string]string{}, taken: map[string]Taken{}}
	v.res = resources(t, s)
	// A vouched snapshot's jobs name their nodes by index (policy.Job.Held).
	vouched := s.Vouched()
	resAt := v.readNodes(vouched)
	v.readHeld(held)
	v.readQuotas()
	v.cur = clone(v.reserved)
	v.readJobs(vouched, resAt)
	return v
}

// readHeld counts the GPUs of held as their queues' (reserved) and as the
// cluster's (physical): a job whose queue is not a leaf of the tree leaves
// them to outside work, as before.
func (v *Ledger) readHeld(held []Held) {
	v.reserved = v.matrix()
	for _, h := range held {
		q := v.t.leafOf(cmp.Or(h.Queue, DefaultQueue))
		if q == -1 {
			continue
		}
		for n, g := range h.GPUs {
			if r, ok := v.nodeRes[n]; ok && g > 0 {
				v.reserved[q][r] += g
				v.physical[r] += g
			}
		}
	}
}

// resources is the round's resources: where quotas are per model, the GPU
// models of the tree's quotas and of the snapshot's nodes, sorted; else
// AnyModel alone.
func resources(t *Tree, s *policy.Snapshot) []string {
	if !t.perModel {
		return []string{AnyModel}
	}
	set := map[string]bool{}
	for _, m := range t.models {
		set[m] = true
	}
	for i := range s.Nodes {
		set[s.Nodes[i].GPUModel] = true
	}
	return slices.Sorted(maps.Keys(set))
}

// readNodes reads each node's resource (nodeRes) and each resource's
// GPUs less the reserved ones (physical); for a vouched snapshot it
// returns each node's resource by the node's index, else nil.
func (v *Ledger) readNodes(vouched bool) []int {
	s := v.s
	v.physical = make([]int, len(v.res))
	var resAt []int
	if vouched {
		resAt = make([]int, len(s.Nodes))
	}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		r := 0
		if v.t.perModel {
			r, _ = slices.BinarySearch(v.res, n.GPUModel)
		}
		v.nodeRes[n.ID] = r
		if vouched {
			resAt[i] = r
		}
		v.physical[r] += max(0, n.GPUs-n.Reserved)
	}
	return resAt
}

// readQuotas reads each queue's nominal quota, limit and guard per
// resource from the tree, and the root's capacity per resource.
func (v *Ledger) readQuotas() {
	t := v.t
	nq := len(t.queues)
	v.nominal, v.limit, v.guard = v.matrix(), v.matrix(), v.matrix()
	v.capacity = slices.Clone(v.physical)
	for q := range nq {
		for r, m := range v.res {
			n := t.nominal(q, m)
			v.nominal[q][r] = n
			v.limit[q][r] = min(n+lookup(t.queues[q].borrow, m, Unlimited), 2*Unlimited)
			v.guard[q][r] = max(0, n-lookup(t.queues[q].lend, m, Unlimited))
		}
	}
	for r := range v.res {
		top := 0
		for q := range nq {
			if t.queues[q].parent == -1 {
				top += v.nominal[q][r]
			}
		}
		v.capacity[r] = max(v.physical[r], top)
	}
}

// readJobs is NewLedger's one pass over the jobs: each job's leaf queue
// and GPUs, each queue's usage by current allocations (cur), and onePrio,
// fit and need. resAt is readNodes' (a vouched snapshot's).
func (v *Ledger) readJobs(vouched bool, resAt []int) {
	t, s := v.t, v.s
	v.onePrio, v.fit = true, t.implicit && len(v.res) == 1
	lastName, lastLeaf := "", -1 // jobs of a queue come in runs: one lookup a run
	for i := range s.Jobs {
		j := &s.Jobs[i]
		v.onePrio = v.onePrio && j.Priority == s.Jobs[0].Priority
		name := DefaultQueue // the implicit tree's one queue holds every job
		if !t.implicit {
			name = t.queueFor(QueueOf(j)) // not read otherwise: a cache line a job
		}
		if i == 0 || name != lastName {
			lastName, lastLeaf = name, t.leafOf(name)
		}
		v.leaf[i] = lastLeaf
		if vouched { // its slots: known nodes, counts above 0
			for _, h := range j.Held {
				v.gpus[i] += h.GPUs
				if lastLeaf != -1 {
					v.cur[lastLeaf][resAt[h.Node]] += h.GPUs
				}
			}
		} else if len(j.Allocation) > 0 { // a queued job's is empty: no iterator to set up
			for n, g := range j.Allocation {
				v.gpus[i] += g
				if r, ok := v.nodeRes[n]; ok && g > 0 && lastLeaf != -1 {
					v.cur[lastLeaf][r] += g
				}
			}
		}
		if v.fit && v.gpus[i] == 0 {
			v.fit = lastLeaf == 0 && v.allowed(j)[0] && j.GPUs.Min >= 0
			v.need += j.GPUs.Min
		}
	}
}

// hasAnti reports whether some job has anti-affinity, read on first use:
// only reclaim's placement asks, and NewLedger's pass would read one more
// cache line of each of thousands of queued jobs every round.
func (v *Ledger) hasAnti() bool {
	if !v.antiRead {
		v.antiRead = true
		for i := range v.s.Jobs {
			if !v.s.Jobs[i].AntiAffinity.IsZero() {
				v.anti = true
				break
			}
		}
	}
	return v.anti
}

// caps is each node's GPUs less its reserved ones, by node ID, built on
// first use (Enforce's steps; a round of the default tree never asks).
func (v *Ledger) caps() map[string]int {
	if v.nodeCap == nil {
		v.nodeCap = make(map[string]int, len(v.s.Nodes))
		for i := range v.s.Nodes {
			n := &v.s.Nodes[i]
			v.nodeCap[n.ID] = max(0, n.GPUs-n.Reserved)
		}
	}
	return v.nodeCap
}

// nodeIndex is each node's index in the snapshot, by node ID, built on
// first use (reclaim).
func (v *Ledger) nodeIndex() map[string]int {
	if v.nodeAt == nil {
		v.nodeAt = make(map[string]int, len(v.s.Nodes))
		for i := range v.s.Nodes {
			v.nodeAt[v.s.Nodes[i].ID] = i
		}
	}
	return v.nodeAt
}

// hasJob reports whether job id is in the snapshot; the index is built on
// first use (a round of the default tree never asks).
func (v *Ledger) hasJob(id string) bool {
	if v.jobIdx == nil {
		v.jobIdx = make(map[string]int, len(v.s.Jobs))
		for i := range v.s.Jobs {
			v.jobIdx[v.s.Jobs[i].ID] = i
		}
	}
	_, ok := v.jobIdx[id]
	return ok
}

// QueueOf is the queue a job names (DefaultQueue where it names none).
func QueueOf(j *policy.Job) string { return cmp.Or(j.Queue, DefaultQueue) }

func (v *Ledger) matrix() [][]int {
	m := make([][]int, len(v.t.queues))
	for q := range m {
		m[q] = make([]int, len(v.res))
	}
	return m
}

func clone(m [][]int) [][]int {
	out := make([][]int, len(m))
	for q := range m {
		out[q] = slices.Clone(m[q])
	}
	return out
}

// add adds sign x the GPUs of a to queue q's usage u, per resource.
func (v *Ledger) add(u [][]int, q int, a policy.Allocation, sign int) {
	for n, g := range a {
		if r, ok := v.nodeRes[n]; ok && g > 0 {
			u[q][r] += sign * g
		}
	}
}

// effective is each queue's usage as its parent counts it: a leaf's own;
// a parent's, the sum over its children of what each uses or guards
// (the part of its nominal quota it does not lend), whichever is more.
// Guarded idle GPUs thus count as used for everyone but their owner.
func (v *Ledger) effective(u [][]int) [][]int {
	e := clone(u)
	for k := len(v.t.order) - 1; k >= 0; k-- {
		q := v.t.order[k]
		if len(v.t.queues[q].children) == 0 {
			continue
		}
		for r := range v.res {
			sum := 0
			for _, c := range v.t.queues[q].children {
				sum += max(e[c][r], v.guard[c][r])
			}
			e[q][r] = sum
		}
	}
	return e
}

// subtree is u summed up the tree: what each queue's jobs hold, its own
// (a leaf) or its descendants' (a parent).
func (v *Ledger) subtree(u [][]int) [][]int {
	s := clone(u)
	for k := len(v.t.order) - 1; k >= 0; k-- {
		q := v.t.order[k]
		if p := v.t.queues[q].parent; p != -1 {
			for r := range v.res {
				s[p][r] += s[q][r]
			}
		}
	}
	return s
}

// rootUse is what the top-level queues use or guard, per resource.
func (v *Ledger) rootUse(e [][]int, r int) int {
	sum := 0
	for q := range v.t.queues {
		if v.t.queues[q].parent == -1 {
			sum += max(e[q][r], v.guard[q][r])
		}
	}
	return sum
}

// violation is a bound exceeded: queue q's limit, or (q == -1) the root's
// capacity, for resource r.
type violation struct {
	q, r        int
	have, bound int
}

// violations lists every bound usage u exceeds.
func (v *Ledger) violations(u [][]int) []violation {
	e := v.effective(u)
	var out []violation
	for _, q := range v.t.order {
		for r := range v.res {
			if e[q][r] > v.limit[q][r] {
				out = append(out, violation{q: q, r: r, have: e[q][r], bound: v.limit[q][r]})
			}
		}
	}
	for r := range v.res {
		if have := v.rootUse(e, r); have > v.capacity[r] {
			out = append(out, violation{q: -1, r: r, have: have, bound: v.capacity[r]})
		}
	}
	return out
}

// headroom is how many more GPUs of resource r queue q (a leaf) may take
// under usage u without exceeding a bound: at each level up the tree, what
// is left under the bound, plus what the levels below absorb by filling
// their own guarded, idle nominal quota.
func (v *Ledger) headroom(u, e [][]int, q, r int) int {
	h := v.limit[q][r] - e[q][r]
	gaps := max(e[q][r], v.guard[q][r]) - e[q][r]
	for x := v.t.queues[q].parent; x != -1; x = v.t.queues[x].parent {
		h = min(h, v.limit[x][r]-e[x][r]+gaps)
		gaps += max(e[x][r], v.guard[x][r]) - e[x][r]
	}
	return max(0, min(h, v.capacity[r]-v.rootUse(e, r)+gaps))
}

// allowed is, per resource, whether job j may hold GPUs of it. Jobs with
// the same constraints share the answer (a pass over the nodes).
func (v *Ledger) allowed(j *policy.Job) []bool {
	c := &j.Constraints
	if c.GPUModel == "" && c.MinGPUMemoryMiB == 0 && c.Pool == "" && len(c.NodeAttributes) == 0 {
		// Most jobs: no key to format each round.
		if v.anyOK == nil {
			v.anyOK = v.allowedOn(c)
		}
		return v.anyOK
	}
	key := fmt.Sprintf("%q %d %q %v", c.GPUModel, c.MinGPUMemoryMiB, c.Pool, c.NodeAttributes)
	if out, ok := v.allow[key]; ok {
		return out
	}
	out := v.allowedOn(c)
	if v.allow == nil {
		v.allow = map[string][]bool{}
	}
	v.allow[key] = out
	return out
}

// allowedOn is, per resource, whether some node allows constraints c.
func (v *Ledger) allowedOn(c *policy.Constraints) []bool {
	out := make([]bool, len(v.res))
	for i := range v.s.Nodes {
		if c.Allows(&v.s.Nodes[i]) {
			out[v.nodeRes[v.s.Nodes[i].ID]] = true
		}
	}
	return out
}

// fits reports whether j's minimum fits in avail in one of the resources
// it may use: a job's GPUs are all of one model (policy.Validate's
// one-model rule), and the resources are the GPU models where quotas are
// per model (else there is one, AnyModel).
func fits(j *policy.Job, avail []int, allowed []bool) bool {
	for r, a := range avail {
		if allowed[r] && a >= j.GPUs.Min {
			return true
		}
	}
	return false
}

// take subtracts n GPUs from avail over the allowed resources, most
// available first.
func take(avail []int, allowed []bool, n int) {
	for n > 0 {
		best := -1
		for r := range avail {
			if allowed[r] && avail[r] > 0 && (best == -1 || avail[r] > avail[best]) {
				best = r
			}
		}
		if best == -1 {
			return
		}
		d := min(n, avail[best])
		avail[best] -= d
		n -= d
	}
}

// share is how far queue q holds (or guards) more than its nominal quota
// under effective usage eff, per unit of its weight (the most over
// resources): borrowers are trimmed and reclaimed from in decreasing share.
func (v *Ledger) share(eff [][]int, q int) float64 {
	best := 0.0
	for r := range v.res {
		best = max(best, v.shareOn(eff, q, r))
	}
	return best
}

// shareOn is what queue q borrows of resource r under eff per unit of its
// weight.
func (v *Ledger) shareOn(eff [][]int, q, r int) float64 {
	return float64(max(0, eff[q][r]-v.nominal[q][r])) / v.t.queues[q].weight
}
