package builtin_test

import (
	"context"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

// attained is job j with a GPU-second count.
func attained(j policy.Job, gpuSeconds float64) policy.Job {
	j.AttainedGPUSeconds = gpuSeconds
	return j
}

func TestTiresias(t *testing.T) {
	const q1 = 100_000 // attained GPU-seconds past the default threshold
	four := []policy.Node{node("n1", 4, 0), node("n2", 4, 0)}
	cases := []struct {
		name   string
		config map[string]string
		nodes  []policy.Node
		jobs   []policy.Job
		want   map[string]policy.Allocation
	}{{
		name:  "less attained service preempts more",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs: []policy.Job{attained(running("a", 1, 4, 4, 1, A{"n1": 4}, 1), q1),
			queued("b", 2, 2, 2, 1), queued("c", 3, 2, 2, 1)},
		want: map[string]A{"b": {"n1": 2}, "c": {"n1": 2}},
	}, {
		name:  "the same queue goes in submission order, running jobs keep their GPUs",
		nodes: []policy.Node{node("n1", 4, 0)},
		jobs:  []policy.Job{attained(running("a", 1, 4, 4, 1, A{"n1": 4}, 1), 50), queued("b", 2, 2, 2, 1)},
		want:  map[string]A{"a": {"n1": 4}},
	}, {
		name:  "no head-of-line blocking",
		nodes: four,
		jobs:  []policy.Job{queued("a", 1, 10, 10, 1), queued("b", 2, 4, 4, 4), queued("c", 3, 4, 4, 2)},
		want:  map[string]A{"b": {"n1": 4}, "c": {"n2": 4}},
	}, {
		name:  "demoted jobs run behind new ones",
		nodes: four,
		jobs: []policy.Job{attained(queued("old", 1, 8, 8, 4), q1), queued("new", 2, 4, 4, 4),
			queued("newer", 3, 8, 8, 4)},
		want: map[string]A{"new": {"n1": 4}},
	}, {
		name:  "a preempted job keeps GPUs nobody can use",
		nodes: four,
		jobs: []policy.Job{running("z", 1, 4, 4, 2, A{"n1": 2, "n2": 2}, 1),
			attained(running("x", 2, 2, 2, 2, A{"n1": 2}, 1), q1), queued("y", 3, 4, 4, 4)},
		want: map[string]A{"z": {"n1": 2, "n2": 2}, "x": {"n1": 2}},
	}, {
		name:   "more queues",
		config: map[string]string{"queue_thresholds": "10, 1000"},
		nodes:  []policy.Node{node("n1", 2, 0)},
		jobs: []policy.Job{attained(running("a", 1, 1, 1, 1, A{"n1": 1}, 1), 5000),
			attained(running("b", 2, 1, 1, 1, A{"n1": 1}, 1), 100), attained(queued("c", 3, 1, 1, 1), 20)},
		want: map[string]A{"b": {"n1": 1}, "c": {"n1": 1}},
	}, {
		name:   "one queue is first come, first served with backfilling",
		config: map[string]string{"queue_thresholds": ""},
		nodes:  []policy.Node{node("n1", 2, 0)},
		jobs: []policy.Job{attained(running("a", 1, 1, 1, 1, A{"n1": 1}, 1), q1),
			queued("b", 2, 2, 2, 1), queued("c", 3, 1, 1, 1)},
		want: map[string]A{"a": {"n1": 1}, "c": {"n1": 1}},
	}, {
		name:   "worst fit, as the Pollux port: the emptiest node first, which may split a later job",
		config: map[string]string{"placement": "most-free"},
		nodes:  []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs:   []policy.Job{running("a", 1, 2, 2, 1, A{"n1": 2}, 1), queued("b", 2, 2, 2, 1), queued("c", 3, 4, 4, 1)},
		want:   map[string]A{"a": {"n1": 2}, "b": {"n2": 2}, "c": {"n1": 2, "n2": 2}},
	}, {
		name:  "packed best fit, the default",
		nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		jobs:  []policy.Job{running("a", 1, 2, 2, 1, A{"n1": 2}, 1), queued("b", 2, 2, 2, 1), queued("c", 3, 4, 4, 1)},
		want:  map[string]A{"a": {"n1": 2}, "b": {"n1": 2}, "c": {"n2": 4}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.TiresiasName, tc.config), s)
			must.Eq(t, tc.want, targets(s, p))
			explained(t, s, p)
		})
	}
}

