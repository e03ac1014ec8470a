package builtin_test

import (
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

// sped is job j with a speedup table.
func sped(j policy.Job, tab ...float64) policy.Job {
	j.Speedup = tab
	return j
}

func TestGoodput(t *testing.T) {
	cases := []struct {
		name   string
		config map[string]string
		nodes  []policy.Node
		jobs   []policy.Job
		want   map[string]policy.Allocation
	}{{
		name:  "unknown speedup is linear: every job gets a GPU before any gets two",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  []policy.Job{queued("a", 1, 1, 4, 1), queued("b", 2, 1, 4, 1), queued("c", 3, 1, 4, 1)},
		want:  map[string]A{"a": {"n1": 2}, "b": {"n1": 1}, "c": {"n1": 1}},
	}, {
		name:  "GPUs move to where they add more goodput",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  givesUp(0),
		want:  map[string]A{"a": {"n1": 1}, "b": {"n1": 3}},
	}, {
		name:   "restart_penalty (Pollux's): a job that has changed three times in its 99 s keeps its GPUs",
		config: map[string]string{"restart_penalty": "30s"},
		nodes:  []policy.Node{node("n1", 4, 0)},
		jobs:   givesUp(3),
		want:   map[string]A{"a": {"n1": 4}},
	}, {
		name:   "restart_penalty: one that has not changed yet gives its GPUs up as without it",
		config: map[string]string{"restart_penalty": "30s"},
		nodes:  []policy.Node{node("n1", 4, 0)},
		jobs:   givesUp(0),
		want:   map[string]A{"a": {"n1": 1}, "b": {"n1": 3}},
	}, {
		name:  "no restart_penalty by default: three changes or none, the GPUs move",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  givesUp(3),
		want:  map[string]A{"a": {"n1": 1}, "b": {"n1": 3}},
	}, {
		name:  "stickiness keeps near ties in place",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 3}, 1), 1, 1.9, 2.75, 3.5),
			sped(running("b", 2, 1, 4, 1, A{"n1": 1}, 1), 1, 1.92, 2.8, 3.6)},
		want: map[string]A{"a": {"n1": 3}, "b": {"n1": 1}},
	}, {
		name:   "without stickiness the better marginal wins",
		config: map[string]string{"stickiness": "0"},
		nodes:  []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{sped(running("a", 1, 1, 4, 1, A{"n1": 3}, 1), 1, 1.9, 2.75, 3.5),
			sped(running("b", 2, 1, 4, 1, A{"n1": 1}, 1), 1, 1.92, 2.8, 3.6)},
		want: map[string]A{"a": {"n1": 2}, "b": {"n1": 2}},
	}, {
		name:  "rigid jobs of unknown speedup are not preempted",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  []policy.Job{running("a", 1, 4, 4, 1, A{"n1": 4}, 1), queued("b", 2, 1, 1, 1)},
		want:  map[string]A{"a": {"n1": 4}},
	}, {
		name:  "a flat speedup stops growth",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  []policy.Job{sped(queued("a", 1, 1, 8, 1), 1, 1.5, 1.5)},
		want:  map[string]A{"a": {"n1": 2}},
	}, {
		name:  "an unusable table is linear",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  []policy.Job{sped(queued("a", 1, 1, 4, 1), 1, -1)},
		want:  map[string]A{"a": {"n1": 4}},
	}, {
		name:  "whole workers: the largest count that fits",
		nodes: []policy.Node{node("n1", 4, 1), node("n2", 4, 2)},
		jobs:  []policy.Job{queued("a", 1, 2, 8, 2)},
		want:  map[string]A{"a": {"n1": 2, "n2": 2}},
	}, {
		// The step from 4 to 5 GPUs crosses to a second node and gains
		// nothing; 8 GPUs gain the most per GPU from 4 (Pollux's tables
		// have such dips where the sync goes over the network).
		name:  "a dip where the job crosses nodes does not stop its growth",
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs:  []policy.Job{sped(queued("a", 1, 1, 8, 1), 1, 1.9, 2.7, 3.4, 3.0, 3.6, 4.3, 5.0)},
		want:  map[string]A{"a": {"n1": 4, "n2": 4}},
	}, {
		name:  "the best count from a dip: 6 GPUs add more per GPU than 8",
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs: []policy.Job{sped(queued("a", 1, 1, 8, 1), 1, 1.9, 2.7, 3.4, 3.0, 4.6, 4.7, 4.8),
			sped(queued("b", 2, 1, 8, 1), 1, 1.2, 1.3, 1.4, 1.5, 1.6, 1.7, 1.8)},
		want: map[string]A{"a": {"n1": 4, "n2": 2}, "b": {"n2": 2}},
	}, {
		// From 3 GPUs a's best step per GPU is to 6, which the 2 GPUs
		// left do not fit (goodput-jct, which prices the restart, takes
		// the step to 5: TestGoodputJCT).
		name:  "GPUs left free: a job whose best step does not fit is skipped",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  leftTwo(),
		want:  map[string]A{"a": {"n1": 3}, "b": {"n1": 3}},
	}, {
		name:  "no head-of-line blocking",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  []policy.Job{queued("a", 1, 8, 8, 4), queued("b", 2, 2, 2, 2)},
		want:  map[string]A{"b": {"n1": 2}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.GoodputName, tc.config), s)
			must.Eq(t, tc.want, targets(s, p))
			explained(t, s, p)
		})
	}
}

func TestGoodput_Config(t *testing.T) {
	p := builtin.NewGoodput()
	for _, bad := range []string{"x", "-1", "+Inf", "NaN"} {
		must.ErrorContains(t, p.SetConfig(map[string]string{"stickiness": bad}), "stickiness")
	}
	must.NoError(t, p.SetConfig(map[string]string{"stickiness": "0.25"}))
	for _, bad := range []string{"x", "-1s", "30", "24h1s"} {
		must.ErrorContains(t, p.SetConfig(map[string]string{"restart_penalty": bad}), "restart_penalty")
	}
	must.NoError(t, p.SetConfig(map[string]string{"restart_penalty": "30s"}))
}

// restarted is job j after n changes of its GPUs (Job.Restarts).
func restarted(j policy.Job, n int) policy.Job {
	j.Restarts = n
	return j
}

// BenchmarkGoodput: as BenchmarkTiresias. The goal is a round in
// milliseconds for 64-1,000 GPUs.
func BenchmarkGoodput(b *testing.B) {
	benchPreemptive(b, builtin.NewGoodput())
}

// leftTwo: job a at 3 GPUs of 8, whose best step per GPU is to 6 (0.77 a
// GPU: its table jumps there) and whose step to 5 gains 0.35 a GPU, beside
// a rigid job b at 3: 2 GPUs are left.
func leftTwo() []policy.Job {
	return []policy.Job{sped(running("a", 1, 1, 8, 1, A{"n1": 3}, 1), 1, 1.9, 2.7, 3.0, 3.4, 5.0, 5.1, 5.2),
		running("b", 2, 3, 3, 1, A{"n1": 3}, 1)}
}

// givesUp: job a at 4 GPUs that add little beyond the first (running
// since second 1, after restarts changes of its GPUs) beside a queued b
// that gains more from 3: without a restart price, a shrinks to 1.
func givesUp(restarts int) []policy.Job {
	return []policy.Job{restarted(sped(running("a", 1, 1, 4, 1, A{"n1": 4}, 1), 1, 1.5, 1.8, 2.0), restarts),
		sped(queued("b", 2, 1, 4, 1), 1, 1.9, 2.7, 3.4)}
}
