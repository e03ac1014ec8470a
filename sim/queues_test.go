package sim_test

import (
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

// queueConfig is one node of 4 GPUs, 1 s rounds, free starts, with queues
// a and b of 2 GPUs each; off: reported, not enforced.
func queueConfig(off bool) sim.Config {
	c := config(1, 4)
	c.Round, c.RestartDelay = time.Second, 0
	c.Queues = &sim.Queues{Nominal: map[string]int{"a": 2, "b": 2}, Off: off}
	if !off {
		q, err := sim.VCQueues([]sim.TraceJob{{VC: "a", Duration: 1, GPUs: 1}, {VC: "b", Duration: 1, GPUs: 1}}, 4)
		if err != nil {
			panic(err)
		}
		c.Queues = q
	}
	return c
}

func inQueue(s sim.JobSpec, q string) sim.JobSpec { s.Queue = q; return s }

// queueJobs: a1 takes the whole cluster at 0 for 100 s; b1 (2 GPUs, 50 s)
// arrives at 10, a2 (2 GPUs, 50 s) at 20.
func queueJobs() []sim.JobSpec {
	return []sim.JobSpec{inQueue(rigid("a1", 0, 100, 4), "a"), inQueue(rigid("b1", 10, 50, 2), "b"),
		inQueue(rigid("a2", 20, 50, 2), "a")}
}

// Without quotas, FIFO runs a1 from 0 to 100, then b1 and a2 from 100 to
// 150; every figure is worked out by hand.
func TestRun_QueueMetricsByHand(t *testing.T) {
	r := run(t, queueConfig(true), "fifo", queueJobs()...)
	must.Eq(t, 150, r.Makespan)
	must.Len(t, 2, r.Queues)
	a, b := r.Queues[0], r.Queues[1]
	must.Eq(t, "a", a.Queue)
	must.Eq(t, 2, a.Jobs)
	must.Eq(t, 0.5, a.FairShare)
	// JCTs 100 and 130: mean 115, p95 100 + 0.95 x 30.
	must.Eq(t, 115, a.MeanJCT)
	must.InDelta(t, 128.5, a.P95JCT, 1e-9)
	// 4 GPUs for 100 s, 2 for 50 s, of 4 GPUs over 150 s.
	must.InDelta(t, 500.0/4/150, a.Share, 1e-9)
	// a2 waited from 20 to 100 while a held all 4 GPUs.
	must.InDelta(t, 1, a.ShareWaiting, 1e-9)
	// |1 - 0.5| for 100 s, |0.5 - 0.5| for 50 s.
	must.InDelta(t, 50.0/150, a.ShareDeviation, 1e-9)
	must.Eq(t, 0, a.StarvedFraction)
	// a1 alone on 2 GPUs takes 200 s (half its 4, time-sliced): rho 0.5;
	// a2 130 / 50.
	must.InDelta(t, (0.5+2.6)/2, a.MeanRho, 1e-9)
	must.InDelta(t, 2.6, a.MaxRho, 1e-9)

	must.Eq(t, "b", b.Queue)
	must.Eq(t, 140, b.MeanJCT)
	must.Eq(t, 140, b.P95JCT)
	must.InDelta(t, 100.0/4/150, b.Share, 1e-9)
	must.Eq(t, 0, b.ShareWaiting)
	must.InDelta(t, 50.0/150, b.ShareDeviation, 1e-9)
	// b1 waited with no GPUs from 10 to 100, b below its 2.
	must.InDelta(t, 90.0/150, b.StarvedFraction, 1e-9)
	must.InDelta(t, 140.0/50, b.MeanRho, 1e-9)

	// Jain over share waiting / fair share: (2 + 0)^2 / (2 x (4 + 0)).
	must.InDelta(t, 0.5, r.QueueSummary.Jain, 1e-9)
	must.InDelta(t, (50.0/150+50.0/150)/2, r.QueueSummary.MeanShareDeviation, 1e-9)
	must.InDelta(t, 90.0/150/2, r.QueueSummary.MeanStarvedFraction, 1e-9)
	must.Eq(t, 0, a.Preemptions+b.Preemptions)
}

// With the quotas enforced, b gets its 2 GPUs back when it submits: a1,
// rigid, is stopped (a preemption of queue a), and b1 runs at once.
func TestRun_QueuesEnforcedReclaim(t *testing.T) {
	r := run(t, queueConfig(false), "fifo", queueJobs()...)
	a, b := r.Queues[0], r.Queues[1]
	must.Eq(t, 1, a.Preemptions)
	must.Eq(t, 0, b.Preemptions)
	must.Eq(t, 50, b.MeanJCT)
	must.Eq(t, 0, b.StarvedFraction)
}

// Without Config.Queues there is no per-queue report.
func TestRun_NoQueuesNoReport(t *testing.T) {
	r := run(t, config(1, 4), "fifo", queueJobs()...)
	must.Nil(t, r.Queues)
	must.Nil(t, r.QueueSummary)
}

func TestVCQueues_Proportional(t *testing.T) {
	job := func(vc string, hours float64) sim.TraceJob {
		return sim.TraceJob{VC: vc, Duration: hours * 3600, GPUs: 1}
	}
	cases := []struct {
		name string
		jobs []sim.TraceJob
		gpus int
		want map[string]int
	}{
		{"exact", []sim.TraceJob{job("a", 3), job("b", 1)}, 8, map[string]int{"a": 6, "b": 2}},
		{"largest remainder, ties to the first", []sim.TraceJob{job("a", 1), job("b", 1), job("c", 1)}, 10,
			map[string]int{"a": 4, "b": 3, "c": 3}},
		{"remainders", []sim.TraceJob{job("a", 5), job("b", 3), job("c", 2)}, 7, map[string]int{"a": 4, "b": 2, "c": 1}},
		{"at least 1", []sim.TraceJob{job("a", 1000), job("b", 1)}, 4, map[string]int{"a": 3, "b": 1}},
		{"no VC is the default queue", []sim.TraceJob{job("", 1), job("a", 1)}, 2, map[string]int{"default": 1, "a": 1}},
		{"gpus x hours", []sim.TraceJob{{VC: "a", Duration: 10, GPUs: 3}, {VC: "b", Duration: 30, GPUs: 1}}, 4,
			map[string]int{"a": 2, "b": 2}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			q, err := sim.VCQueues(tc.jobs, tc.gpus)
			must.NoError(t, err)
			must.Eq(t, tc.want, q.Nominal)
			must.NotNil(t, q.Tree)
		})
	}
	_, err := sim.VCQueues([]sim.TraceJob{job("a", 1), job("b", 1)}, 1)
	must.ErrorContains(t, err, "2 VCs for 1 GPU")
}

// A config's tree: the leaves (queues that hold jobs) with their nominal
// quotas, capped at the cluster; parents are not queues of the report.
func TestTreeQueues(t *testing.T) {
	tree, err := quota.New([]quota.Def{
		{Name: "ml"},
		{Name: "vision", Parent: "ml", Nominal: quota.Amount{quota.AnyModel: 6}},
		{Name: "nlp", Parent: "ml", Nominal: quota.Amount{quota.AnyModel: 2}},
		{Name: "big", Nominal: quota.Amount{quota.AnyModel: 100}},
		{Name: "none"},
	})
	must.NoError(t, err)
	q := sim.TreeQueues(tree, 2, 8)
	must.Eq(t, map[string]int{"vision": 6, "nlp": 2, "big": 16, "none": 0}, q.Nominal)
	must.Eq(t, tree, q.Tree)
}
