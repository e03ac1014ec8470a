package builtin

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// GoodputUnawareName is the name of the goodput-unaware builtin.
const GoodputUnawareName = "goodput-unaware"

// GoodputUnaware is the goodput builtin run as Sia (SOSP'23) ran Pollux on
// a heterogeneous cluster, to compare with it: blind to GPU models.
//
// Semantics, one round:
//  1. The view. Every node of more GPUs than the cluster's smallest node
//     is seen as whole nodes of that size (an 8-GPU node as two 4-GPU
//     nodes), its reserved GPUs on the first of them (not where a job has
//     anti-affinity or a cap of GPUs a node: the base cannot see that two
//     parts are one node); a running job's GPUs
//     on a node fill the node's parts in submission order. The nodes' GPU
//     models are hidden (unless a job pins a model), and the jobs'
//     goodput by model (Job.ByModel) is dropped: the base policy reads only
//     the speedup table (Job.Speedup), which is for one model.
//  2. The base policy (goodput, or goodput-jct with base = goodput-jct)
//     plans on that view; its allocations are summed back per real node.
//  3. Repair: a job whose GPUs span GPU models keeps those of the model
//     holding most of them (ties: the model it runs on now, then that of
//     its lowest node ID) and drops the rest ("a job spanning types moved
//     to the type holding most of its GPUs"); if what it keeps breaks its
//     gang rule, it keeps the largest count in whole workers of at least
//     Min, or nothing.
//
// On a cluster of one model and one node size it plans as its base.
//
// Config: base = goodput (default) or goodput-jct; any other key is the
// base policy's. Over goodput, restart_penalty defaults to Pollux's 30 s
// (Sia's Pollux charges it; goodput's own default is off).
type GoodputUnaware struct {
	base atomic.Pointer[policy.Policy]
}

// DefaultUnawareRestartPenalty is goodput-unaware's default
// restart_penalty of its goodput base: Pollux's 30 s, which Sia's Pollux
// baseline charges (sia-simulator's pollux_unaware.py).
const DefaultUnawareRestartPenalty = 30 * time.Second

// NewGoodputUnaware returns a goodput-unaware policy over goodput.
func NewGoodputUnaware() *GoodputUnaware {
	p := &GoodputUnaware{}
	g := NewGoodput()
	g.penalty.Store(int64(DefaultUnawareRestartPenalty))
	var b policy.Policy = g
	p.base.Store(&b)
	return p
}

// PluginInfo implements policy.Base.
func (p *GoodputUnaware) PluginInfo() policy.Info {
	return policy.Info{Name: GoodputUnawareName, Version: Version, IgnoresPriority: true,
		Description: "goodput blind to GPU models, as Sia compared Pollux: large nodes seen as small ones, a job spanning models cut to the model holding most of its GPUs"}
}

// SetConfig implements policy.Base.
func (p *GoodputUnaware) SetConfig(config map[string]string) error {
	rest := make(map[string]string, len(config))
	name := GoodputName
	for k, v := range config {
		if k == "base" {
			name = v
			continue
		}
		rest[k] = v
	}
	var b policy.Policy
	switch name {
	case GoodputName:
		b = NewGoodput()
		if _, ok := rest["restart_penalty"]; !ok {
			rest["restart_penalty"] = DefaultUnawareRestartPenalty.String()
		}
	case GoodputJCTName:
		b = NewGoodputJCT()
	default:
		return fmt.Errorf("failed to configure %s: base %q is not %s or %s", GoodputUnawareName, name, GoodputName, GoodputJCTName)
	}
	if err := b.SetConfig(rest); err != nil {
		return fmt.Errorf("failed to configure %s: %w", GoodputUnawareName, err)
	}
	p.base.Store(&b)
	return nil
}

