package sim_test

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

// tinyPhilly is a Philly trace of five jobs, not in submission order.
func tinyPhilly(t *testing.T) string {
	return writeFile(t, "philly.csv", phillyHead,
		"2017-10-09 07:10:00,600,1,600,a",   // line 2
		"2017-10-09 07:00:00,1000,2,2000,a", // line 3
		"2017-10-09 07:05:00,3600,8,28800,b",
		"2017-10-09 08:00:00,60,64,3840,b",
		"2017-10-10 00:00:00,0,4,0,c") // line 6: a zero duration
}

func loadDeadlines(t *testing.T, path string, o sim.DeadlineOptions) *sim.Trace {
	t.Helper()
	tr, err := sim.LoadTrace(path, "", "")
	must.NoError(t, err)
	must.NoError(t, tr.WithDeadlines(o))
	return tr
}

func TestWithDeadlines_FollowsTheRules(t *testing.T) {
	path := tinyPhilly(t)
	o := sim.DeadlineOptions{Seed: 7, Lambda: [2]float64{0.5, 2}, Serial: [2]float64{0, 0.1}}
	tr := loadDeadlines(t, path, o)
	must.Eq(t, &o, tr.Deadlines)
	must.Eq(t, 5, len(tr.Jobs))
	for _, j := range tr.Jobs {
		// The documented draw: PCG seeded with (seed, line), lambda first.
		r := rand.New(rand.NewPCG(7, uint64(j.Line)))
		lambda := 0.5 + 1.5*r.Float64()
		serial := 0.1 * r.Float64()
		must.True(t, j.HasDeadline)
		must.Eq(t, lambda, j.Lambda, must.Sprint(j.ID))
		must.Eq(t, serial, j.Serial, must.Sprint(j.ID))
		must.Between(t, 0.5, j.Lambda, 2)
		must.Between(t, 0, j.Serial, 0.1)
		must.Eq(t, j.Submit+lambda*j.Duration, j.Deadline)
	}

	// Deterministic: the same seed gives the same jobs; another seed other
	// deadlines.
	must.Eq(t, tr.Jobs, loadDeadlines(t, path, o).Jobs)
	o2 := o
	o2.Seed = 8
	other := loadDeadlines(t, path, o2)
	for i := range other.Jobs {
		must.NotEq(t, tr.Jobs[i].Lambda, other.Jobs[i].Lambda)
	}

	// A degenerate range needs no generator: due at submit + duration.
	exact := loadDeadlines(t, path, sim.DeadlineOptions{Seed: 1, Lambda: [2]float64{1, 1}, Serial: [2]float64{0.05, 0.05}})
	must.Eq(t, []float64{0, 300, 600, 3600, 61200}, submits(exact))
	must.Eq(t, []float64{1000, 300 + 3600, 600 + 600, 3600 + 60, 61200}, deadlinesOf(exact))
}

func submits(tr *sim.Trace) []float64 {
	var out []float64
	for _, j := range tr.Jobs {
		out = append(out, j.Submit)
	}
	return out
}

func deadlinesOf(tr *sim.Trace) []float64 {
	var out []float64
	for _, j := range tr.Jobs {
		out = append(out, j.Deadline)
	}
	return out
}

func TestWithDeadlines_LambdaIsUniform(t *testing.T) {
	o := sim.DeadlineOptions{Seed: 3, Lambda: [2]float64{0.5, 1.5}, Serial: [2]float64{0.02, 0.06}}
	const n = 20000
	var sumL, sumS float64
	below := 0
	for line := 2; line < n+2; line++ {
		l, s := o.Draw(line)
		sumL += l
		sumS += s
		if l < 0.75 {
			below++
		}
	}
	must.Between(t, 0.99, sumL/n, 1.01)
	must.Between(t, 0.0396, sumS/n, 0.0404)
	must.Between(t, 0.24, float64(below)/n, 0.26) // a quarter of [0.5, 1.5)
}

func TestWithDeadlines_Errors(t *testing.T) {
	tr, err := sim.LoadTrace(tinyPhilly(t), "", "")
	must.NoError(t, err)
	for _, o := range []sim.DeadlineOptions{
		{Lambda: [2]float64{0, 1}, Serial: [2]float64{0, 0.1}},
		{Lambda: [2]float64{2, 1}, Serial: [2]float64{0, 0.1}},
		{Lambda: [2]float64{1, 2}, Serial: [2]float64{0, 1}},
		{Lambda: [2]float64{1, 2}, Serial: [2]float64{-0.1, 0.1}},
	} {
		must.Error(t, tr.WithDeadlines(o), must.Sprint(o))
	}
	must.Nil(t, tr.Deadlines)
	pollux := &sim.Trace{Path: "w.csv", Format: sim.FormatPollux}
	must.ErrorContains(t, pollux.WithDeadlines(sim.DefaultDeadlineOptions()), "derived from philly traces")
}

