package builtin_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

func TestElasticFIFO(t *testing.T) {
	cases := []struct {
		name   string
		config map[string]string
		nodes  []policy.Node
		jobs   []policy.Job
		want   map[string]policy.Allocation
		// shrunk lists the jobs that must carry a "shrunk" reason.
		shrunk []string
	}{{
		name:  "admits at min, then grows the oldest into idle GPUs",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  []policy.Job{queued("a", 1, 2, 8, 2), queued("b", 2, 2, 8, 2)},
		want:  map[string]A{"a": {"n1": 6}, "b": {"n1": 2}},
	}, {
		name:  "growth stops at max",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{queued("a", 1, 2, 4, 2), queued("b", 2, 2, 4, 2)},
		want:  map[string]A{"a": {"n1": 4}, "b": {"n1": 4}},
	}, {
		name:  "grows on its own node first",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 2, 8, 2, A{"n2": 2}, 1)},
		want:  map[string]A{"a": {"n2": 8}},
	}, {
		name:  "grows across nodes in whole workers",
		nodes: []policy.Node{node("n1", 8, 5), node("n2", 8, 0)},
		jobs:  []policy.Job{running("a", 1, 4, 16, 4, A{"n2": 4}, 1)},
		want:  map[string]A{"a": {"n2": 8}},
	}, {
		name:  "shrinks the most recently resized to admit",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 4}, 10),
			running("b", 2, 2, 8, 2, A{"n1": 4}, 20), queued("c", 3, 2, 2, 2)},
		want:   map[string]A{"a": {"n1": 4}, "b": {"n1": 2}, "c": {"n1": 2}},
		shrunk: []string{"b"},
	}, {
		name:  "shrinks several, never below min",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 4}, 10),
			running("b", 2, 2, 8, 2, A{"n1": 4}, 20), queued("c", 3, 4, 4, 2)},
		want:   map[string]A{"a": {"n1": 2}, "b": {"n1": 2}, "c": {"n1": 4}},
		shrunk: []string{"a", "b"},
	}, {
		name:  "puts back shrinks the placement did not need",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs: []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 6}, 10),
			running("b", 2, 6, 8, 2, A{"n2": 8}, 20), queued("c", 3, 4, 4, 4)},
		want:   map[string]A{"a": {"n1": 4}, "b": {"n2": 8}, "c": {"n1": 4}},
		shrunk: []string{"a"},
	}, {
		name:  "blocks the head of the line when shrinking cannot help",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{running("a", 1, 6, 8, 2, A{"n1": 8}, 10),
			queued("c", 3, 4, 4, 2), queued("d", 4, 2, 2, 2)},
		want: map[string]A{"a": {"n1": 8}},
	}, {
		name:  "only shrinks on nodes the queued job may use",
		nodes: []policy.Node{node("n1", 8, 0), func() policy.Node { n := node("h1", 8, 0); n.GPUModel = "H100"; return n }()},
		jobs: []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 8}, 10),
			running("b", 2, 2, 8, 2, A{"h1": 8}, 20),
			func() policy.Job { j := queued("c", 3, 2, 2, 2); j.Constraints.GPUModel = "A100"; return j }()},
		want:   map[string]A{"a": {"n1": 6}, "b": {"h1": 8}, "c": {"n1": 2}},
		shrunk: []string{"a"},
	}, {
		name:   "cooldown holds growth of recently resized jobs",
		config: map[string]string{"resize_cooldown": "1m"},
		nodes:  []policy.Node{node("n1", 8, 0)},
		jobs:   []policy.Job{running("a", 1, 2, 8, 2, A{"n1": 2}, 70), queued("b", 2, 2, 4, 2)},
		want:   map[string]A{"a": {"n1": 2}, "b": {"n1": 4}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.ElasticFIFOName, tc.config), s)
			must.Eq(t, tc.want, targets(s, p))
			for _, id := range tc.shrunk {
				must.SliceNotEmpty(t, p.Reasons[id])
				must.StrContains(t, p.Reasons[id][len(p.Reasons[id])-1], "shrunk from")
			}
		})
	}
}

// A job admitted at its minimum and grown into idle GPUs in the same round
// has one reason, which says what the plan's change says (start: 0 -> 4),
// not "started with 1 GPUs" beside "grown from 1 to 4" (issue 28); a
// running job grown says from what.
func TestElasticFIFO_StartedAndGrownInOneReason(t *testing.T) {
	for _, name := range []string{builtin.ElasticFIFOName, builtin.EDFName} {
		t.Run(name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 4, 0)}, Jobs: []policy.Job{queued("a", 1, 1, 4, 1)}}
			p := plan(t, configured(t, name, nil), s)
			must.Eq(t, map[string]A{"a": {"n1": 4}}, targets(s, p))
			must.Eq(t, []string{"started with 4 GPUs on 1 node (its minimum: 1 GPU, then grown into idle GPUs)"}, p.Reasons["a"])

			s = &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 2, 0)}, Jobs: []policy.Job{running("b", 2, 1, 2, 1, A{"n1": 1}, 10)}}
			p = plan(t, configured(t, name, nil), s)
			must.Eq(t, []string{"grown from 1 to 2 GPUs into idle GPUs"}, p.Reasons["b"])
		})
	}
}
