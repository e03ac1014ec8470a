package policy

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// TestValidFastAgreesWithFull: the one-pass check (valid) passes exactly
// the plans the full check (violations) finds nothing wrong with, over
// random snapshots and plans with every kind of violation in reach.
func TestValidFastAgreesWithFull(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 18))
	passed, failed := 0, 0
	for i := range 20000 {
		s, p := randomCase(r)
		fast, full := valid(s, p), violations(s, p)
		if fast != (full == nil) {
			t.Fatalf("case %d: valid=%v but violations=%v\nsnapshot jobs %+v\nplan %+v", i, fast, full, s.Jobs, p)
		}
		// The same snapshot vouched for (its jobs' GPUs read from Held).
		if v := valid(vouched(s), p); v != fast {
			t.Fatalf("case %d: valid=%v vouched, %v not\nsnapshot jobs %+v\nplan %+v", i, v, fast, s.Jobs, p)
		}
		if fast {
			passed++
		} else {
			failed++
		}
	}
	// Both outcomes must be common, or the test proves little.
	if passed < 2000 || failed < 2000 {
		t.Fatalf("unbalanced cases: %d valid, %d invalid", passed, failed)
	}
}

func randomCase(r *rand.Rand) (*Snapshot, *Plan) {
	nodes := make([]Node, 1+r.IntN(4))
	for i := range nodes {
		nodes[i] = Node{ID: fmt.Sprintf("n%d", i), GPUs: 8, Reserved: r.IntN(3) / 2 * 2,
			GPUModel: []string{"A100", "H100"}[r.IntN(2)], Pool: []string{"", "fast"}[r.IntN(2)],
			GPUMemoryMiB: 40000 + 40000*r.IntN(2), Attributes: map[string]string{"rack": fmt.Sprint(r.IntN(2))}}
	}
	jobs := make([]Job, 1+r.IntN(5))
	free := make([]int, len(nodes))
	for i := range nodes {
		free[i] = nodes[i].GPUs - nodes[i].Reserved
	}
	for i := range jobs {
		w := []int{1, 2, 4}[r.IntN(3)]
		lo := w * (1 + r.IntN(2))
		j := Job{ID: fmt.Sprintf("j%d", i), Submitted: time.Unix(int64(i), 0),
			GPUs: GPURequest{Min: lo, Max: lo + w*r.IntN(3), PerWorker: w}}
		if r.IntN(20) == 0 {
			j.GPUs.PerWorker = 0 // malformed
		}
		switch r.IntN(8) {
		case 0:
			j.Constraints.GPUModel = "H100"
		case 1:
			j.Constraints.MinGPUMemoryMiB = 60000
		case 2:
			j.Constraints.Pool = "fast"
		case 3:
			j.Constraints.NodeAttributes = map[string]string{"rack": "1"}
		case 4:
			j.Constraints.MaxGPUsPerNode = w
		}
		switch r.IntN(6) {
		case 0:
			j.AntiAffinity.Jobs = []string{fmt.Sprintf("j%d", r.IntN(len(jobs)))}
		case 1:
			j.Labels = map[string]string{"team": "x"}
			j.AntiAffinity.Labels = map[string]string{"team": "x"}
		}
		// Running jobs hold a whole-worker allocation where it fits,
		// some of them on two nodes (of one GPU model or of two).
		if r.IntN(2) == 0 && w > 0 {
			n := r.IntN(len(nodes))
			if free[n] >= lo {
				j.Allocation = Allocation{nodes[n].ID: lo}
				free[n] -= lo
				j.State = Running
			}
			if m := r.IntN(len(nodes)); j.State == Running && m != n && r.IntN(3) == 0 && free[m] >= w {
				j.Allocation[nodes[m].ID] = w
				free[m] -= w
			}
		}
		jobs[i] = j
	}
	p := &Plan{Allocations: map[string]Allocation{}, Reasons: map[string][]string{}}
	for i := range jobs {
		if r.IntN(3) == 0 {
			continue // keeps its allocation
		}
		a := Allocation{}
		for range r.IntN(3) {
			id := nodes[r.IntN(len(nodes))].ID
			if r.IntN(25) == 0 {
				id = "n9" // unknown
			}
			g := max(jobs[i].GPUs.PerWorker, 1) * r.IntN(4)
			if r.IntN(25) == 0 {
				g = -g - 1
			} else if r.IntN(25) == 0 {
				g++
			}
			a[id] = g
		}
		p.Allocations[jobs[i].ID] = a
		if r.IntN(2) == 0 {
			p.Reasons[jobs[i].ID] = []string{"why"}
		}
	}
	switch r.IntN(30) {
	case 0:
		p.Allocations["ghost"] = nil
	case 1:
		p.Reasons["ghost"] = []string{"why"}
	}
	return &Snapshot{Now: time.Unix(100, 0), Nodes: nodes, Jobs: jobs}, p
}

// TestAllowsAgreesWithMismatch: Allows (allows, no words) passes exactly
// the nodes mismatch finds nothing wrong with.
func TestAllowsAgreesWithMismatch(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for i := range 2000 {
		s, _ := randomCase(r)
		for k := range s.Jobs {
			c := &s.Jobs[k].Constraints
			for n := range s.Nodes {
				if got, want := c.Allows(&s.Nodes[n]), c.mismatch(&s.Nodes[n]) == ""; got != want {
					t.Fatalf("case %d: job %d on node %d: Allows=%v, mismatch=%q", i, k, n, got, c.mismatch(&s.Nodes[n]))
				}
			}
		}
	}
}

// vouched is s vouched for (Snapshot.Vouch), each job's Held made from
// its Allocation; randomCase's jobs hold GPUs on its nodes only.
func vouched(s *Snapshot) *Snapshot {
	out := &Snapshot{Now: s.Now, Nodes: s.Nodes, Jobs: slices.Clone(s.Jobs)}
	for i := range out.Jobs {
		j := &out.Jobs[i]
		for k := range out.Nodes {
			if g := j.Allocation[out.Nodes[k].ID]; g > 0 {
				j.Held = append(j.Held, Slot{Node: int32(k), GPUs: g})
			}
		}
	}
	out.Vouch()
	return out
}

// TestValidVouchedKeptAllocation: a kept allocation that breaks the gang
// rule fails a vouched snapshot's check as a plain one's.
func TestValidVouchedKeptAllocation(t *testing.T) {
	nodes := []Node{{ID: "n0", GPUs: 8}, {ID: "n1", GPUs: 8}}
	for _, a := range []Allocation{{"n0": 3}, {"n0": 2, "n1": 4}, {"n1": 2}} {
		s := &Snapshot{Nodes: nodes, Jobs: []Job{{ID: "a", GPUs: GPURequest{Min: 2, Max: 4, PerWorker: 2}, Allocation: a}}}
		p := &Plan{}
		want := violations(s, p) == nil
		if got := valid(vouched(s), p); got != want {
			t.Fatalf("%v: valid=%v vouched, full check %v", a, got, want)
		}
	}
}
