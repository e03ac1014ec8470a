package builtin_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

// withTarget gives j a deadline deadline seconds after t0 and an estimate
// of work seconds left on one GPU (0: unknown).
func withTarget(j policy.Job, deadline int, work float64) policy.Job {
	j.Progress.Deadline = at(deadline)
	j.Progress.RemainingWork = work
	return j
}

// admitted sets job j's deadline admission (policy.Progress.Admission).
func admitted(j policy.Job, a string) policy.Job {
	j.Progress.Admission = a
	return j
}

func TestEDF(t *testing.T) {
	cases := []struct {
		name  string
		nodes []policy.Node
		jobs  []policy.Job
		want  map[string]A
	}{{
		name:  "admits earliest deadline first, jobs without one last",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{queued("none", 1, 4, 4, 1), withTarget(queued("late", 2, 4, 4, 1), 900, 0),
			withTarget(queued("early", 3, 4, 4, 1), 300, 0)},
		want: map[string]A{"early": {"n1": 4}, "late": {"n1": 4}},
	}, {
		name:  "shrinks the latest deadline first to admit, then grows the earliest",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("late", 1, 2, 8, 2, A{"n1": 4}, 10), 900, 0),
			withTarget(running("mid", 2, 2, 8, 2, A{"n1": 4}, 20), 600, 0),
			withTarget(queued("early", 3, 4, 8, 2), 300, 0)},
		want: map[string]A{"early": {"n1": 4}, "mid": {"n1": 2}, "late": {"n1": 2}},
	}, {
		name:  "head-of-line blocking in deadline order",
		nodes: []policy.Node{node("n1", 8, 2)},
		jobs: []policy.Job{withTarget(queued("small", 1, 2, 2, 1), 900, 0),
			withTarget(queued("big", 2, 8, 8, 1), 300, 0)},
		want: map[string]A{},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			got := targets(s, plan(t, builtin.NewEDF(), s))
			must.Eq(t, tc.want, got)
		})
	}
}

