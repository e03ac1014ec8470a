package policy

import "sync"

// checker is the scratch space of valid, kept between calls (validPool)
// so that a check allocates nothing once warm.
type checker struct {
	nodeIdx map[string]int32 // node ID -> index in Snapshot.Nodes
	used    []int            // per node: GPUs the plan gives all jobs there
	// For anti-affinity only: each job's target, and the jobs on each node.
	targets []Allocation
	onNode  [][]int32
	// Of the call under way: whether the nodes are of more than one GPU
	// model (so that a job that gains GPUs must be checked for the
	// one-model rule), and whether the snapshot is vouched for (so that a
	// job kept as it is is read from its slots, Job.Held).
	models, vouched bool
}

var validPool = sync.Pool{New: func() any { return &checker{nodeIdx: make(map[string]int32)} }}

// valid reports whether plan p passes every rule of Validate against
// snapshot s; it is exactly Validate(s, p) == nil when the snapshot's job
// IDs are unique (the planner's are; place.NewBoard refuses others), and
// costs one pass over the jobs and their allocations (a second where a
// job has anti-affinity): no sorting, no formatting, no maps but the
// reused node index. Where it says false,
// violations lists what is wrong.
func valid(s *Snapshot, p *Plan) bool {
	c := validPool.Get().(*checker)
	defer func() {
		clear(c.targets) // keep no plan alive
		validPool.Put(c)
	}()
	if !c.indexNodes(s) {
		return false // duplicate node IDs: let the full check judge
	}
	anti, ok := c.jobsOK(s, p)
	if !ok || !c.capacityOK(s) {
		return false
	}
	if anti {
		c.placements(s, p)
		return c.antiAffinityOK(s)
	}
	return true
}

// indexNodes readies the checker for snapshot s: the node index, no GPUs
// used on any node, and whether the nodes are of more than one GPU model
// (models). False where two nodes share an ID.
func (c *checker) indexNodes(s *Snapshot) bool {
	clear(c.nodeIdx)
	c.used = c.used[:0]
	c.models = false
	for i := range s.Nodes {
		c.nodeIdx[s.Nodes[i].ID] = int32(i)
		c.used = append(c.used, 0)
		c.models = c.models || s.Nodes[i].GPUModel != s.Nodes[0].GPUModel
	}
	return len(c.nodeIdx) == len(s.Nodes)
}

// jobsOK is valid's pass over the jobs: each job's request and target
// meet the rules (jobOK), counted into used, and every job the plan
// names (allocations and reasons) is in the snapshot (entries). anti
// reports whether some job has anti-affinity, checked after the pass.
func (c *checker) jobsOK(s *Snapshot, p *Plan) (anti, ok bool) {
	e := entries{p: p}
	// A job the plan keeps as it is, in a snapshot its maker vouched for,
	// is read from its slots (Job.Held), not its map.
	c.vouched = s.Vouched()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		target, kept := e.target(j)
		anti = anti || !j.AntiAffinity.IsZero()
		if !c.jobOK(s, j, target, kept) {
			return anti, false
		}
	}
	return anti, e.all()
}

// entries finds the plan's entries among the snapshot's jobs: with
// unique job IDs, every job of the plan and of its reasons is in the
// snapshot when there are as many hits as entries. Once every entry has
// had its hit, no later job can be one (its ID would repeat a hit's), so
// the rest of the jobs are not looked up: a plan's entries are mostly
// the head of the queue, and the line behind it is thousands of jobs.
type entries struct {
	p                 *Plan
	planned, reasoned int
}

// target is job j's target, and whether the plan keeps j as it is (has
// no allocation for it); it counts j's hits.
func (e *entries) target(j *Job) (Allocation, bool) {
	target, kept := j.Allocation, true
	if e.planned < len(e.p.Allocations) {
		if t, ok := e.p.Allocations[j.ID]; ok {
			target, kept = t, false
			e.planned++
		}
	}
	if e.reasoned < len(e.p.Reasons) {
		if _, ok := e.p.Reasons[j.ID]; ok {
			e.reasoned++
		}
	}
	return target, kept
}

// all reports whether every entry of the plan had its hit.
func (e *entries) all() bool {
	return e.planned == len(e.p.Allocations) && e.reasoned == len(e.p.Reasons)
}

// jobOK reports whether job j's request is well formed and its target
// meets the rules, counting the target's GPUs into used. A job kept as
// it holds in a vouched snapshot is read from its slots (heldOK).
func (c *checker) jobOK(s *Snapshot, j *Job, target Allocation, kept bool) bool {
	if malformed(j) {
		return false
	}
	w := j.GPUs.PerWorker
	if c.vouched && (kept || target.same(j.Allocation)) {
		return c.heldOK(j, w)
	}
	if len(target) == 0 {
		return true // no GPUs: nothing more to check (and no iterator to set up)
	}
	return c.targetOK(s, j, target, w)
}

