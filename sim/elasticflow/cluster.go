package elasticflow

import (
	"fmt"
	"math"
	"math/bits"
	"os"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/sim"
)

// Spec is a cluster of ElasticFlow's cluster_specs/: Switches x
// NodesPerSwitch nodes of GPUsPerNode GPUs (scheduler.py,
// parse_cluster_spec; the CPU and memory columns are read and unused).
type Spec struct {
	Switches, NodesPerSwitch, GPUsPerNode int
}

// GPUs is the cluster's size.
func (s Spec) GPUs() int { return s.Switches * s.NodesPerSwitch * s.GPUsPerNode }

func (s Spec) String() string {
	return fmt.Sprintf("%d switch(es) x %d nodes x %d GPUs", s.Switches, s.NodesPerSwitch, s.GPUsPerNode)
}

// LoadSpec reads a cluster_specs/ file (header num_switch,
// num_node_p_switch, num_gpu_p_node, num_cpu_p_node, mem_p_node; one row).
func LoadSpec(path string) (Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Spec{}, fmt.Errorf("failed to read %s: %w", path, err)
	}
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	want := []string{"num_switch", "num_node_p_switch", "num_gpu_p_node", "num_cpu_p_node", "mem_p_node"}
	if got := split(strings.TrimSpace(lines[0])); !slices.Equal(got, want) {
		return Spec{}, &sim.ParseError{Path: path, Line: 1, Err: fmt.Errorf("header is %q, want %q", lines[0], strings.Join(want, ","))}
	}
	if len(lines) != 2 {
		return Spec{}, &sim.ParseError{Path: path, Err: fmt.Errorf("%d rows, want 1", len(lines)-1)}
	}
	f := split(strings.TrimSpace(lines[1]))
	if len(f) != len(want) {
		return Spec{}, &sim.ParseError{Path: path, Line: 2, Err: fmt.Errorf("%d fields, want %d", len(f), len(want))}
	}
	var n [3]int64
	for i := range n {
		if n[i], err = whole(want[i], f[i], 1, 1<<16); err != nil {
			return Spec{}, &sim.ParseError{Path: path, Line: 2, Err: err}
		}
	}
	s := Spec{Switches: int(n[0]), NodesPerSwitch: int(n[1]), GPUsPerNode: int(n[2])}
	if s.GPUs() > sim.MaxGPUs || !isPow2(s.GPUsPerNode) {
		return Spec{}, &sim.ParseError{Path: path, Line: 2, Err: fmt.Errorf("%s: want a power of two GPUs per node and at most %d GPUs", s, sim.MaxGPUs)}
	}
	return s, nil
}

func isPow2(n int) bool { return n > 0 && n&(n-1) == 0 }

// Pow2Floor is the largest power of two at most n (0 for n < 1): the
// largest GPU count ElasticFlow gives a job from n free GPUs
// (utils.py, get_last_level, over the tables' power-of-two columns).
func Pow2Floor(n int) int {
	if n < 1 {
		return 0
	}
	return 1 << (bits.Len(uint(n)) - 1)
}

// Placement is where a job's GPUs are: First, First+1, ... First+Count-1
// in the order switch, node, GPU.
type Placement struct{ First, Count int }

// Place places power-of-two allocations buddy-style on spec's GPUs: a
// block of g GPUs starts at a multiple of g, so a job of at least a
// node's GPUs has whole nodes, and a smaller one a power-of-two aligned
// part of one node shared only with jobs of its size or smaller (as
// ElasticFlow's node groups by GPU count, cluster.py, elastic_placement).
// Like ElasticFlow's simulator, which releases every job and places them
// again largest first at each scheduling event (scheduler.py,
// ef_sim_jobs_access_control), Place places the given counts from the
// largest (ties in the given order) into the lowest free aligned block;
// for powers of two whose sum is at most the cluster (a multiple of the
// largest count) every one fits. It returns the placements in the given
// order, or an error naming the first count that is not a power of two
// or does not fit.
func Place(spec Spec, counts []int) ([]Placement, error) {
	order := make([]int, len(counts))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return counts[b] - counts[a] })
	out := make([]Placement, len(counts))
	next := 0 // largest first into aligned blocks: the free space is one suffix
	for _, i := range order {
		g := counts[i]
		if g == 0 {
			continue
		}
		if !isPow2(g) {
			return nil, fmt.Errorf("failed to place %d GPUs: not a power of two", g)
		}
		first := (next + g - 1) / g * g
		if first+g > spec.GPUs() || g > math.MaxInt32 {
			return nil, fmt.Errorf("failed to place %d GPUs: %d of %d are taken", g, next, spec.GPUs())
		}
		out[i] = Placement{First: first, Count: g}
		next = first + g
	}
	return out, nil
}
