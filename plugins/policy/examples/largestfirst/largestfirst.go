// Package largestfirst is an example external policy, small enough to read
// in one go: each round it starts the queued jobs that ask for the most GPUs
// first. It imports the contract (package policy) alone, as a plugin in any
// language could be written from it; its binary, cmd/largest-first, serves
// it with plugin.Serve (plugins/policy/plugin). A Go policy that wants the builtins' placement
// (best-fit packing, affinity, repairs, shrinking donors) can plan on
// package policy/place instead.
//
// Semantics: queued jobs are taken by Max, largest first (then submission
// order, then ID); each starts with the largest multiple of PerWorker in
// [Min, Max] that fits, placed on the nodes with the most room first (ties
// by node ID) of one GPU model (policy.Validate's one-model rule: the model
// with the most room for it, ties by name), or is skipped if Min does not fit (there is no head-of-line
// blocking: smaller jobs fill in behind a large one). Running jobs are left
// alone, except those whose allocation breaks the gang rule (a node lost a
// GPU under a worker): those are stopped, and start again as queued jobs in
// a later round.
package largestfirst

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Name is the policy's name, and the name of its binary in plugin_dir.
const Name = "largest-first"

// Policy is the largest-first policy. It has no configuration.
type Policy struct{}

// New returns the policy.
func New() *Policy { return &Policy{} }

// PluginInfo implements policy.Base.
func (*Policy) PluginInfo() policy.Info {
	return policy.Info{Name: Name, Version: "0.1.0", Description: "largest queued job first, with backfill", IgnoresPriority: true}
}

// SetConfig implements policy.Base; any key is an error.
func (*Policy) SetConfig(config map[string]string) error {
	for k := range config {
		return fmt.Errorf("failed to configure %s: unknown config key %q", Name, k)
	}
	return nil
}

// Plan implements policy.Policy.
func (*Policy) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	r := newRound(s)
	plan := &policy.Plan{Policy: Name, Allocations: map[string]policy.Allocation{}, Reasons: map[string][]string{}}
	var queued []*policy.Job
	for _, j := range r.jobs {
		switch {
		case j.Allocation.Total() == 0:
			queued = append(queued, j)
		case !keepsGangRule(j):
			r.release(j)
			plan.Allocations[j.ID] = policy.Allocation{} // present and empty: stopped
			plan.Reasons[j.ID] = []string{"stopped: its allocation breaks the gang rule (a node lost a GPU under a worker)"}
		}
	}
	slices.SortStableFunc(queued, func(a, b *policy.Job) int { return cmp.Compare(b.GPUs.Max, a.GPUs.Max) })
	for _, j := range queued {
		w := j.GPUs.PerWorker
		room := r.room(j)
		g := min(j.GPUs.Max, room.total/w*w)
		if w < 1 || g < j.GPUs.Min || g == 0 {
			plan.Reasons[j.ID] = []string{fmt.Sprintf("queued: needs %s, %d fit now", policy.GPUs(j.GPUs.Min), room.total)}
			continue
		}
		plan.Allocations[j.ID] = r.take(j, room, g)
		plan.Reasons[j.ID] = []string{fmt.Sprintf("started with %s (largest first)", policy.GPUs(g))}
	}
	return plan, nil
}

// keepsGangRule reports whether running job j's allocation is whole workers
// within [Min, Max], as policy.Validate wants of every job it keeps.
func keepsGangRule(j *policy.Job) bool {
	r := j.GPUs
	if r.PerWorker < 1 {
		return false
	}
	for _, g := range j.Allocation {
		if g < 0 || g%r.PerWorker != 0 {
			return false
		}
	}
	t := j.Allocation.Total()
	return t >= r.Min && t <= r.Max
}

// round is one round's working state: free GPUs per node, and who holds
// GPUs where (for anti-affinity).
type round struct {
	nodes []*policy.Node // by ID
	jobs  []*policy.Job  // by (Submitted, ID)
	free  map[string]int
	on    map[string][]*policy.Job
}

func newRound(s *policy.Snapshot) *round {
	r := &round{free: s.Free(), on: map[string][]*policy.Job{}}
	for i := range s.Nodes {
		r.nodes = append(r.nodes, &s.Nodes[i])
	}
	slices.SortFunc(r.nodes, func(a, b *policy.Node) int { return strings.Compare(a.ID, b.ID) })
	for i := range s.Jobs {
		j := &s.Jobs[i]
		r.jobs = append(r.jobs, j)
		for _, n := range j.Allocation.Nodes() {
			r.on[n] = append(r.on[n], j)
		}
	}
	slices.SortFunc(r.jobs, func(a, b *policy.Job) int {
		return cmp.Or(a.Submitted.Compare(b.Submitted), strings.Compare(a.ID, b.ID))
	})
	return r
}

// release frees the GPUs job j holds.
func (r *round) release(j *policy.Job) {
	for n, g := range j.Allocation {
		r.free[n] += g
		r.on[n] = slices.DeleteFunc(r.on[n], func(k *policy.Job) bool { return k == j })
	}
}

// room is where a job may go: whole workers per node, most room first.
type room struct {
	nodes []nodeRoom
	total int
}

type nodeRoom struct {
	id   string
	gpus int
}

// room returns the GPUs, in whole workers, that job j may take on each node
// that its constraints allow and that holds no job it conflicts with, of
// the one GPU model with the most such room (a job's GPUs are all of one
// model).
func (r *round) room(j *policy.Job) room {
	models := map[string]bool{}
	for _, n := range r.nodes {
		models[n.GPUModel] = true
	}
	best := room{}
	for _, m := range slices.Sorted(maps.Keys(models)) {
		if x := r.roomOn(j, m); x.total > best.total {
			best = x
		}
	}
	return best
}

// roomOn is room on the nodes of GPU model model.
func (r *round) roomOn(j *policy.Job, model string) room {
	var out room
	w, capN := j.GPUs.PerWorker, j.Constraints.MaxGPUsPerNode
	if w < 1 {
		return out
	}
	for _, n := range r.nodes {
		if n.GPUModel != model {
			continue
		}
		u := r.free[n.ID]
		if capN > 0 {
			u = min(u, capN)
		}
		u = u / w * w
		if u <= 0 || !j.Constraints.Allows(n) || slices.ContainsFunc(r.on[n.ID], func(k *policy.Job) bool {
			return j.AntiAffinity.Matches(k) || k.AntiAffinity.Matches(j)
		}) {
			continue
		}
		out.nodes = append(out.nodes, nodeRoom{id: n.ID, gpus: u})
		out.total += u
	}
	slices.SortStableFunc(out.nodes, func(a, b nodeRoom) int { return cmp.Compare(b.gpus, a.gpus) })
	return out
}

// take places g GPUs of job j (g <= room.total, in whole workers) on the
// nodes of room, most room first.
func (r *round) take(j *policy.Job, room room, g int) policy.Allocation {
	a := policy.Allocation{}
	for _, n := range room.nodes {
		if g == 0 {
			break
		}
		t := min(n.gpus, g)
		a[n.id] = t
		r.free[n.id] -= t
		r.on[n.id] = append(r.on[n.id], j)
		g -= t
	}
	return a
}