func TestQoE(t *testing.T) {
	sub := func(g int, s float64) []float64 { // speedup g / (1 + s(g-1))
		var out []float64
		for i := 1; i <= g; i++ {
			out = append(out, float64(i)/(1+s*float64(i-1)))
		}
		return out
	}
	cases := []struct {
		name  string
		nodes []policy.Node
		jobs  []policy.Job
		want  map[string]A
		// reasons: a substring that job's reasons must contain.
		reasons map[string]string
	}{{
		// Now is 100. ahead: 600 s of one-GPU work, 900 s to its
		// deadline: 1 GPU is enough (600 <= 0.9 x 900). behind: 2400 s of
		// work, 400 s left: needs 2400 / g <= 360, so g = 7 -> 8 in whole
		// workers of 2.
		name:  "moves GPUs from a job ahead of its target to one behind it",
		nodes: []policy.Node{node("n1", 8, 0), node("n2", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("ahead", 1, 2, 12, 2, A{"n1": 8, "n2": 4}, 10), 1000, 600),
			withTarget(running("behind", 2, 2, 8, 2, A{"n2": 4}, 10), 500, 2400)},
		want: map[string]A{"ahead": {"n1": 8}, "behind": {"n2": 8}},
		reasons: map[string]string{
			"behind": "grown from 4 to 8 GPUs: behind its target at 4",
			"ahead":  "shrunk from 12 to 8 GPUs for job behind, which is behind its target; this job: on track"},
	}, {
		name:  "of two jobs on track alone that cannot both be, the first keeps its share",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			// needs 2400 / g <= 0.9 x 400: g = 7 -> 8 of 8.
			withTarget(running("a", 1, 2, 8, 2, A{"n1": 6}, 10), 500, 2400),
			// needs 1300 / g <= 0.9 x 400: g = 4.
			withTarget(running("b", 2, 2, 8, 2, A{"n1": 2}, 10), 500, 1300)},
		// Beside a's share (the whole cluster until its deadline) b cannot
		// make it: it is behind, and stopped for a (before minimum shares,
		// both kept what they held, and both missed).
		want: map[string]A{"a": {"n1": 8}},
		reasons: map[string]string{
			"b": "preempted (2 GPUs) for job a, which is behind its target; this job: behind"},
	}, {
		name:  "shares go in deadline order, whatever the planner's admission",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			// due first and not admitted at submission: its share first
			// (1300 / g <= 0.9 x 300: 6 GPUs), and a cannot make it beside
			// it: behind, shrunk to its minimum.
			admitted(withTarget(queued("late", 1, 2, 8, 2), 400, 1300), policy.AdmissionUnadmitted),
			admitted(withTarget(running("a", 2, 2, 8, 2, A{"n1": 6}, 10), 500, 2400), policy.AdmissionAdmitted)},
		want: map[string]A{"a": {"n1": 2}, "late": {"n1": 6}},
		reasons: map[string]string{
			"a":    "shrunk from 6 to 2 GPUs for job late",
			"late": "started with 6 GPUs on 1 node (what its target needs): on track"},
	}, {
		name:  "among jobs due at the same time the one the planner admitted keeps its share",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			// due with a, not admitted: after a's share (2400 / g <= 0.9 x
			// 400: 8 GPUs, until 300 s from now) it cannot make it: behind.
			// (In the other order, late needs 4 and a is behind.)
			admitted(withTarget(queued("late", 1, 2, 8, 2), 500, 1300), policy.AdmissionUnadmitted),
			admitted(withTarget(running("a", 2, 2, 8, 2, A{"n1": 6}, 10), 500, 2400), policy.AdmissionAdmitted)},
		want: map[string]A{"a": {"n1": 8}},
		reasons: map[string]string{
			"a":    "grown from 6 to 8 GPUs: behind its target at 6",
			"late": "queued"},
	}, {
		name:  "two admitted jobs each at their least satisfying share, a third in what they leave",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			// 3200 / g <= 0.9 x 900 s: 4 GPUs each, linear.
			admitted(withTarget(queued("a", 1, 1, 8, 1), 1000, 3200), policy.AdmissionAdmitted),
			admitted(withTarget(queued("b", 2, 1, 8, 1), 1000, 3200), policy.AdmissionAdmitted),
			admitted(withTarget(queued("c", 3, 1, 8, 1), 2000, 100), policy.AdmissionUnadmitted)},
		want: map[string]A{"a": {"n1": 4}, "b": {"n1": 4}},
		reasons: map[string]string{
			"a": "started with 4 GPUs on 1 node (what its target needs): on track",
			"c": "queued"},
	}, {
		name:  "a job that misses its deadline even at max takes nothing an on-track job needs",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			// needs 4500 / g <= 810: g = 6.
			withTarget(running("ontrack", 1, 2, 8, 2, A{"n1": 6}, 10), 1000, 4500),
			withTarget(queued("hopeless", 2, 4, 4, 2), 200, 10000)},
		want: map[string]A{"ontrack": {"n1": 8}}, // and grows into the 2 idle GPUs
		reasons: map[string]string{
			"hopeless": "queued: its minimum does not fit"},
	}, {
		name:  "a job that misses its deadline anyway is stopped for one on track",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("hopeless", 1, 8, 8, 4, A{"n1": 8}, 10), 200, 100000),
			// needs 1000 / g <= 810: g = 4.
			withTarget(queued("ontrack", 2, 4, 4, 4), 1000, 1000)},
		want: map[string]A{"ontrack": {"n1": 4}},
		reasons: map[string]string{
			"hopeless": "preempted (8 GPUs) for job ontrack, which is behind its target; this job: behind: misses its deadline even at 8 GPUs (with the headroom)",
			"ontrack":  "started with 4 GPUs on 1 node (what its target needs): on track"},
	}, {
		// late: 8000 s of work, at 8 GPUs 1000 s, due in 99,900 s. soon
		// needs 4 for 250 s; late can wait that long and still be on track
		// at its max, so it is stopped (below its min) for soon.
		name:  "an on-track job that can spare the time is stopped for one due earlier",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("late", 1, 8, 8, 8, A{"n1": 8}, 10), 100000, 8000),
			withTarget(queued("soon", 2, 4, 4, 4), 1000, 1000)},
		want: map[string]A{"soon": {"n1": 4}},
		reasons: map[string]string{
			"late": "preempted (8 GPUs) for job soon, which is behind its target; this job: on track"},
	}, {
		// late: 9000 s of work, 1125 s at 8 GPUs, 1400 s left: on track,
		// but not after waiting 250 s for soon (1125 > 0.9 x 1150).
		name:  "an on-track job that cannot spare the time keeps its need",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("late", 1, 8, 8, 8, A{"n1": 8}, 10), 1500, 9000),
			withTarget(queued("soon", 2, 4, 4, 4), 1000, 1000)},
		want: map[string]A{"late": {"n1": 8}},
	}, {
		name:  "a sublinear speedup raises the need",
		nodes: []policy.Node{node("n1", 8, 0)},
		// 1000 s of work, 410 s left (budget 369 s): linear needs 3;
		// with s = 0.2, speedup(3) = 2.14, (4) = 2.5, (5) = 2.78 -> 5.
		jobs: []policy.Job{
			withSpeedup(withTarget(running("x", 1, 1, 8, 1, A{"n1": 1}, 10), 510, 1000), sub(8, 0.2)),
			running("other", 2, 1, 8, 1, A{"n1": 7}, 10)},
		want: map[string]A{"x": {"n1": 5}, "other": {"n1": 3}},
		reasons: map[string]string{
			"other": "shrunk from 7 to 3 GPUs for job x, which is behind its target; this job: no deadline"},
	}, {
		name:  "jobs without a target give first, on-track jobs only their surplus",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			withTarget(running("surplus", 1, 1, 8, 1, A{"n1": 4}, 10), 2000, 100),
			running("none", 2, 1, 8, 1, A{"n1": 3}, 20),
			withTarget(running("needy", 3, 1, 8, 1, A{"n1": 1}, 30), 500, 1400)},
		// needy needs 1400 / g <= 360: g = 4; gains 3: 2 from none (to its
		// min 1), then 1 from surplus (needs 1).
		want: map[string]A{"surplus": {"n1": 3}, "none": {"n1": 1}, "needy": {"n1": 4}},
	}, {
		name:  "without deadlines: no head-of-line blocking, idle GPUs grow jobs",
		nodes: []policy.Node{node("n1", 8, 2)},
		jobs:  []policy.Job{queued("big", 1, 8, 8, 1), queued("small", 2, 2, 4, 1)},
		want:  map[string]A{"small": {"n1": 4}},
		reasons: map[string]string{
			"small": "started with 4 GPUs on 1 node (its minimum: 2 GPUs, then grown into idle GPUs)"},
	}, {
		name:  "jobs of unknown progress and jobs that reached their target are admitted at min",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs: []policy.Job{
			reached(withTarget(running("done", 1, 2, 8, 2, A{"n1": 8}, 10), 500, 0)),
			withTarget(queued("unknown", 2, 2, 8, 2), 400, 0)},
		want:    map[string]A{"done": {"n1": 6}, "unknown": {"n1": 2}},
		reasons: map[string]string{"unknown": "started with 2 GPUs on 1 node (its minimum): no estimate of its progress yet"},
	}, {
		name:  "a deadline already passed",
		nodes: []policy.Node{node("n1", 8, 0)},
		jobs:  []policy.Job{withTarget(queued("late", 1, 2, 2, 2), 50, 100)},
		want:  map[string]A{"late": {"n1": 2}},
		reasons: map[string]string{
			"late": "its deadline passed 50s ago"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := &policy.Snapshot{Now: at(100), Nodes: tc.nodes, Jobs: tc.jobs}
			p := plan(t, configured(t, builtin.QoEName, map[string]string{"headroom": "0.1"}), s)
			must.Eq(t, tc.want, targets(s, p))
			for id, want := range tc.reasons {
				i := slices.IndexFunc(s.Jobs, func(j policy.Job) bool { return j.ID == id })
				must.NonNegative(t, i)
				got := strings.Join(p.Why(&s.Jobs[i]), " | ")
				must.StrContains(t, got, want)
			}
		})
	}
}

