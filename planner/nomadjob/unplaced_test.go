package nomadjob

import (
	"strings"
	"testing"
	"unicode/utf8"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
)

// Unplaced says which groups Nomad has not placed and why, naming a node
// by its name as node list and the dashboard do (issue 28: its Nomad ID
// before), or by its short ID where the name is not known.
func TestUnplaced_SaysWhichAndWhy(t *testing.T) {
	node := "83199c1b-e4a5-e28d-d01b-09ac94650f23"
	wg := WorkerGroup(node)
	cpu := &nomadapi.AllocationMetric{NodesEvaluated: 1, NodesExhausted: 1, DimensionExhausted: map[string]int{"cpu": 1}}
	pool := &nomadapi.AllocationMetric{NodesEvaluated: 3, NodesExhausted: 1,
		ConstraintFiltered: map[string]int{"${node.unique.id} = 83199c1b": 2}}
	bare := &nomadapi.AllocationMetric{NodesEvaluated: 3, NodesExhausted: 3}

	for _, tc := range []struct {
		name       string
		failed     map[string]*nomadapi.AllocationMetric
		want, have map[string]int
		names      map[string]string
		msg        string
	}{
		{"worker short of cpu", map[string]*nomadapi.AllocationMetric{wg: cpu},
			map[string]int{LauncherGroup: 1, wg: 2}, map[string]int{LauncherGroup: 1, wg: 1}, map[string]string{node: "gpu-1"},
			"Nomad has not placed 1 of 2 workers on node gpu-1: cpu exhausted on 1 node; they wait for room there"},
		{"launcher and workers", map[string]*nomadapi.AllocationMetric{wg: pool, LauncherGroup: bare},
			map[string]int{LauncherGroup: 1, wg: 4}, map[string]int{}, map[string]string{node: "gpu-1"},
			"Nomad has not placed the launcher: 3 of 3 nodes evaluated exhausted; " +
				"4 of 4 workers on node gpu-1: constraint ${node.unique.id} = 83199c1b filtered 2 nodes; they wait for room there"},
		{"a node whose name is not known", map[string]*nomadapi.AllocationMetric{wg: cpu},
			map[string]int{LauncherGroup: 1, wg: 2}, map[string]int{LauncherGroup: 1, wg: 1}, nil,
			"Nomad has not placed 1 of 2 workers on node 83199c1b: cpu exhausted on 1 node; they wait for room there"},
		// An old evaluation's failure for a group that runs in full now.
		{"placed since", map[string]*nomadapi.AllocationMetric{wg: cpu},
			map[string]int{LauncherGroup: 1, wg: 2}, map[string]int{LauncherGroup: 1, wg: 2}, nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			must.Eq(t, tc.msg, Unplaced(tc.failed, tc.want, tc.have, tc.names))
		})
	}

	// Nomad's words are bounded in the job's events.
	for _, c := range []string{strings.Repeat("x", 2000), strings.Repeat("é", 1000)} {
		long := &nomadapi.AllocationMetric{ConstraintFiltered: map[string]int{c: 1}}
		msg := Unplaced(map[string]*nomadapi.AllocationMetric{wg: long}, map[string]int{wg: 1}, nil, nil)
		must.LessEq(t, maxUnplaced, len(msg))
		must.Greater(t, maxUnplaced-5, len(msg))
		must.StrHasSuffix(t, "...", msg)
		must.True(t, utf8.ValidString(msg))
	}
}
