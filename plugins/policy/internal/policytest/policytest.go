// Package policytest holds what the policy packages' tests share: hand-made
// nodes and jobs, and generated snapshots (random ones for the property
// tests, large ones for the benchmarks).
package policytest

import (
	"cmp"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// T0 is the epoch of the hand-made snapshots; job n is submitted at T0+n s.
var T0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

// At returns T0 + sec seconds.
func At(sec int) time.Time { return T0.Add(time.Duration(sec) * time.Second) }

// Node is an A100 node in pool "default" with gpus GPUs, reserved of them
// held by others.
func Node(id string, gpus, reserved int) policy.Node {
	return policy.Node{ID: id, Name: id, Pool: "default", GPUModel: "A100", GPUMemoryMiB: 40960,
		GPUs: gpus, Reserved: reserved}
}

// Queued is a queued job submitted at T0+sec asking for [min, max] in
// workers of w GPUs.
func Queued(id string, sec, min, max, w int) policy.Job {
	return policy.Job{ID: id, Name: id, Submitted: At(sec), State: policy.Queued,
		GPUs: policy.GPURequest{Min: min, Max: max, PerWorker: w}}
}

// Running is Queued's job holding alloc, last resized at T0+resized s.
func Running(id string, sec, min, max, w int, alloc policy.Allocation, resized int) policy.Job {
	j := Queued(id, sec, min, max, w)
	j.State, j.Allocation, j.LastResized = policy.Running, alloc, At(resized)
	return j
}

// Targets returns the target of every job that holds GPUs in the plan.
func Targets(s *policy.Snapshot, p *policy.Plan) map[string]policy.Allocation {
	out := map[string]policy.Allocation{}
	for i := range s.Jobs {
		if a := p.Target(&s.Jobs[i]).Clone(); a != nil {
			out[s.Jobs[i].ID] = a
		}
	}
	return out
}

// Vouched returns a copy of s that its maker vouches for, as the planner
// does for its own (policy.Snapshot.Vouch): its jobs in submission order,
// each job's Held filled from its Allocation. It returns nil where s could not be vouched for: a job
// ID empty or repeated, a node ID repeated, or an allocation on a node s
// lacks or of a negative count.
func Vouched(s *policy.Snapshot) *policy.Snapshot {
	at := make(map[string]int32, len(s.Nodes))
	for i := range s.Nodes {
		at[s.Nodes[i].ID] = int32(i)
	}
	if len(at) != len(s.Nodes) {
		return nil
	}
	out := &policy.Snapshot{Now: s.Now, Nodes: s.Nodes, Jobs: slices.Clone(s.Jobs)}
	ids := make(map[string]bool, len(s.Jobs))
	for i := range out.Jobs {
		j := &out.Jobs[i]
		if j.ID == "" || ids[j.ID] {
			return nil
		}
		ids[j.ID] = true
		j.Held = nil
		for id, g := range j.Allocation {
			n, ok := at[id]
			if !ok || g < 0 {
				return nil
			}
			if g > 0 {
				j.Held = append(j.Held, policy.Slot{Node: n, GPUs: g})
			}
		}
		slices.SortFunc(j.Held, func(a, b policy.Slot) int { return cmp.Compare(a.Node, b.Node) })
	}
	slices.SortFunc(out.Jobs, func(a, b policy.Job) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), cmp.Compare(a.ID, b.ID))
	})
	out.Vouch()
	return out
}
