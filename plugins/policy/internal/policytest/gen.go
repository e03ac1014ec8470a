package policytest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// RandomSnapshot returns a consistent snapshot with random nodes (some with
// no free GPUs), jobs with constraints, per-node caps, affinity and
// anti-affinity, some running (placed by a first round of a random builtin),
// and some of those with allocations that break the gang rule (a node lost
// a GPU under a worker) for the repair step to fix.
func RandomSnapshot(r *rand.Rand) *policy.Snapshot {
	s := &policy.Snapshot{Now: At(60)}
	models := []string{"A100", "H100"}
	for i := range 1 + r.IntN(24) {
		gpus := []int{0, 1, 2, 4, 8, 8, 8, 16}[r.IntN(8)]
		s.Nodes = append(s.Nodes, policy.Node{
			ID: fmt.Sprintf("node-%02d", i), Pool: []string{"a", "b"}[r.IntN(2)],
			GPUModel: models[r.IntN(2)], GPUMemoryMiB: []int{40960, 81920}[r.IntN(2)],
			GPUs: gpus, Reserved: r.IntN(min(gpus, 2) + 1),
			Attributes: map[string]string{"rack": fmt.Sprintf("r%d", r.IntN(3))},
		})
	}
	addJobs := func(n, from, to int) {
		for range n {
			id := fmt.Sprintf("job-%03d", len(s.Jobs))
			w := []int{1, 2, 4}[r.IntN(3)]
			lo := w * (1 + r.IntN(3))
			j := Queued(id, from+r.IntN(to-from), lo, lo+w*r.IntN(4), w)
			if r.IntN(3) == 0 {
				j.Labels = map[string]string{"team": []string{"x", "y", "z"}[r.IntN(3)]}
			}
			switch r.IntN(8) {
			case 0:
				j.Constraints.GPUModel = models[r.IntN(2)]
			case 1:
				j.Constraints.MinGPUMemoryMiB = 81920
			case 2:
				j.Constraints.Pool = "b"
			case 3:
				j.Constraints.NodeAttributes = map[string]string{"rack": "r1"}
			case 4:
				j.Constraints.MaxGPUsPerNode = w * (1 + r.IntN(2))
			}
			if r.IntN(6) == 0 && len(s.Jobs) > 0 {
				j.AntiAffinity.Jobs = []string{s.Jobs[r.IntN(len(s.Jobs))].ID}
			}
			if r.IntN(8) == 0 {
				j.AntiAffinity.Labels = map[string]string{"team": "x"}
			}
			if r.IntN(6) == 0 && len(s.Jobs) > 0 {
				j.Affinity.Jobs = []string{s.Jobs[r.IntN(len(s.Jobs))].ID}
			}
			if r.IntN(2) == 0 {
				// A target: a deadline (some already passed), and, for
				// most, an estimate of the work left and a speedup table.
				j.Progress.Deadline = At(80 + r.IntN(400))
				if r.IntN(4) != 0 {
					j.Progress.RemainingWork = float64(r.IntN(2000))
				}
				if r.IntN(2) == 0 {
					for g := 1; g <= j.GPUs.Max; g++ {
						j.Speedup = append(j.Speedup, float64(g)/(1+0.1*float64(g-1)))
					}
				}
				j.Progress.Reached = r.IntN(10) == 0
			}
			s.Jobs = append(s.Jobs, j)
		}
	}
	addJobs(r.IntN(30), 0, 50)
	names := slices.Sorted(func(yield func(string) bool) {
		for n := range host.Builtins() {
			if !yield(n) {
				return
			}
		}
	})
	warm := host.Builtins()[names[r.IntN(len(names))]]()
	p, err := warm.Plan(context.Background(), s)
	if err != nil {
		panic(fmt.Sprintf("warm-up plan: %v", err))
	}
	s = s.Apply(p, At(50+r.IntN(10)))
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if j.State != policy.Running || r.IntN(10) != 0 {
			continue
		}
		// A node loses a GPU under the job.
		n := j.Allocation.Nodes()[r.IntN(len(j.Allocation))]
		a := j.Allocation.Clone()
		a[n]--
		j.Allocation = a.Clone()
		if j.Allocation == nil {
			j.State = policy.Queued
		}
	}
	addJobs(r.IntN(30), 50, 100)
	s.Now = At(100)
	return s
}

// BenchSnapshot is the benchmarks' cluster: nodes x 8 GPUs, and queued jobs
// of mixed sizes 1..16, half of them with a range, submitted one a second.
func BenchSnapshot(nodes, jobs int) *policy.Snapshot {
	r := rand.New(rand.NewPCG(1, 2))
	s := &policy.Snapshot{Now: T0.Add(time.Duration(jobs) * time.Second)}
	for i := range nodes {
		s.Nodes = append(s.Nodes, policy.Node{ID: fmt.Sprintf("node-%05d", i), Pool: "default",
			GPUModel: "A100", GPUMemoryMiB: 40960, GPUs: 8})
	}
	for i := range jobs {
		w := []int{1, 1, 2, 4, 8}[r.IntN(5)]
		lo := w * (1 + r.IntN(16/w))
		hi := lo
		if r.IntN(2) == 0 {
			hi = w * (lo/w + r.IntN(16/w-lo/w+1))
		}
		s.Jobs = append(s.Jobs, Queued(fmt.Sprintf("job-%05d", i), i, lo, hi, w))
	}
	return s
}