func TestTiresias_Config(t *testing.T) {
	// A new policy, never configured, places packed, the default.
	s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 4, 0), node("n2", 4, 0)},
		Jobs: []policy.Job{running("a", 1, 2, 2, 1, A{"n1": 2}, 1), queued("b", 2, 2, 2, 1)}}
	fresh, err := builtin.NewTiresias().Plan(context.Background(), s)
	must.NoError(t, err)
	must.Eq(t, map[string]A{"a": {"n1": 2}, "b": {"n1": 2}}, targets(s, fresh))

	p := builtin.NewTiresias()
	for _, bad := range []string{"x", "-1", "100,50", "5,5", "NaN", "0,Inf", "0", "1e400"} {
		must.ErrorContains(t, p.SetConfig(map[string]string{"queue_thresholds": bad}), "queue_thresholds")
	}
	must.ErrorContains(t, p.SetConfig(map[string]string{"nope": "1"}), "unknown config key")
	must.ErrorContains(t, p.SetConfig(map[string]string{"placement": "best"}), "not most-free or packed")
	must.NoError(t, p.SetConfig(map[string]string{"placement": "packed"}))
	must.NoError(t, p.SetConfig(map[string]string{"queue_thresholds": "3600,57600"}))
}

// checkPreemptive checks the promises of the preemptive builtins: a
// well-formed running job is never moved; Tiresias keeps it whole or stops
// it and starts jobs with Min; goodput only grows it on top of what it
// holds or shrinks it within.
func checkPreemptive(t *testing.T, name string, s *policy.Snapshot, p *policy.Plan, why must.Setting) {
	t.Helper()
	if name != builtin.TiresiasName && name != builtin.GoodputName && name != builtin.GoodputJCTName {
		return
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		from, to := j.Allocation, p.Target(j)
		switch {
		case from.Total() == 0 && to.Total() > 0 && name == builtin.TiresiasName:
			must.Eq(t, j.GPUs.Min, to.Total(), why, must.Sprintf("job %s started above Min", j.ID))
		case from.Total() == 0, to.Total() == 0, !wellFormed(j):
		case name == builtin.TiresiasName:
			must.Eq(t, from.Clone(), to.Clone(), why, must.Sprintf("job %s was resized", j.ID))
		case name == builtin.GoodputJCTName:
			// A job it resizes may be placed again (packed); one it does
			// not resize stays where it is.
			if to.Total() == from.Total() {
				must.Eq(t, from.Clone(), to.Clone(), why, must.Sprintf("job %s was moved", j.ID))
			}
		default:
			grew := to.Total() >= from.Total()
			for n, g := range from {
				if grew {
					must.GreaterEq(t, g, to[n], why, must.Sprintf("job %s lost GPUs on %s while growing", j.ID, n))
				} else {
					must.LessEq(t, g, to[n], why, must.Sprintf("job %s gained GPUs on %s while shrinking", j.ID, n))
				}
			}
		}
	}
}

// BenchmarkTiresias is one round on the Pollux simulator's cluster (16 x 4
// GPUs, 160 jobs, half running) and on 125 x 8 GPUs with 2,000 jobs.
func BenchmarkTiresias(b *testing.B) {
	benchPreemptive(b, builtin.NewTiresias())
}

func benchPreemptive(b *testing.B, p policy.Policy) {
	for _, size := range []struct {
		name        string
		nodes, jobs int
	}{{"64gpus", 8, 160}, {"1000gpus", 125, 2000}} {
		b.Run(size.name, func(b *testing.B) {
			s := busySnapshot(b, size.nodes, size.jobs)
			ctx := context.Background()
			b.ReportAllocs()
			var plan *policy.Plan
			for b.Loop() {
				var err error
				if plan, err = p.Plan(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			must.NoError(b, policy.Validate(s, plan))
			c := plan.Diff(s)
			b.ReportMetric(float64(len(c.Starts)), "starts")
			b.ReportMetric(float64(len(c.Stops)), "stops")
			b.ReportMetric(float64(len(c.Grows)+len(c.Shrinks)), "resizes")
		})
	}
}

// busySnapshot is benchSnapshot's jobs on nodes x 8 GPUs with speedup
// tables (sublinear, per job) and attained service, the first half running
// (placed by elastic-fifo), the rest queued.
func busySnapshot(b *testing.B, nodes, jobs int) *policy.Snapshot {
	s := benchSnapshot(nodes, jobs)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		j.AttainedGPUSeconds = float64((i * 7919) % 100_000)
		j.Speedup = make([]float64, j.GPUs.Max)
		for g := range j.Speedup {
			// Amdahl-like: a serial fraction between 1% and 30%.
			f := 0.01 + float64(i%30)/100
			j.Speedup[g] = 1 / (f + (1-f)/float64(g+1))
		}
	}
	first := &policy.Snapshot{Now: s.Now, Nodes: s.Nodes, Jobs: s.Jobs[:jobs/2]}
	p, err := builtin.NewElasticFIFO().Plan(context.Background(), first)
	must.NoError(b, err)
	out := first.Apply(p, s.Now)
	out.Jobs = append(out.Jobs, s.Jobs[jobs/2:]...)
	return out
}
