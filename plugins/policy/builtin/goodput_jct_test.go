package builtin_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

// TestGoodputJCT: each case also says what goodput plans on the same
// snapshot, to show which of goodput-jct's changes decides it.
func TestGoodputJCT(t *testing.T) {
	concave := []float64{1, 1.9, 2.7, 3.4}
	// longJob: one that has run 280 GPU-hours beside a newcomer whose
	// third and fourth GPUs add little.
	longJob := func() []policy.Job {
		return []policy.Job{sped(attained(queued("old", 1, 1, 4, 1), 1e6), concave...),
			sped(queued("new", 2, 1, 4, 1), 1, 1.9, 2.1, 2.2)}
	}
	// starved: at T0+10000, "old" (5 GPU-hours, weight 0.8, one GPU is all
	// it can use; rigid if asked) has waited at 0 GPUs for the given
	// seconds, beside two running jobs of one GPU each, at their size for
	// 9,000 s, r2 having run an hour (weight 0.95).
	starved := func(waited int, rigid bool) []policy.Job {
		old := sped(attained(queued("old", 0, 1, 2, 1), 18000), 1, 1)
		if rigid {
			old = attained(queued("old", 0, 1, 1, 1), 18000)
		}
		old.LastResized = at(10000 - waited)
		return []policy.Job{old, running("r1", 900, 1, 1, 1, A{"n1": 1}, 1000),
			attained(running("r2", 950, 1, 1, 1, A{"n1": 1}, 1000), 3600)}
	}
	cases := []struct {
		name        string
		config      map[string]string
		now         int // seconds after T0
		nodes       []policy.Node
		jobs        []policy.Job
		want        map[string]policy.Allocation
		wantGoodput map[string]policy.Allocation
	}{{
		name:  "least attained service first: a new job gets the GPUs of one that has run 100 GPU-hours",
		now:   100,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(attained(queued("old", 1, 1, 4, 1), 360000), concave...),
			sped(queued("new", 2, 1, 4, 1), concave...)},
		want:        map[string]A{"new": {"n1": 4}},
		wantGoodput: map[string]A{"old": {"n1": 2}, "new": {"n1": 2}},
	}, {
		name:        "a job that has run 280 GPU-hours is not starved: at the floor its GPUs still beat a newcomer's poor ones",
		now:         100,
		nodes:       []policy.Node{node("n1", 4, 0)},
		jobs:        longJob(),
		want:        map[string]A{"old": {"n1": 2}, "new": {"n1": 2}},
		wantGoodput: map[string]A{"old": {"n1": 2}, "new": {"n1": 2}},
	}, {
		name:  "rigid jobs get no floor: of two that ran past it, the one that ran less takes the GPUs (Tiresias's order)",
		now:   4000,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{attained(running("longer", 1, 4, 4, 1, A{"n1": 4}, 0), 1e6),
			attained(queued("long", 2, 4, 4, 1), 3e5)},
		want:        map[string]A{"long": {"n1": 4}},
		wantGoodput: map[string]A{"longer": {"n1": 4}},
	}, {
		name:        "attained_floor 0: the same job weighs a fifteenth of the newcomer and gets nothing",
		config:      map[string]string{"attained_floor": "0"},
		now:         100,
		nodes:       []policy.Node{node("n1", 4, 0)},
		jobs:        longJob(),
		want:        map[string]A{"new": {"n1": 4}},
		wantGoodput: map[string]A{"old": {"n1": 2}, "new": {"n1": 2}},
	}, {
		name:  "a job resized 30 s ago is not shrunk for a newcomer: the restart would cost it too much",
		now:   130,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 100), concave...),
			sped(queued("b", 2, 1, 4, 1), concave...)},
		want:        map[string]A{"a": {"n1": 4}},
		wantGoodput: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:  "a job at its size for an hour is shrunk for a newcomer",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 100), concave...),
			sped(queued("b", 3640, 1, 4, 1), concave...)},
		want:        map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
		wantGoodput: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:        "aging: an elastic job stopped two hours ago after five GPU-hours takes the GPU of a running job that has run an hour",
		now:         10000,
		nodes:       []policy.Node{node("n1", 2, 0)},
		jobs:        starved(7200, false),
		want:        map[string]A{"old": {"n1": 1}, "r1": {"n1": 1}},
		wantGoodput: map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
	}, {
		name:        "aging 0: the same job waits",
		config:      map[string]string{"aging": "0"},
		now:         10000,
		nodes:       []policy.Node{node("n1", 2, 0)},
		jobs:        starved(7200, false),
		want:        map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
		wantGoodput: map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
	}, {
		name:        "aging: stopped a minute ago, it waits",
		now:         10000,
		nodes:       []policy.Node{node("n1", 2, 0)},
		jobs:        starved(60, false),
		want:        map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
		wantGoodput: map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
	}, {
		name:        "aging: a rigid job does not age",
		now:         10000,
		nodes:       []policy.Node{node("n1", 2, 0)},
		jobs:        starved(7200, true),
		want:        map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
		wantGoodput: map[string]A{"r1": {"n1": 1}, "r2": {"n1": 1}},
	}, {
		name:  "a job at its size for an hour whose restarts were measured at 20 minutes is not shrunk for a newcomer",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{restarts(sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 100), concave...), 1200),
			sped(queued("b", 3640, 1, 4, 1), concave...)},
		want:        map[string]A{"a": {"n1": 4}},
		wantGoodput: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:  "the job resized 30 s ago, its restarts measured at 1 s, is shrunk for the newcomer",
		now:   130,
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{restarts(sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 100), concave...), 1),
			sped(queued("b", 2, 1, 4, 1), concave...)},
		want:        map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
		wantGoodput: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:        "GPUs left free go to a job's best step that fits where its best does not, if the gain pays the restart",
		now:         3700,
		nodes:       []policy.Node{node("n1", 8, 0)},
		jobs:        leftTwo(),
		want:        map[string]A{"a": {"n1": 5}, "b": {"n1": 3}},
		wantGoodput: map[string]A{"a": {"n1": 3}, "b": {"n1": 3}},
	}, {
		name:   "restart_cost 0 turns the price off",
		config: map[string]string{"restart_cost": "0s"},
		now:    130,
		nodes:  []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 100), concave...),
			sped(queued("b", 2, 1, 4, 1), concave...)},
		want:        map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
		wantGoodput: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:        "a job it grows is packed onto one node instead of staying on two",
		now:         3700,
		nodes:       []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs:        []policy.Job{running("a", 1, 1, 4, 1, A{"n1": 1, "n2": 1}, 100)},
		want:        map[string]A{"a": {"n1": 4}},
		wantGoodput: map[string]A{"a": {"n1": 3, "n2": 1}},
	}, {
		// Grown in place, a holds n1:3 n3:1 and c starts on n2:3 n3:2. Placed
		// again together, largest first, c takes n1 and one more node and a
		// is spread over two: four nodes either way, so both stay; alone, a
		// packs onto n1.
		name:  "a job it grows is packed alone where the jobs it resizes do not pack together",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0), node("n3", 4, 0)},
		jobs: []policy.Job{running("a", 1, 2, 4, 1, A{"n1": 1, "n3": 1}, 100),
			running("b", 2, 2, 2, 1, A{"n2": 1, "n3": 1}, 100),
			queued("c", 3, 2, 5, 1)},
		want:        map[string]A{"a": {"n1": 4}, "b": {"n2": 1, "n3": 1}, "c": {"n2": 3, "n3": 2}},
		wantGoodput: map[string]A{"a": {"n1": 3, "n3": 1}, "b": {"n2": 1, "n3": 1}, "c": {"n2": 3, "n3": 2}},
	}, {
		// One GPU is free on n2 and on n3, none on n1: goodput grows a
		// over three nodes.
		name:  "a job grows to a count that fits on one node only on one node",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0), node("n3", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 1}, 100), concave...),
			running("x", 2, 3, 3, 1, A{"n1": 3}, 100), running("y", 3, 3, 3, 1, A{"n2": 3}, 100),
			running("z", 4, 3, 3, 1, A{"n3": 3}, 100)},
		want: map[string]A{"a": {"n1": 1}, "x": {"n1": 3}, "y": {"n2": 3}, "z": {"n3": 3}},
		wantGoodput: map[string]A{"a": {"n1": 1, "n2": 1, "n3": 1}, "x": {"n1": 3}, "y": {"n2": 3},
			"z": {"n3": 3}},
	}, {
		// The counts give a a second GPU, b's (b is at the floor), but a
		// could only take it on n2, beside its own on n1.
		name:  "a job shrunk for a grow that does not fit on one node keeps its GPUs",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 1}, 100), concave...),
			running("x", 2, 3, 3, 1, A{"n1": 3}, 100),
			sped(attained(running("b", 3, 1, 4, 1, A{"n2": 1}, 100), 1e6), concave...),
			running("y", 4, 3, 3, 1, A{"n2": 3}, 100)},
		want:        map[string]A{"a": {"n1": 1}, "x": {"n1": 3}, "b": {"n2": 1}, "y": {"n2": 3}},
		wantGoodput: map[string]A{"a": {"n1": 1}, "x": {"n1": 3}, "b": {"n2": 1}, "y": {"n2": 3}},
	}, {
		name:  "a job it does not resize is not moved",
		now:   3700,
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs: []policy.Job{running("a", 1, 2, 2, 1, A{"n1": 1, "n2": 1}, 100),
			running("b", 2, 6, 6, 1, A{"n1": 3, "n2": 3}, 100)},
		want:        map[string]A{"a": {"n1": 1, "n2": 1}, "b": {"n1": 3, "n2": 3}},
		wantGoodput: map[string]A{"a": {"n1": 1, "n2": 1}, "b": {"n1": 3, "n2": 3}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(tc.now), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.GoodputJCTName, tc.config), s)
			must.Eq(t, tc.want, targets(s, p))
			explained(t, s, p)
			must.Eq(t, tc.wantGoodput, targets(s, plan(t, builtin.NewGoodput(), s)), must.Sprint("goodput"))
		})
	}
}