// Plan implements policy.Policy.
func (p *GoodputUnaware) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	base := *p.base.Load()
	view, parts := unawareView(s)
	vp, err := base.Plan(ctx, view)
	if err != nil {
		return nil, err
	}
	out := &policy.Plan{Policy: GoodputUnawareName, Allocations: make(map[string]policy.Allocation, len(vp.Allocations)),
		Reasons: vp.Reasons, Waiting: vp.Waiting}
	model := make(map[string]string, len(s.Nodes))
	for i := range s.Nodes {
		model[s.Nodes[i].ID] = s.Nodes[i].GPUModel
	}
	for id, va := range vp.Allocations {
		a := make(policy.Allocation, len(va))
		for vn, g := range va {
			if g > 0 {
				a[parts[vn]] += g
			}
		}
		out.Allocations[id] = a
	}
	cutToOneModel(s, out, model)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if a, ok := out.Allocations[j.ID]; ok && a.Equal(j.Allocation) {
			out.Allocations[j.ID] = j.Allocation
		}
	}
	return out, nil
}

// cutToOneModel cuts each job whose target in plan spans GPU models
// (oneModel), whether the plan changes it or leaves it as it holds. A
// job that starts so gets one start reason, for what it keeps.
func cutToOneModel(s *policy.Snapshot, plan *policy.Plan, model map[string]string) {
	for i := range s.Jobs {
		cutJobToOneModel(&s.Jobs[i], plan, model)
	}
}

// cutJobToOneModel is cutToOneModel for job j.
func cutJobToOneModel(j *policy.Job, plan *policy.Plan, model map[string]string) {
	a := plan.Target(j)
	if len(a) < 2 {
		return
	}
	kept, why := oneModel(j, a, model)
	if why == "" {
		return
	}
	if plan.Allocations == nil {
		plan.Allocations = make(map[string]policy.Allocation)
	}
	plan.Allocations[j.ID] = kept
	if plan.Reasons == nil {
		plan.Reasons = make(map[string][]string)
	}
	if j.Allocation.Total() == 0 && kept.Total() > 0 {
		plan.Reasons[j.ID] = []string{fmt.Sprintf("started with %s on %s (%s)", policy.GPUs(kept.Total()), policy.Count(len(kept.Nodes()), "node"), why)}
		return
	}
	plan.Reasons[j.ID] = append(slices.Clip(plan.Reasons[j.ID]), why)
}

// unawareView returns s as the unaware base sees it (see GoodputUnaware)
// and the real node of each part, by part ID.
func unawareView(s *policy.Snapshot) (*policy.Snapshot, map[string]string) {
	// A node is cut into parts unless a job has anti-affinity or a cap
	// of GPUs a node: the base would take two parts of one node for two
	// nodes.
	unit, anti, pinned := 0, false, false
	for i := range s.Jobs {
		c := &s.Jobs[i].Constraints
		anti = anti || !s.Jobs[i].AntiAffinity.IsZero() || c.MaxGPUsPerNode > 0
		pinned = pinned || c.GPUModel != ""
	}
	for i := range s.Nodes {
		if g := s.Nodes[i].GPUs; g > 0 && (unit == 0 || g < unit) {
			unit = g
		}
	}
	view := &policy.Snapshot{Now: s.Now, Nodes: make([]policy.Node, 0, len(s.Nodes)), Jobs: make([]policy.Job, len(s.Jobs))}
	parts := make(map[string]string, len(s.Nodes))
	partsOf := make(map[string][]int, len(s.Nodes)) // node ID -> indexes of its parts in view.Nodes
	free := make([]int, 0, len(s.Nodes))            // per part
	for i := range s.Nodes {
		n := s.Nodes[i]
		k := 1
		if !anti && unit > 0 && n.GPUs > unit && n.GPUs%unit == 0 {
			k = n.GPUs / unit
		}
		reserved := n.Reserved
		for x := range k {
			v := n
			v.GPUs = n.GPUs / k
			if k > 1 {
				v.ID = fmt.Sprintf("%s/%d", n.ID, x)
				v.Name = v.ID
			}
			v.Reserved = min(reserved, v.GPUs)
			reserved -= v.Reserved
			if !pinned {
				v.GPUModel = "" // blind: the base may span models (step 3 repairs)
			}
			parts[v.ID] = n.ID
			partsOf[n.ID] = append(partsOf[n.ID], len(view.Nodes))
			free = append(free, v.GPUs-v.Reserved)
			view.Nodes = append(view.Nodes, v)
		}
	}
	for i := range s.Jobs {
		j := s.Jobs[i]
		j.ByModel, j.Held = nil, nil
		if len(j.Allocation) > 0 {
			a := make(policy.Allocation, len(j.Allocation))
			for _, id := range j.Allocation.Nodes() {
				g := j.Allocation[id]
				ps := partsOf[id]
				if len(ps) == 0 {
					a[id] = g // a node the snapshot lacks: the base refuses it
					continue
				}
				w := max(1, j.GPUs.PerWorker)
				// Whole workers first, part by part; what is left where
				// no part has room for a worker goes where there is room.
				for _, pi := range ps {
					take := min(g, free[pi]/w*w)
					if take > 0 {
						a[view.Nodes[pi].ID] += take
						free[pi] -= take
						g -= take
					}
				}
				for _, pi := range ps {
					take := min(g, free[pi])
					if take > 0 {
						a[view.Nodes[pi].ID] += take
						free[pi] -= take
						g -= take
					}
				}
				if g > 0 {
					a[view.Nodes[ps[0]].ID] += g // more than the node has: the base repairs it
				}
			}
			j.Allocation = a
		}
		view.Jobs[i] = j
	}
	return view, parts
}

