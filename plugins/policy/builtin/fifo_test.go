package builtin_test

import (
	"strings"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/shoenig/test/must"
)

type A = policy.Allocation

func TestFIFO(t *testing.T) {
	h100 := node("h1", 8, 0)
	h100.GPUModel = "H100"
	antiA := queued("b", 2, 2, 2, 2)
	antiA.AntiAffinity = policy.Selector{Jobs: []string{"a"}}
	affA := queued("b", 2, 2, 2, 2)
	affA.Affinity = policy.Selector{Labels: map[string]string{"team": "x"}}
	labelled := running("a", 1, 2, 2, 2, A{"n2": 2}, 1)
	labelled.Labels = map[string]string{"team": "x"}
	spread := queued("a", 1, 8, 8, 2)
	spread.Constraints.MaxGPUsPerNode = 2
	onH100 := queued("a", 1, 4, 4, 4)
	onH100.Constraints.GPUModel = "H100"

	cases := []struct {
		name   string
		config map[string]string
		nodes  []policy.Node
		jobs   []policy.Job
		want   map[string]policy.Allocation
	}{{
		name:  "submission order, best fit",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{queued("c", 3, 4, 4, 4), queued("a", 1, 4, 4, 4), queued("b", 2, 8, 8, 8)},
		want:  map[string]A{"a": {"n1": 4}, "b": {"n2": 8}, "c": {"n1": 4}},
	}, {
		name:  "head-of-line blocking",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{running("x", 0, 6, 6, 2, A{"n1": 6}, 0),
			queued("a", 1, 4, 4, 4), queued("b", 2, 2, 2, 2)},
		want: map[string]A{"x": {"n1": 6}},
	}, {
		name:  "tightest node first",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 5), node("n3", 8, 3)},
		jobs:  []policy.Job{queued("a", 1, 3, 3, 1), queued("b", 2, 5, 5, 1), queued("c", 3, 8, 8, 1)},
		want:  map[string]A{"a": {"n2": 3}, "b": {"n3": 5}, "c": {"n1": 8}},
	}, {
		name:  "spills in whole workers onto fewest nodes",
		nodes: []policy.Node{node("n1", 8, 2), node("n2", 8, 0), node("n3", 8, 0)},
		jobs:  []policy.Job{queued("a", 1, 12, 12, 4)},
		want:  map[string]A{"a": {"n2": 8, "n1": 4}},
	}, {
		name:  "workers do not split across nodes",
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0), node("n3", 4, 0), node("n4", 2, 0)},
		jobs:  []policy.Job{queued("a", 1, 9, 9, 3)},
		want:  map[string]A{"a": {"n1": 3, "n2": 3, "n3": 3}},
	}, {
		name:  "range starts with the largest count that fits",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  []policy.Job{queued("a", 1, 2, 16, 2)},
		want:  map[string]A{"a": {"n1": 8}},
	}, {
		name:   "range starts with min when configured",
		config: map[string]string{"start_size": "min"},
		nodes:  []policy.Node{node("n1", 8, 0)},
		jobs:   []policy.Job{queued("a", 1, 2, 16, 2)},
		want:   map[string]A{"a": {"n1": 2}},
	}, {
		name:  "running jobs are not resized",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 2}, 1)},
		want:  map[string]A{"a": {"n1": 2}},
	}, {
		name:  "gpu model constraint",
		nodes: []policy.Node{node("n1", 8, 0), h100},
		jobs:  []policy.Job{onH100},
		want:  map[string]A{"a": {"h1": 4}},
	}, {
		name:  "anti-affinity keeps jobs apart",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 2, 2, 2, A{"n1": 2}, 1), antiA},
		want:  map[string]A{"a": {"n1": 2}, "b": {"n2": 2}},
	}, {
		name:  "affinity beats best fit",
		nodes: []policy.Node{node("n1", 8, 6), node("n2", 8, 0)},
		jobs:  []policy.Job{labelled, affA},
		want:  map[string]A{"a": {"n2": 2}, "b": {"n2": 2}},
	}, {
		name:  "max gpus per node spreads workers",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0), node("n3", 8, 0), node("n4", 8, 0)},
		jobs:  []policy.Job{spread},
		want:  map[string]A{"a": {"n1": 2, "n2": 2, "n3": 2, "n4": 2}},
	}, {
		name:  "repairs a partial worker",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 2, 4, 2, A{"n1": 2, "n2": 1}, 1)},
		want:  map[string]A{"a": {"n1": 2}},
	}, {
		name:  "repairs below min by growing back",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 4, 4, 2, A{"n1": 2}, 1)},
		want:  map[string]A{"a": {"n1": 4}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.FIFOName, tc.config), s)
			must.Eq(t, tc.want, targets(s, p))
			must.Eq(t, builtin.FIFOName, p.Policy)
		})
	}
}

func TestFIFO_Reasons(t *testing.T) {
	s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 8, 0)}, Jobs: []policy.Job{
		queued("a", 1, 6, 6, 2), queued("b", 2, 4, 4, 4), queued("c", 3, 2, 2, 2)}}
	p := plan(t, builtin.NewFIFO(), s)
	must.Eq(t, map[string]A{"a": {"n1": 6}}, targets(s, p))
	must.SliceLen(t, 1, p.Reasons["b"])
	must.StrContains(t, p.Reasons["b"][0], "needs at least 4 GPUs in 4-GPU workers, room for 0 now")
	// c, behind b, has the line's one reason (the plan's Waiting), not an
	// entry of its own.
	must.MapNotContainsKey(t, p.Reasons, "c")
	must.SliceLen(t, 1, p.Why(&s.Jobs[2]))
	must.StrContains(t, p.Why(&s.Jobs[2])[0], "waiting behind job b")
	must.Eq(t, p.Reasons["b"], p.Why(&s.Jobs[1]))
	must.True(t, strings.HasPrefix(p.Reasons["a"][0], "started with 6 GPUs"))
}

func TestBuiltins_SetConfig(t *testing.T) {
	cases := []struct {
		name   string
		policy string
		config map[string]string
		err    string
	}{
		{name: "fifo defaults", policy: builtin.FIFOName},
		{name: "fifo min", policy: builtin.FIFOName, config: map[string]string{"start_size": "min"}},
		{name: "fifo bad value", policy: builtin.FIFOName, config: map[string]string{"start_size": "huge"}, err: `start_size: "huge"`},
		{name: "fifo unknown key", policy: builtin.FIFOName, config: map[string]string{"speed": "1"}, err: "unknown config key(s) speed"},
		{name: "rr unknown key", policy: builtin.RoundRobinName, config: map[string]string{"x": "1"}, err: "unknown config key(s) x"},
		{name: "elastic cooldown", policy: builtin.ElasticFIFOName, config: map[string]string{"resize_cooldown": "90s"}},
		{name: "elastic bad cooldown", policy: builtin.ElasticFIFOName, config: map[string]string{"resize_cooldown": "-1s"}, err: "resize_cooldown"},
		{name: "elastic cooldown above a day", policy: builtin.ElasticFIFOName, config: map[string]string{"resize_cooldown": "2562047h"}, err: "resize_cooldown"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := host.Builtins()[tc.policy]()
			err := p.SetConfig(tc.config)
			if tc.err == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorContains(t, err, tc.err)
			must.StrContains(t, err.Error(), tc.policy)
		})
	}
}

func TestBuiltins_Info(t *testing.T) {
	for name, f := range host.Builtins() {
		t.Run(name, func(t *testing.T) {
			must.Eq(t, name, f().PluginInfo().Name)
		})
	}
}