func TestSpecs_ElasticDeadlineJobs(t *testing.T) {
	tr := loadDeadlines(t, tinyPhilly(t), sim.DefaultDeadlineOptions())
	specs, skipped := tr.Specs(sim.JobOptions{GPUsPerNode: 8, ClusterGPUs: 24})
	// The 64-GPU job needs at least 32: more than the cluster.
	must.Eq(t, 1, len(skipped))
	must.Eq(t, 64/2, skipped[0].GPUs)
	byID := map[string]sim.JobSpec{}
	for _, s := range specs {
		byID[s.ID] = s
	}
	jobs := map[string]sim.TraceJob{}
	for _, j := range tr.Jobs {
		jobs[j.ID] = j
	}
	cases := []struct {
		id       string
		min, max int
	}{
		{"philly-000002", 1, 2},
		{"philly-000003", 1, 4},
		{"philly-000004", 4, 16},
		{"philly-000006", 2, 8},
	}
	for _, tc := range cases {
		s, j := byID[tc.id], jobs[tc.id]
		must.Eq(t, policy.GPURequest{Min: tc.min, Max: tc.max, PerWorker: 1}, s.GPUs, must.Sprint(tc.id))
		must.Eq(t, "elastic", s.Kind)
		must.True(t, s.HasDeadline)
		must.Eq(t, j.Deadline, s.Deadline)
		must.False(t, s.ChargeStart)
		m := s.Model.(*sim.Amdahl)
		must.Eq(t, j.Serial, m.Serial)
		// On its recorded count the job runs for its recorded duration.
		rate, until := m.Rate(packedOn(j.GPUs, 8), 0)
		must.True(t, math.IsInf(until, 1))
		must.InDelta(t, j.Duration, m.Work()/rate, 1e-9)
		// Amdahl: g / (1 + s (g - 1)), sublinear, increasing.
		tab, _ := m.Speedup(0, s.GPUs.Max, 8)
		must.Eq(t, s.GPUs.Max, len(tab))
		for g := 1; g <= len(tab); g++ {
			must.InDelta(t, float64(g)/(1+j.Serial*float64(g-1)), tab[g-1], 1e-12)
			if g > 1 {
				must.Greater(t, tab[g-2], tab[g-1])
				must.LessEq(t, float64(g), tab[g-1])
			}
		}
		// The best run time is at the most GPUs.
		best, _ := m.Best(s.GPUs, 8)
		must.InDelta(t, m.Work()/tab[len(tab)-1], best, 1e-9)
	}
	// The cluster caps the range: an 8-GPU job on 12 GPUs.
	specs, _ = tr.Specs(sim.JobOptions{GPUsPerNode: 4, ClusterGPUs: 12})
	for _, s := range specs {
		if s.ID == "philly-000004" {
			must.Eq(t, policy.GPURequest{Min: 4, Max: 12, PerWorker: 1}, s.GPUs)
		}
	}
}

func packedOn(n, per int) []int {
	var p []int
	for n > 0 {
		p = append(p, min(n, per))
		n -= min(n, per)
	}
	return p
}

func TestTrace_Window(t *testing.T) {
	o := sim.DeadlineOptions{Seed: 1, Lambda: [2]float64{1, 1}, Serial: [2]float64{0, 0}}
	full := loadDeadlines(t, tinyPhilly(t), o)
	tr := loadDeadlines(t, tinyPhilly(t), o)
	from := time.Date(2017, 10, 9, 7, 5, 0, 0, time.UTC)
	to := time.Date(2017, 10, 9, 8, 0, 0, 0, time.UTC)
	must.NoError(t, tr.Window(from, to))
	// [07:05, 08:00): the jobs of 07:05 and 07:10; 07:05 is second 0.
	must.Eq(t, from, tr.Start)
	must.Eq(t, []string{"philly-000004", "philly-000002"}, []string{tr.Jobs[0].ID, tr.Jobs[1].ID})
	must.Eq(t, []float64{0, 300}, submits(tr))
	must.Eq(t, []float64{3600, 900}, deadlinesOf(tr))
	// The draws are the job's, whatever the window.
	must.Eq(t, full.Jobs[2].Lambda, tr.Jobs[1].Lambda)

	must.ErrorContains(t, tr.Window(to, from), "is empty")
	late := time.Date(2018, 1, 1, 0, 0, 0, 0, time.UTC)
	must.ErrorContains(t, full.Window(late, time.Time{}), "no job")
}