func withSpeedup(j policy.Job, s []float64) policy.Job { j.Speedup = s; return j }

func reached(j policy.Job) policy.Job { j.Progress.Reached = true; return j }

// The headroom is the share of the time left a job keeps in hand: with a
// larger one, a job needs more GPUs.
func TestQoE_Headroom(t *testing.T) {
	s := &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 8, 0)}, Jobs: []policy.Job{
		running("filler", 1, 1, 8, 1, A{"n1": 7}, 10), // no target: gives what y needs
		withTarget(running("y", 2, 1, 8, 1, A{"n1": 1}, 10), 1100, 3000)}}
	// y: 3000 s of work, 1000 s left. headroom 0.1: 3000/g <= 900 -> 4;
	// headroom 0.5: <= 500 -> 6.
	for h, want := range map[string]int{"0.3": 5, "0.5": 6, "0": 3, "": 4} { // default 0.1
		config := map[string]string{"headroom": h}
		if h == "" {
			config = nil
		}
		p := configured(t, builtin.QoEName, config)
		plan := plan(t, p, s)
		must.Eq(t, want, plan.Target(&s.Jobs[1]).Total(), must.Sprintf("headroom %s", h))
	}
	q := builtin.NewQoE()
	for _, bad := range []string{"1", "-0.1", "x", "NaN"} {
		must.ErrorContains(t, q.SetConfig(map[string]string{"headroom": bad}), "headroom")
	}
	must.ErrorContains(t, q.SetConfig(map[string]string{"resize_cooldown": "-1s"}), "resize_cooldown")
	must.ErrorContains(t, q.SetConfig(map[string]string{"nope": "1"}), "unknown config key")
}
