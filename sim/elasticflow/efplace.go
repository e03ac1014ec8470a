package elasticflow

import (
	"cmp"
	"fmt"
	"slices"
)

// groupSizes are the keys of ElasticFlow's node groups (cluster.py,
// _Cluster.__init__, node_g): a node set sits in the group of the largest
// key that divides its free GPUs (or of its job's size when full).
var groupSizes = []int{1, 2, 4, 8, 12, 16, 24, 32, 40, 48, 56, 64, 72, 88, 128, 256}

// nodeSet is a set of nodes that jobs of one size share (cluster.py,
// elastic_placement's node_set): whole nodes for a job of a node or more,
// else one node.
type nodeSet struct {
	nodes     []int
	capacity  int
	util      int
	jobs      []*efJob // in the order they were placed
	groupSize int
}

// placer is ElasticFlow's elastic placement (cluster.py,
// elastic_placement). Its simulator releases every job at each scheduling
// event and places them again (scheduler.py, ef_sim_jobs_access_control),
// so the node groups start empty at every event, but the free nodes keep
// the order their releases gave them: a node set whose last job is
// released puts its nodes at the list's end and the list is sorted again,
// stably, by node id, and a node's id is its index within its switch
// (switch.py, add_nodes), not within the cluster. A new node set takes the
// list's first nodes, so after the first release a job of two nodes or
// more spans the switches (release, begin).
type placer struct {
	gpn    int
	nps    int   // nodes a switch
	seq    []int // when each node last joined the free list
	joined int   // seq's counter
	sorted bool  // the free list was sorted by node id at least once
	free   []int // free node ids (switch-major), in the list's order
	groups map[int][]*nodeSet
}

func newPlacer(spec Spec) *placer {
	n := spec.Switches * spec.NodesPerSwitch
	p := &placer{gpn: spec.GPUsPerNode, nps: spec.NodesPerSwitch, seq: make([]int, n), joined: n}
	for i := range p.seq {
		p.seq[i] = i
	}
	return p
}

// release takes j out of its node set (cluster.py, release_job_res); the
// last job out frees the set's nodes, which join the free list last.
func (p *placer) release(j *efJob) {
	s := j.set
	j.set = nil
	s.util -= j.num
	if s.util > 0 {
		return
	}
	for _, n := range s.nodes {
		p.seq[n] = p.joined
		p.joined++
	}
	p.sorted = true
}

// begin starts an event's placement: every job has been released, so
// every node is free, in the order of the free list: by when each node
// joined it, sorted stably by node id once any node set was released
// (a list sorted at each release is in (id, when joined) order).
func (p *placer) begin() {
	p.groups = map[int][]*nodeSet{}
	p.free = p.free[:0]
	for i := range p.seq {
		p.free = append(p.free, i)
	}
	slices.SortFunc(p.free, func(a, b int) int {
		if p.sorted {
			if c := cmp.Compare(a%p.nps, b%p.nps); c != 0 {
				return c
			}
		}
		return cmp.Compare(p.seq[a], p.seq[b])
	})
}

func (p *placer) push(size int, s *nodeSet) {
	s.groupSize = size
	p.groups[size] = append(p.groups[size], s)
}

// sortGroup orders a group by how full its sets are (stable, as Python's
// list.sort): placement takes the emptiest first.
func (p *placer) sortGroup(size int) {
	slices.SortStableFunc(p.groups[size], func(a, b *nodeSet) int { return a.util - b.util })
}

// regroup files s after j joined it: in the group of the largest key that
// divides its free GPUs, or in its job's size's group when full.
func (p *placer) regroup(s *nodeSet, g int) {
	free := len(s.nodes)*p.gpn - s.util
	if free > 0 {
		for i := len(groupSizes) - 1; i >= 0; i-- {
			k := groupSizes[i]
			if k <= free && free%k == 0 {
				p.push(k, s)
				p.sortGroup(g)
				p.sortGroup(k)
				return
			}
		}
	}
	p.push(g, s)
	p.sortGroup(g)
}

func (p *placer) join(s *nodeSet, j *efJob) {
	j.set = s
	s.util += j.num
	s.jobs = append(s.jobs, j)
}

// place places j (j.num GPUs): first the emptiest set of its size's group
// if it fits, else the emptiest of each larger group, largest first, else
// a new set of the free list's first nodes.
func (p *placer) place(j *efJob) error {
	g := j.num
	if !slices.Contains(groupSizes, g) {
		return fmt.Errorf("failed to place %d GPUs: not a group size", g)
	}
	if p.tryFirst(g, j) {
		return nil
	}
	for i := len(groupSizes) - 1; i >= 0 && groupSizes[i] > g; i-- {
		if p.tryFirst(groupSizes[i], j) {
			return nil
		}
	}
	nodes := (g + p.gpn - 1) / p.gpn
	if nodes > len(p.free) {
		return fmt.Errorf("failed to place %d GPUs: %d free nodes", g, len(p.free))
	}
	s := &nodeSet{nodes: slices.Clone(p.free[:nodes]), capacity: nodes * p.gpn}
	p.free = p.free[nodes:]
	p.join(s, j)
	p.regroup(s, g)
	return nil
}

// tryFirst places j in the emptiest set of group k if it fits; a set
// that does not goes to the group's back.
func (p *placer) tryFirst(k int, j *efJob) bool {
	l := p.groups[k]
	if len(l) == 0 {
		return false
	}
	s := l[0]
	p.groups[k] = l[1:]
	if s.util+j.num <= s.capacity {
		p.join(s, j)
		p.regroup(s, j.num)
		return true
	}
	p.groups[k] = append(p.groups[k], s)
	return false
}

// ranks gives each placed job its first GPU rank, as ElasticFlow's log
// numbers them (log.py, scheduling_result): nodes in order; a set in a
// group of a node's size or more gives its first job the rank of its
// first node; a smaller set lays its jobs out in the order they joined.
func (p *placer) ranks(visit func(j *efJob, rank int)) {
	owner := map[int]*nodeSet{}
	for _, l := range p.groups {
		for _, s := range l {
			for _, n := range s.nodes {
				owner[n] = s
			}
		}
	}
	seen := map[*nodeSet]bool{}
	nodes := make([]int, 0, len(owner))
	for n := range owner {
		nodes = append(nodes, n)
	}
	slices.Sort(nodes)
	for _, n := range nodes {
		s := owner[n]
		if s.groupSize >= p.gpn {
			if !seen[s] {
				seen[s] = true
				visit(s.jobs[0], n*p.gpn)
			}
			continue
		}
		r := n * p.gpn
		for _, j := range s.jobs {
			visit(j, r)
			r += j.num
		}
	}
}
