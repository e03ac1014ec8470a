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
	clear(c.nodeIdx)
	c.used = c.used[:0]
	// models: the nodes are of more than one GPU model, so a job that
	// gains GPUs must be checked for the one-model rule.
	models := false
	for i := range s.Nodes {
		c.nodeIdx[s.Nodes[i].ID] = int32(i)
		c.used = append(c.used, 0)
		models = models || s.Nodes[i].GPUModel != s.Nodes[0].GPUModel
	}
	if len(c.nodeIdx) != len(s.Nodes) {
		return false // duplicate node IDs: let the full check judge
	}
	anti := false // some job has anti-affinity: checked after the pass

	// Every job of the plan and of its reasons must be in the snapshot:
	// with unique job IDs, that is as many hits as entries. Once every
	// entry has had its hit, no later job can be one (its ID would repeat
	// a hit's), so the rest of the jobs are not looked up: a plan's
	// entries are mostly the head of the queue, and the line behind it is
	// thousands of jobs.
	planned, reasoned := 0, 0
	// A job the plan keeps as it is, in a snapshot its maker vouched for,
	// is read from its slots (Job.Held), not its map.
	vouched := s.Vouched()
	for i := range s.Jobs {
		j := &s.Jobs[i]
		target, kept := j.Allocation, true
		if planned < len(p.Allocations) {
			if t, ok := p.Allocations[j.ID]; ok {
				target, kept = t, false
				planned++
			}
		}
		if reasoned < len(p.Reasons) {
			if _, ok := p.Reasons[j.ID]; ok {
				reasoned++
			}
		}
		anti = anti || !j.AntiAffinity.IsZero()
		w := j.GPUs.PerWorker
		if w <= 0 || j.GPUs.Min < 0 || j.GPUs.Max < j.GPUs.Min {
			return false
		}
		if vouched && (kept || target.same(j.Allocation)) {
			if !c.heldOK(j, w) {
				return false
			}
			continue
		}
		if len(target) == 0 {
			continue // no GPUs: nothing more to check (and no iterator to set up)
		}
		total := 0
		held := target.same(j.Allocation) // every GPU of it held already
		// model is the GPU model of the target's first node, mixed
		// whether another node's differs, gains whether the job gains
		// GPUs anywhere (one-model).
		model, mixed, gains := int32(-1), false, false
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
			if models && g > 0 {
				if model < 0 {
					model = n
				} else if s.Nodes[n].GPUModel != s.Nodes[model].GPUModel {
					mixed = true
				}
			}
			if held || g <= j.Allocation[id] {
				continue // held already; not judged again
			}
			gains = true
			if !j.Constraints.allows(&s.Nodes[n]) {
				return false
			}
			if m := j.Constraints.MaxGPUsPerNode; m > 0 && g > m {
				return false
			}
		}
		if total != 0 && (total < j.GPUs.Min || total > j.GPUs.Max || total%w != 0) {
			return false
		}
		if mixed && gains {
			return false
		}
	}
	if planned != len(p.Allocations) || reasoned != len(p.Reasons) {
		return false
	}
	for i := range s.Nodes {
		if c.used[i] > s.Nodes[i].GPUs-s.Nodes[i].Reserved {
			return false
		}
	}
	if anti {
		c.placements(s, p)
		return c.antiAffinityOK(s)
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
	return total == 0 || (total >= j.GPUs.Min && total <= j.GPUs.Max && total%w == 0)
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
