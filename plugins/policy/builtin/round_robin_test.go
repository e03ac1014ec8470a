package builtin_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

func TestRoundRobin(t *testing.T) {
	four := []policy.Node{node("n1", 8, 0), node("n2", 8, 0), node("n3", 8, 0), node("n4", 8, 0)}
	cases := []struct {
		name  string
		nodes []policy.Node
		jobs  []policy.Job
		want  map[string]policy.Allocation
	}{{
		name:  "each job starts on the next node",
		nodes: four,
		jobs: []policy.Job{queued("a", 1, 1, 1, 1), queued("b", 2, 1, 1, 1), queued("c", 3, 1, 1, 1),
			queued("d", 4, 1, 1, 1), queued("e", 5, 1, 1, 1)},
		want: map[string]A{"a": {"n1": 1}, "b": {"n2": 1}, "c": {"n3": 1}, "d": {"n4": 1}, "e": {"n1": 1}},
	}, {
		name:  "workers go one per node in turn",
		nodes: four,
		jobs:  []policy.Job{queued("a", 1, 6, 6, 1), queued("b", 2, 2, 2, 2)},
		want:  map[string]A{"a": {"n1": 2, "n2": 2, "n3": 1, "n4": 1}, "b": {"n2": 2}},
	}, {
		name:  "the cursor follows the latest started job",
		nodes: four,
		jobs: []policy.Job{running("x", 0, 1, 1, 1, A{"n3": 1}, 50), running("y", 1, 1, 1, 1, A{"n1": 1}, 40),
			queued("a", 2, 1, 1, 1)},
		want: map[string]A{"x": {"n3": 1}, "y": {"n1": 1}, "a": {"n4": 1}},
	}, {
		name:  "skips nodes without room for a worker",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 7), node("n3", 8, 0)},
		jobs:  []policy.Job{queued("a", 1, 2, 2, 2), queued("b", 2, 2, 2, 2)},
		want:  map[string]A{"a": {"n1": 2}, "b": {"n3": 2}},
	}, {
		name:  "head-of-line blocking",
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs:  []policy.Job{queued("a", 1, 6, 6, 2), queued("b", 2, 4, 4, 4), queued("c", 3, 2, 2, 2)},
		want:  map[string]A{"a": {"n1": 4, "n2": 2}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, builtin.NewRoundRobin(), s)
			must.Eq(t, tc.want, targets(s, p))
		})
	}
}
