package policy_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/shoenig/test/must"
)

func TestValidate(t *testing.T) {
	base := func() *policy.Snapshot {
		h := node("h1", 8, 0)
		h.GPUModel, h.Pool = "H100", "fast"
		h.Attributes = map[string]string{"rack": "r1"}
		return &policy.Snapshot{Now: at(100),
			Nodes: []policy.Node{node("n1", 8, 2), node("n2", 8, 0), h},
			Jobs: []policy.Job{
				running("a", 1, 2, 8, 2, A{"n1": 2}, 1),
				queued("b", 2, 4, 8, 2),
				queued("c", 3, 1, 1, 1),
			}}
	}
	type v struct {
		rule policy.Rule
		job  string
		node string
	}
	cases := []struct {
		name  string
		setup func(s *policy.Snapshot)
		plan  map[string]policy.Allocation
		want  []v
	}{{
		name: "valid plan",
		plan: map[string]A{"a": {"n1": 4}, "b": {"n2": 6}, "c": {"h1": 1}},
	}, {
		name: "absent job keeps its allocation",
		plan: map[string]A{"b": {"n2": 4}},
	}, {
		name: "unknown job",
		plan: map[string]A{"zz": {"n1": 2}},
		want: []v{{policy.RuleUnknownJob, "zz", ""}},
	}, {
		name: "unknown node",
		plan: map[string]A{"b": {"n9": 4}},
		want: []v{{policy.RuleUnknownNode, "b", "n9"}},
	}, {
		name: "total below min",
		plan: map[string]A{"b": {"n2": 2}},
		want: []v{{policy.RuleGangSize, "b", ""}},
	}, {
		name: "total above max",
		plan: map[string]A{"b": {"n2": 8, "n1": 2}},
		want: []v{{policy.RuleGangSize, "b", ""}},
	}, {
		name: "partial worker on a node",
		plan: map[string]A{"b": {"n2": 3, "n1": 3}},
		want: []v{{policy.RuleWholeWorkers, "b", "n1"}, {policy.RuleWholeWorkers, "b", "n2"}},
	}, {
		name: "negative count",
		plan: map[string]A{"b": {"n2": 6, "h1": -2}},
		want: []v{{policy.RuleWholeWorkers, "b", "h1"}},
	}, {
		name: "node over capacity counting reserved and running",
		plan: map[string]A{"b": {"n1": 4}, "c": {"n1": 1}},
		want: []v{{policy.RuleCapacity, "", "n1"}},
	}, {
		name:  "gpu model",
		setup: func(s *policy.Snapshot) { s.Jobs[1].Constraints.GPUModel = "H100" },
		plan:  map[string]A{"b": {"n2": 4}},
		want:  []v{{policy.RuleConstraint, "b", "n2"}},
	}, {
		name:  "gpu memory",
		setup: func(s *policy.Snapshot) { s.Jobs[1].Constraints.MinGPUMemoryMiB = 81920 },
		plan:  map[string]A{"b": {"n2": 4}},
		want:  []v{{policy.RuleConstraint, "b", "n2"}},
	}, {
		name:  "pool",
		setup: func(s *policy.Snapshot) { s.Jobs[1].Constraints.Pool = "fast" },
		plan:  map[string]A{"b": {"n2": 4}},
		want:  []v{{policy.RuleConstraint, "b", "n2"}},
	}, {
		name:  "node attribute",
		setup: func(s *policy.Snapshot) { s.Jobs[1].Constraints.NodeAttributes = map[string]string{"rack": "r2"} },
		plan:  map[string]A{"b": {"h1": 4}},
		want:  []v{{policy.RuleConstraint, "b", "h1"}},
	}, {
		name:  "max gpus per node",
		setup: func(s *policy.Snapshot) { s.Jobs[1].Constraints.MaxGPUsPerNode = 2 },
		plan:  map[string]A{"b": {"n2": 4}},
		want:  []v{{policy.RuleConstraint, "b", "n2"}},
	}, {
		name:  "held GPUs are not judged again",
		setup: func(s *policy.Snapshot) { s.Jobs[0].Constraints.Pool = "fast" },
		plan:  map[string]A{"a": {"n1": 2}},
	}, {
		name: "a new job on two GPU models",
		plan: map[string]A{"b": {"n2": 2, "h1": 2}},
		want: []v{{policy.RuleOneModel, "b", ""}},
	}, {
		name: "a running job grown onto another GPU model",
		plan: map[string]A{"a": {"n1": 2, "h1": 2}},
		want: []v{{policy.RuleOneModel, "a", ""}},
	}, {
		name:  "a running job on two models that keeps or sheds GPUs is not judged again",
		setup: func(s *policy.Snapshot) { s.Jobs[0].Allocation = A{"n1": 2, "h1": 4}; s.Jobs[0].GPUs.Max = 8 },
		plan:  map[string]A{"a": {"n1": 2, "h1": 2}},
	}, {
		name:  "a running job on two models may not gain GPUs",
		setup: func(s *policy.Snapshot) { s.Jobs[0].Allocation = A{"n1": 2, "h1": 2} },
		plan:  map[string]A{"a": {"n1": 4, "h1": 2}},
		want:  []v{{policy.RuleOneModel, "a", ""}},
	}, {
		name:  "anti-affinity by job ID",
		setup: func(s *policy.Snapshot) { s.Jobs[1].AntiAffinity.Jobs = []string{"a"} },
		plan:  map[string]A{"b": {"n1": 4}},
		want:  []v{{policy.RuleAntiAffinity, "b", "n1"}},
	}, {
		name: "anti-affinity is symmetric",
		setup: func(s *policy.Snapshot) {
			s.Jobs[0].AntiAffinity.Labels = map[string]string{"team": "x"}
			s.Jobs[1].Labels = map[string]string{"team": "x"}
		},
		plan: map[string]A{"b": {"n1": 4}},
		want: []v{{policy.RuleAntiAffinity, "b", "n1"}},
	}, {
		name:  "anti-affinity between two new jobs is reported once",
		setup: func(s *policy.Snapshot) { s.Jobs[1].AntiAffinity.Jobs = []string{"c"} },
		plan:  map[string]A{"b": {"n2": 4}, "c": {"n2": 1}},
		want:  []v{{policy.RuleAntiAffinity, "b", "n2"}},
	}, {
		name: "several violations are all reported",
		plan: map[string]A{"b": {"n2": 3}, "zz": nil, "c": {"n9": 1}},
		want: []v{{policy.RuleUnknownJob, "zz", ""}, {policy.RuleWholeWorkers, "b", "n2"},
			{policy.RuleGangSize, "b", ""}, {policy.RuleUnknownNode, "c", "n9"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := base()
			if tc.setup != nil {
				tc.setup(s)
			}
			err := policy.Validate(s, &policy.Plan{Policy: "test", Allocations: tc.plan})
			if len(tc.want) == 0 {
				must.NoError(t, err)
				return
			}
			must.Error(t, err)
			var got []v
			for _, x := range policy.Violations(err) {
				got = append(got, v{x.Rule, x.Job, x.Node})
			}
			must.Eq(t, tc.want, got)
			var first *policy.Violation
			must.True(t, errors.As(err, &first))
		})
	}
}

func TestValidate_Wrapped(t *testing.T) {
	s := &policy.Snapshot{Nodes: []policy.Node{node("n1", 8, 0)}, Jobs: []policy.Job{queued("a", 1, 2, 2, 2)}}
	err := fmt.Errorf("policy x: %w", policy.Validate(s, &policy.Plan{Allocations: map[string]A{"a": {"n1": 3}}}))
	must.SliceLen(t, 2, policy.Violations(err))
	must.ErrorContains(t, err, "job a on node n1: whole-workers")
	must.Error(t, policy.Validate(s, nil))
}

func TestPlan_Diff(t *testing.T) {
	s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)}, Jobs: []policy.Job{
		running("grow", 1, 2, 8, 2, A{"n1": 2}, 1),
		running("shrink", 2, 2, 8, 2, A{"n1": 4}, 1),
		running("move", 3, 2, 2, 2, A{"n1": 2}, 1),
		running("stop", 4, 2, 2, 2, A{"n2": 2}, 1),
		running("same", 5, 2, 2, 2, A{"n2": 2}, 1),
		queued("start", 6, 2, 2, 2),
		queued("wait", 7, 2, 2, 2),
	}}
	p := &policy.Plan{Allocations: map[string]A{
		"grow": {"n1": 2, "n2": 2}, "shrink": {"n1": 2}, "move": {"n2": 2, "n1": 0}, "stop": nil,
		"same": {"n2": 2}, "start": {"n2": 2},
	}}
	c := p.Diff(s)
	kinds := map[string]policy.ChangeKind{}
	var order []string
	for _, ch := range c.All() {
		kinds[ch.Job] = ch.Kind
		order = append(order, ch.Job)
	}
	must.Eq(t, map[string]policy.ChangeKind{"grow": policy.Grow, "shrink": policy.Shrink, "move": policy.Move,
		"stop": policy.Stop, "start": policy.Start}, kinds)
	must.Eq(t, []string{"stop", "shrink", "move", "grow", "start"}, order)
	must.Eq(t, map[string]int{"n1": -2, "n2": 2}, c.Moves[0].Delta())
	must.False(t, c.Empty())

	next := s.Apply(p, at(200))
	must.True(t, next.Apply(p, at(300)).Jobs[0].LastResized.Equal(at(200)), must.Sprint("no change, no resize"))
	must.True(t, p.Diff(next).Empty())
	for _, j := range next.Jobs {
		switch j.ID {
		case "stop", "wait":
			must.Eq(t, policy.Queued, j.State)
		default:
			must.Eq(t, policy.Running, j.State)
		}
	}
	must.Eq(t, at(200), next.Jobs[0].LastResized)
	must.Eq(t, at(1), next.Jobs[4].LastResized)
	must.Eq(t, A{"n1": 2}, s.Jobs[0].Allocation, must.Sprint("Apply must not modify its snapshot"))
}