// oneModel keeps, of job j's allocation a, only the GPUs of the model that
// holds most of them (see GoodputUnaware); dropped says what it dropped,
// "" if a was of one model.
func oneModel(j *policy.Job, a policy.Allocation, model map[string]string) (policy.Allocation, string) {
	per := make(map[string]int, 2)
	for id, g := range a {
		if g > 0 {
			per[model[id]] += g
		}
	}
	if len(per) < 2 {
		return a, ""
	}
	// The model it runs on now: the one holding most of its GPUs (ties:
	// that of its lowest node ID).
	now, nowGPUs := "", 0
	held := make(map[string]int, 2)
	for _, id := range j.Allocation.Nodes() {
		m := model[id]
		held[m] += j.Allocation[id]
		if held[m] > nowGPUs {
			now, nowGPUs = m, held[m]
		}
	}
	first := model[a.Nodes()[0]]
	best := ""
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range per {
			if !yield(m) {
				return
			}
		}
	}) {
		switch {
		case best == "" || per[m] > per[best]:
			best = m
		case per[m] == per[best] && (m == now || (best != now && m == first)):
			best = m
		}
	}
	kept := make(policy.Allocation, len(a))
	w := max(1, j.GPUs.PerWorker)
	total := 0
	for _, id := range a.Nodes() {
		if model[id] == best {
			g := a[id] / w * w
			if total+g > j.GPUs.Max {
				g = (j.GPUs.Max - total) / w * w
			}
			if g > 0 {
				kept[id] = g
				total += g
			}
		}
	}
	var drop []string
	for _, m := range slices.Sorted(func(yield func(string) bool) {
		for m := range per {
			if m != best && !yield(m) {
				return
			}
		}
	}) {
		drop = append(drop, fmt.Sprintf("%s of %s", policy.GPUs(per[m]), modelName(m)))
	}
	if total < j.GPUs.Min {
		return nil, fmt.Sprintf("stopped: its GPUs spanned GPU models and the %d of %s are fewer than its minimum %d", total, modelName(best), j.GPUs.Min)
	}
	return kept, fmt.Sprintf("kept its %s of %s, dropped %s: one job runs on one GPU model", policy.GPUs(total), modelName(best), strings.Join(drop, ", "))
}

func modelName(m string) string {
	if m == "" {
		return "no model"
	}
	return m
}