// recorder is a script that keeps every snapshot's jobs.
type recorder struct {
	script
	jobs [][]policy.Job
}

func (p *recorder) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	p.jobs = append(p.jobs, append([]policy.Job(nil), s.Jobs...))
	return p.script.Plan(ctx, s)
}

func TestRun_ProgressOfDeadlineJobs(t *testing.T) {
	// A job recorded as 1000 s on 2 GPUs, serial fraction 0.1, elastic
	// 1..4, due at 900 s: started on 2 GPUs at 0, grown to 4 at 60 (a 30 s
	// restart), kept there.
	m := sim.NewAmdahl(1000, 2, 0.1)
	s2, s4 := 2/1.1, 4/1.3
	must.InDelta(t, 1000*s2, m.Work(), 1e-9)
	spec := sim.JobSpec{ID: "a", GPUs: policy.GPURequest{Min: 1, Max: 4, PerWorker: 1}, Model: m,
		Kind: "elastic", HasDeadline: true, Deadline: 900}
	p := &recorder{script: script{steps: map[int]map[string]policy.Allocation{
		1: {"a": {"node-0": 2}},
		2: {"a": {"node-0": 4}},
	}}}
	r, err := sim.Run(context.Background(), config(1, 4), t0, []sim.JobSpec{spec}, p)
	must.NoError(t, err)

	work := 1000 * s2
	doneAt := []float64{0, 60 * s2, 60*s2 + 30*s4} // rounds at 0, 60, 120
	throughput := []float64{0, s2, s4}
	for i, done := range doneAt {
		j := p.jobs[i][0]
		pr := j.Progress
		must.Eq(t, sim.ProgressMetric, pr.Metric)
		must.Eq(t, 1, pr.Target)
		must.Eq(t, t0.Add(900*time.Second), pr.Deadline)
		must.InDelta(t, done/work, pr.Value, 1e-9, must.Sprintf("round %d", i+1))
		must.InDelta(t, work-done, pr.RemainingWork, 1e-6, must.Sprintf("round %d", i+1))
		must.InDelta(t, throughput[i], pr.Throughput, 1e-12, must.Sprintf("round %d", i+1))
		must.Eq(t, 4, len(j.Speedup))
		must.InDelta(t, s4, j.Speedup[3], 1e-12)
	}
	// RemainingWork / Speedup[g-1] is the time the job still needs on g GPUs.
	last := p.jobs[2][0]
	must.InDelta(t, 120+last.Progress.RemainingWork/last.Speedup[3], r.JCTs[0], 1e-6)
	must.Eq(t, 1, r.Deadlines.Jobs)
	must.Eq(t, 1, r.Deadlines.Met)
}

// The policy sees what a change costs a job once one has cost it
// something (policy.Job.RestartSeconds), as the planner would measure it:
// the job's own delay; nothing after a first start that cost nothing.
func TestRun_RestartSecondsOnceAChangeCostSomething(t *testing.T) {
	spec := sim.JobSpec{ID: "a", GPUs: policy.GPURequest{Min: 1, Max: 4, PerWorker: 1}, Model: sim.NewAmdahl(1000, 2, 0.1),
		Kind: "elastic", HasDeadline: true, Deadline: 900, RestartDelay: 45}
	p := &recorder{script: script{steps: map[int]map[string]policy.Allocation{
		1: {"a": {"node-0": 2}},
		2: {"a": {"node-0": 4}},
	}}}
	_, err := sim.Run(context.Background(), config(1, 4), t0, []sim.JobSpec{spec}, p)
	must.NoError(t, err)
	var seen []float64
	for _, js := range p.jobs[:3] {
		seen = append(seen, js[0].RestartSeconds)
	}
	must.Eq(t, []float64{0, 0, 45}, seen, must.Sprint("queued, started for free, grown at its 45 s"))
}

// amdahl1 is a one-GPU job of d seconds (serial fraction 0).
func amdahl1(id string, submit, d, deadline float64) sim.JobSpec {
	return sim.JobSpec{ID: id, Submit: submit, GPUs: policy.GPURequest{Min: 1, Max: 1, PerWorker: 1},
		Model: sim.NewAmdahl(d, 1, 0), Kind: "elastic", HasDeadline: true, Deadline: deadline}
}