// targetOK reports whether job j's target (not empty, w GPUs a worker)
// meets the rules, counting its GPUs into used: every node in the
// snapshot, whole workers, the gang rule on its total, and, for GPUs it
// gains (above what it holds on a node), its constraints and the
// one-model rule.
func (c *checker) targetOK(s *Snapshot, j *Job, target Allocation, w int) bool {
	total := 0
	held := target.same(j.Allocation) // every GPU of it held already
	span := modelSpan{first: -1}
	gains := false // whether the job gains GPUs anywhere (one-model)
	for id, g := range target {
		if g == 0 {
			continue
		}
		n, ok := c.nodeIdx[id]
		if !ok || g < 0 || g%w != 0 {
			return false
		}
		total += g
		c.used[n] += g
		if c.models && g > 0 {
			span.add(s, n)
		}
		if held || g <= j.Allocation[id] {
			continue // held already; not judged again
		}
		gains = true
		if !gainOK(j, &s.Nodes[n], g) {
			return false
		}
	}
	return gangOK(j, total, w) && !(span.mixed && gains)
}

// modelSpan follows the GPU models of a target's nodes, for the
// one-model rule: the node of the first (first; -1 before any), and
// whether another node's model differs (mixed).
type modelSpan struct {
	first int32
	mixed bool
}

// add takes node n (an index in s.Nodes) into the span.
func (m *modelSpan) add(s *Snapshot, n int32) {
	if m.first < 0 {
		m.first = n
	} else if s.Nodes[n].GPUModel != s.Nodes[m.first].GPUModel {
		m.mixed = true
	}
}

// gainOK reports whether job j may gain GPUs on node, to g there: the
// node meets its constraints, and g is within its max_gpus_per_node.
func gainOK(j *Job, node *Node, g int) bool {
	if !j.Constraints.allows(node) {
		return false
	}
	m := j.Constraints.MaxGPUsPerNode
	return m <= 0 || g <= m
}

// capacityOK reports whether no node is given more GPUs than it has
// unreserved, counting every job's target (used).
func (c *checker) capacityOK(s *Snapshot) bool {
	for i := range s.Nodes {
		if c.used[i] > s.Nodes[i].GPUs-s.Nodes[i].Reserved {
			return false
		}
	}
	return true
}

// heldOK counts into used the GPUs job j keeps where it holds them, read
// from its slots (a vouched snapshot's), and reports whether they are
// whole workers of w GPUs and a total in the job's range (or 0): the
// rules a kept allocation must still meet.
func (c *checker) heldOK(j *Job, w int) bool {
	total := 0
	for _, h := range j.Held {
		g := h.GPUs
		if g%w != 0 {
			return false
		}
		total += g
		c.used[h.Node] += g
	}
	return gangOK(j, total, w)
}

// placements sets each job's target, and the jobs on each node, for
// antiAffinityOK: valid's pass has found every node of every target in
// the snapshot. Few rounds have a job with anti-affinity, so valid's pass
// does not keep them for all.
func (c *checker) placements(s *Snapshot, p *Plan) {
	c.targets = c.targets[:0]
	for n := range c.onNode {
		c.onNode[n] = c.onNode[n][:0]
	}
	for len(c.onNode) < len(s.Nodes) {
		c.onNode = append(c.onNode, nil)
	}
	for i := range s.Jobs {
		target := p.Target(&s.Jobs[i])
		c.targets = append(c.targets, target)
		for id, g := range target {
			if g != 0 {
				n := c.nodeIdx[id]
				c.onNode[n] = append(c.onNode[n], int32(i))
			}
		}
	}
}

// antiAffinityOK reports whether no job gains GPUs on a node that holds a
// job it conflicts with. One of the two must have a selector, so only the
// nodes of those jobs are looked at.
func (c *checker) antiAffinityOK(s *Snapshot) bool {
	gains := func(j int32, node string) bool {
		return c.targets[j][node] > s.Jobs[j].Allocation[node]
	}
	for a := range s.Jobs {
		ja := &s.Jobs[a]
		if ja.AntiAffinity.IsZero() {
			continue
		}
		for id, g := range c.targets[a] {
			if g <= 0 {
				continue
			}
			n := c.nodeIdx[id]
			aGains := gains(int32(a), id)
			for _, k := range c.onNode[n] {
				if (aGains || gains(k, id)) && conflicts(ja, &s.Jobs[k]) {
					return false
				}
			}
		}
	}
	return true
}
