package elasticflow

import (
	"slices"
	"testing"
)

// TestPlacer_FreeNodesKeepTheirOrder follows ElasticFlow's free node list
// (cluster.py) over three events on 2 switches x 2 nodes x 8 GPUs, whose
// nodes are numbered 0-1 on each switch: at first the list is in switch
// order; a released node set goes to its end and the list is sorted
// stably by that number, so a two-node job placed after a release spans
// the switches, and its rank (log.py, the first of its nodes in switch
// order) is not its first node's.
func TestPlacer_FreeNodesKeepTheirOrder(t *testing.T) {
	pl := newPlacer(Spec{Switches: 2, NodesPerSwitch: 2, GPUsPerNode: 8})
	a := &efJob{job: &job{}, num: 16}
	b := &efJob{job: &job{}, num: 8}
	placeAll := func(js ...*efJob) map[*efJob]int {
		t.Helper()
		pl.begin()
		for _, j := range js {
			if err := pl.place(j); err != nil {
				t.Fatal(err)
			}
		}
		ranks := map[*efJob]int{}
		pl.ranks(func(j *efJob, r int) { ranks[j] = r })
		return ranks
	}
	nodes := func(j *efJob) []int { return j.set.nodes }

	// Event 1: the list is 0, 1 (switch 0), 2, 3 (switch 1).
	r := placeAll(a, b)
	if !slices.Equal(nodes(a), []int{0, 1}) || !slices.Equal(nodes(b), []int{2}) || r[a] != 0 || r[b] != 16 {
		t.Fatalf("event 1: a on %v at %d, b on %v at %d", nodes(a), r[a], nodes(b), r[b])
	}
	// Event 2: a is released first: free 3 (id 1), then 0 (id 0), 1
	// (id 1), sorted stably by id: 0, 3, 1; then b's node 2 (id 0): 0, 2,
	// 3, 1.
	pl.release(a)
	pl.release(b)
	if a.set != nil || b.set != nil {
		t.Fatal("released jobs keep their node sets")
	}
	r = placeAll(a, b)
	if !slices.Equal(nodes(a), []int{0, 2}) || !slices.Equal(nodes(b), []int{3}) || r[a] != 0 || r[b] != 24 {
		t.Fatalf("event 2: a on %v at %d, b on %v at %d", nodes(a), r[a], nodes(b), r[b])
	}
	// Event 3: b first this time: free 1 (id 1), then 3 (id 1): 1, 3;
	// then a's 0, 2 (id 0): 0, 2, 1, 3. b alone then takes node 0.
	pl.release(b)
	pl.release(a)
	r = placeAll(b)
	if !slices.Equal(nodes(b), []int{0}) || r[b] != 0 {
		t.Fatalf("event 3: b on %v at %d", nodes(b), r[b])
	}
	// Event 4: b's node 0 (id 0) joins 2, 1, 3 and is sorted in after 2: a
	// 32-GPU job takes all four nodes in that order.
	pl.release(b)
	c := &efJob{job: &job{}, num: 32}
	r = placeAll(c)
	if !slices.Equal(nodes(c), []int{2, 0, 1, 3}) || r[c] != 0 {
		t.Fatalf("event 4: c on %v at %d", nodes(c), r[c])
	}
}