func TestRun_DeadlineSatisfaction(t *testing.T) {
	// One GPU, FIFO, 60 s rounds, the first start free:
	//   a 0..100, due 100: met (exactly);
	//   b 120..220, due 200: missed by 20 (it could: from 60, done at 160);
	//   c 240..270, due 1000: met;
	//   d 300..310, no deadline;
	//   e 360..410, due 80: missed by 330 (impossible: from 60, done at 110);
	//   f 420..440, due 75: missed by 365 (impossible: from 60, done at 80,
	//     though 70 if it could start on arrival).
	noDeadline := amdahl1("d", 30, 10, 0)
	noDeadline.HasDeadline = false
	specs := []sim.JobSpec{amdahl1("a", 0, 100, 100), amdahl1("b", 10, 100, 200), amdahl1("c", 20, 30, 1000),
		noDeadline, amdahl1("e", 40, 50, 80), amdahl1("f", 50, 20, 75)}
	r := run(t, config(1, 1), builtin.FIFOName, specs...)
	must.Eq(t, []float64{100, 210, 250, 280, 370, 390}, r.JCTs)
	d := r.Deadlines
	must.NotNil(t, d)
	must.Eq(t, 5, d.Jobs)
	must.Eq(t, 2, d.Met)
	must.Eq(t, 0.4, d.SatisfactionRatio)
	must.Eq(t, 3, d.Feasible)
	must.Eq(t, 0.6, d.FeasibleRatio)
	must.InDelta(t, (20+330+365)/3.0, d.Tardiness.Mean, 1e-9)
	must.Eq(t, 330, d.Tardiness.Median)
	must.Eq(t, 365, d.Tardiness.Max)
	must.Eq(t, (100+250)/2.0, d.MeanJCTMet)
	must.InDelta(t, (210+370+390)/3.0, d.MeanJCTMissed, 1e-9)

	// With a round at every arrival and completion b starts at 100 and
	// meets its deadline, and f could meet its deadline (but does not).
	cfg := config(1, 1)
	cfg.EventRounds = true
	r = run(t, cfg, builtin.FIFOName, specs...)
	must.Eq(t, 3, r.Deadlines.Met)
	must.Eq(t, 4, r.Deadlines.Feasible)

	// Without deadlines, nothing is measured.
	r = run(t, config(1, 1), builtin.FIFOName, rigid("x", 0, 10, 1))
	must.Nil(t, r.Deadlines)
}

// With deadline_admission = "reject" (Config.DeadlineAdmission) the
// planner refuses at submission a job that cannot meet its deadline beside
// the jobs it admitted: the run goes on, the refused job never runs and
// counts as missed (ElasticFlow's metric), and the JCTs are of the jobs
// that ran. With "warn" the same job is queued and runs late.
func TestRun_DeadlineAdmissionReject(t *testing.T) {
	// One GPU: a (100 s, due 180) is admitted; b (100 s, due 150), due
	// first, would push a past its deadline: refused (reject) or queued
	// unadmitted (warn); c (10 s, due 1000) is admitted beside a.
	specs := []sim.JobSpec{amdahl1("a", 0, 100, 180), amdahl1("b", 10, 100, 150), amdahl1("c", 20, 10, 1000)}
	cfg := config(1, 1)
	cfg.DeadlineAdmission = quota.AdmissionReject
	r := run(t, cfg, builtin.FIFOName, specs...)
	must.Eq(t, 1, r.Refused)
	must.Eq(t, 2, r.Jobs, must.Sprint("the jobs that ran"))
	must.Len(t, 2, r.JCTs)
	d := r.Deadlines
	must.Eq(t, 3, d.Jobs)
	must.Eq(t, 1, d.Refused)
	must.Eq(t, 2, d.Met)
	must.InDelta(t, 2/3.0, d.SatisfactionRatio, 1e-9)
	must.Eq(t, 0, d.Tardiness.Mean, must.Sprint("the refused job has no tardiness"))
	must.Eq(t, 0, d.MeanJCTMissed)

	cfg.DeadlineAdmission = quota.AdmissionWarn
	r = run(t, cfg, builtin.FIFOName, specs...)
	must.Eq(t, 0, r.Refused)
	must.Eq(t, 3, r.Jobs)
	must.Eq(t, 0, r.Deadlines.Refused)
	must.Eq(t, 1, len(r.JCTs)-r.Deadlines.Met, must.Sprint("b runs, late"))

	cfg.DeadlineAdmission = "drop"
	must.ErrorContains(t, cfg.Validate(), `deadline admission "drop" is not warn or reject`)
}