func TestGoodputJCT_Config(t *testing.T) {
	p := builtin.NewGoodputJCT()
	for key, bad := range map[string][]string{
		"stickiness":     {"x", "-1", "+Inf", "NaN"},
		"attained_scale": {"x", "0", "-1", "+Inf", "NaN"},
		"attained_floor": {"x", "-0.1", "1.5", "NaN"},
		"restart_cost":   {"x", "-1s", "30", "24h1s"},
		"aging":          {"x", "-1s", "30", "721h"},
	} {
		for _, v := range bad {
			must.ErrorContains(t, p.SetConfig(map[string]string{key: v}), key)
		}
	}
	must.ErrorContains(t, p.SetConfig(map[string]string{"resize_cooldown": "1m"}), "unknown config key")
	must.NoError(t, p.SetConfig(map[string]string{"stickiness": "0.2", "attained_scale": "7200", "attained_floor": "0.5", "restart_cost": "5s", "aging": "2h"}))
}

// BenchmarkGoodputJCT: as BenchmarkGoodput.
func BenchmarkGoodputJCT(b *testing.B) {
	benchPreemptive(b, builtin.NewGoodputJCT())
}

// restarts sets j's measured restart (policy.Job.RestartSeconds).
func restarts(j policy.Job, secs float64) policy.Job {
	j.RestartSeconds = secs
	return j
}
