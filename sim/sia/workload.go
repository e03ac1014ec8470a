package sia

import (
	"fmt"
	"maps"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/sim"
)

// LoadWorkload reads one of Sia's workloads (workloads/<family>/
// workload-N.csv: name,time,application,num_replicas,batch_size, the
// Pollux format), its applications those of p; errors name the file and
// line (sim.ParseError).
func LoadWorkload(path string, p *Profiles) (*sim.Trace, error) {
	apps := make(map[string]*sim.App, len(p.Apps))
	for name, byGPU := range p.Apps {
		apps[name] = byGPU[p.GPUs[0]]
	}
	return sim.LoadPolluxTrace(path, apps)
}

// Specs turns a Sia workload's jobs into simulated jobs on the cluster of
// groups, as Sia's simulator runs them (every job adaptive: its batch
// size and GPU count the scheduler's): each a sim.Hetero over the
// cluster's GPU models, from 1 GPU up to the most any one model can use
// and hold; its restart delay and slowdown its application's.
func Specs(t *sim.Trace, p *Profiles, groups []sim.NodeGroup) ([]sim.JobSpec, error) {
	perNode := make(map[string]int, len(groups))
	capacity := make(map[string]int, len(groups))
	largest, def := 0, ""
	for _, g := range groups {
		perNode[g.Model] = g.GPUsPerNode
		capacity[g.Model] = g.Nodes * g.GPUsPerNode
		if capacity[g.Model] > largest {
			largest, def = capacity[g.Model], g.Model
		}
	}
	models := make(map[string]*sim.Hetero)
	specs := make([]sim.JobSpec, 0, len(t.Jobs))
	for _, j := range t.Jobs {
		app := j.App.Name
		h, ok := models[app]
		if !ok {
			byGPU := make(map[string]*sim.Goodput, len(groups))
			for _, gpu := range slices.Sorted(maps.Keys(perNode)) {
				a, ok := p.Apps[app][gpu]
				if !ok {
					return nil, fmt.Errorf("failed to make jobs: application %s has no profile of GPU model %s", app, gpu)
				}
				// Adaptive: the request does not matter, so the jobs of
				// an application share one model and its caches.
				byGPU[gpu] = sim.NewGoodput(a, sim.BatchAdaptive, j.Batch, j.Replicas)
			}
			var err error
			if h, err = sim.NewHetero(byGPU, def, Slowdown(app), perNode); err != nil {
				return nil, fmt.Errorf("failed to make jobs: %s: %w", app, err)
			}
			models[app] = h
		}
		most := 0
		for gpu, g := range h.Models {
			most = max(most, min(g.MaxReplicas(), capacity[gpu]))
		}
		specs = append(specs, sim.JobSpec{ID: j.ID, Line: j.Line, Submit: j.Submit, Model: h,
			GPUs: policy.GPURequest{Min: 1, Max: max(1, most), PerWorker: 1}, ChargeStart: true, Kind: app,
			RestartDelay: RestartSeconds(app)})
	}
	return specs, nil
}
