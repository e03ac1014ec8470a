package sim_test

import (
	"context"
	"fmt"
	"math"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

func TestRun_RigidJobOnAnEmptyCluster(t *testing.T) {
	cases := []struct {
		name   string
		submit float64
		events bool
		jct    float64
	}{
		{name: "arrives on a round", submit: 120, jct: 1000},
		{name: "waits for the next round", submit: 100, jct: 1020},
		{name: "rounds on events start it at once", submit: 100, events: true, jct: 1000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(2, 4)
			cfg.EventRounds = tc.events
			for _, name := range []string{builtin.FIFOName, builtin.TiresiasName, builtin.GoodputName} {
				r := run(t, cfg, name, rigid("a", tc.submit, 1000, 4))
				must.Eq(t, tc.jct, r.JCT.Mean, must.Sprint(name))
				must.Eq(t, 1000, r.Bounds.MeanJCT)
				must.Eq(t, 0, r.Restarts.Max)
			}
		})
	}
}

func TestRun_ArrivalsAndCompletions(t *testing.T) {
	// One GPU; b arrives while a runs and starts at the first round after a
	// completes (a at 0..100, b at 120..170).
	r := run(t, config(1, 1), builtin.FIFOName, rigid("a", 0, 100, 1), rigid("b", 10, 50, 1))
	must.Eq(t, []float64{100, 160}, r.JCTs)
	must.Eq(t, 55, r.Queueing.Mean) // (0 + 110) / 2
	must.Eq(t, 170, r.Makespan)
	must.Eq(t, 75, r.Bounds.MeanJCT)
	must.Eq(t, []sim.UtilPoint{{T: 0, Busy: 1}, {T: 100, Busy: 0}, {T: 120, Busy: 1}, {T: 170, Busy: 0}}, r.Util)
	must.Eq(t, 150.0/170, r.Utilization)
	// Rounds at 0, 60 and 120 (none while idle after the last job).
	must.Eq(t, 3, r.Rounds)
}

func TestRun_UtilizationAndGantt(t *testing.T) {
	cfg := config(2, 4)
	cfg.Gantt = true
	specs := []sim.JobSpec{rigid("a", 0, 600, 3), rigid("b", 0, 300, 4), rigid("c", 60, 120, 2)}
	r := run(t, cfg, builtin.FIFOName, specs...)
	held := 600*3 + 300*4 + 120*2.0
	must.Eq(t, held/(8*r.Makespan), r.Utilization)
	gpuSeconds := 0.0
	perGPU := map[int32]float64{}
	for _, s := range r.Segments {
		gpuSeconds += s.End - s.Start
		perGPU[s.GPU] += s.End - s.Start
		must.Between(t, 0, s.GPU, 7)
	}
	must.Eq(t, held, gpuSeconds)
	for g, busy := range perGPU {
		must.LessEq(t, r.Makespan, busy, must.Sprintf("GPU %d is held longer than the run", g))
	}
}

func TestRun_RescaleCosts(t *testing.T) {
	// An elastic rigid-model job (rate 1 whatever it holds): started on 1
	// GPU in round 1, grown to 2 in round 2 (t=60), shrunk to 1 in round 3.
	steps := map[int]map[string]policy.Allocation{
		1: {"a": {"node-0": 1}},
		2: {"a": {"node-0": 2}},
		3: {"a": {"node-0": 1}},
	}
	spec := sim.JobSpec{ID: "a", GPUs: policy.GPURequest{Min: 1, Max: 2, PerWorker: 1},
		Model: &sim.Rigid{Duration: 300, GPUs: 1}, ChargeStart: true}
	cases := []struct {
		name     string
		launcher sim.Launcher
		jct      float64
	}{
		// Each of start, grow and shrink pauses the job 30 s.
		{"restart", sim.LauncherRestart, 300 + 3*30},
		// The start costs 30 s, the grow and the shrink 5 s each.
		{"in place", sim.LauncherInPlace, 300 + 30 + 2*5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := config(1, 2)
			cfg.Launcher = tc.launcher
			p := &script{steps: steps}
			r, err := sim.Run(context.Background(), cfg, t0, []sim.JobSpec{spec}, p)
			must.NoError(t, err)
			must.Eq(t, tc.jct, r.JCT.Mean)
			must.Eq(t, 2, r.Restarts.Max)
		})
	}
}

func TestRun_PreemptionCostsARestart(t *testing.T) {
	// A rigid job is stopped in round 2 and resumed in round 3: it keeps its
	// progress and pays the restart delay once (its first start is free).
	steps := map[int]map[string]policy.Allocation{
		1: {"a": {"node-0": 1}},
		2: {"a": nil},
		3: {"a": {"node-0": 1}},
	}
	p := &script{steps: steps}
	r, err := sim.Run(context.Background(), config(1, 1), t0, []sim.JobSpec{rigid("a", 0, 200, 1)}, p)
	must.NoError(t, err)
	// Runs 0..60, waits 60..120, pauses 120..150, runs 150..290.
	must.Eq(t, 290, r.JCT.Mean)
	must.Eq(t, 1, r.Preemptions)
	must.Eq(t, 1, r.Restarts.Max)
	must.Eq(t, []float64{0, 60, 120, 180, 240}, p.seen)
}

func TestRun_Stalled(t *testing.T) {
	p := &script{}
	_, err := sim.Run(context.Background(), config(1, 1), t0, []sim.JobSpec{rigid("a", 0, 10, 1)}, p)
	must.ErrorContains(t, err, "stalled")
	must.ErrorContains(t, err, "a (1-1 GPUs)")
}

func TestRun_Errors(t *testing.T) {
	cfg := config(1, 1)
	cfg.Round = 0
	_, err := sim.Run(context.Background(), cfg, t0, nil, builtin.NewFIFO())
	must.ErrorContains(t, err, "round")

	_, err = sim.Run(context.Background(), config(1, 1), t0,
		[]sim.JobSpec{rigid("a", 10, 1, 1), rigid("b", 0, 1, 1)}, builtin.NewFIFO())
	must.ErrorContains(t, err, "submission order")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = sim.Run(ctx, config(1, 1), t0, []sim.JobSpec{rigid("a", 0, 1, 1)}, builtin.NewFIFO())
	must.ErrorIs(t, err, context.Canceled)
}

func TestRun_ExternalPolicyThroughTheRegistry(t *testing.T) {
	// A builtin opened through the registry is an Instance, which checks
	// every plan; an external plugin is opened the same way.
	reg := host.NewRegistry("", nil)
	p, err := reg.Open(builtin.TiresiasName, map[string]string{"queue_thresholds": "100"})
	must.NoError(t, err)
	defer p.Close()
	r, err := sim.Run(context.Background(), config(1, 1), t0,
		[]sim.JobSpec{rigid("long", 0, 600, 1), rigid("short", 30, 60, 1)}, p)
	must.NoError(t, err)
	// long passes 100 GPU-s by the round at 120 and is preempted for short,
	// which runs 120..180; long resumes at 180 after a 30 s restart.
	must.Eq(t, 1, r.Preemptions)
	must.Eq(t, []float64{150, 600 + 60 + 30}, r.JCTs)
}

func TestRun_ElasticJobsFinish(t *testing.T) {
	apps, err := sim.LoadApps("testdata/apps")
	must.NoError(t, err)
	toy := apps["toy"]
	var specs []sim.JobSpec
	for i := range 8 {
		m := sim.NewGoodput(toy, sim.BatchAdaptive, 256, 2)
		specs = append(specs, sim.JobSpec{ID: string(rune('a' + i)), Submit: float64(30 * i),
			GPUs: policy.GPURequest{Min: 1, Max: m.MaxReplicas(), PerWorker: 1}, Model: m, ChargeStart: true})
	}
	for _, name := range []string{builtin.ElasticFIFOName, builtin.GoodputName, builtin.TiresiasName} {
		cfg := config(2, 4)
		cfg.Round = 30 * time.Second
		r := run(t, cfg, name, specs...)
		must.Eq(t, 8, len(r.JCTs))
		must.GreaterEq(t, r.Bounds.MeanJCT, r.JCT.Mean, must.Sprint(name))
		must.False(t, math.IsNaN(r.JCT.Mean))
	}
}

// TestRun_SkipQuietRoundsChangesNothing: for the time-invariant policies a
// run that skips quiet rounds is the same run.
func TestRun_SkipQuietRoundsChangesNothing(t *testing.T) {
	apps, err := sim.LoadApps("testdata/apps")
	must.NoError(t, err)
	specs := phillyLike(300, 64, 0.9)
	for i := range 40 {
		m := sim.NewGoodput(apps["toy"], sim.BatchAdaptive, 256, 2)
		specs = append(specs, sim.JobSpec{ID: fmt.Sprintf("toy-%d", i), Submit: specs[len(specs)-1].Submit + 7,
			GPUs: policy.GPURequest{Min: 1, Max: 16, PerWorker: 1}, Model: m, ChargeStart: true})
	}
	// Deadlines, which edf orders by; the others ignore them. Every third
	// job's falls 2 to 40 hours after its submission, out of order.
	for i := range specs {
		if i%3 == 0 {
			specs[i].HasDeadline, specs[i].Deadline = true, specs[i].Submit+float64(7200+(i*7919)%136800)
		}
	}
	for _, name := range []string{builtin.FIFOName, builtin.RoundRobinName, builtin.ElasticFIFOName, builtin.GoodputName, builtin.EDFName} {
		t.Run(name, func(t *testing.T) {
			_, steady := host.Builtins()[name]().(policy.Steady)
			must.True(t, steady)
			cfg := config(8, 8)
			all := run(t, cfg, name, specs...)
			cfg.SkipQuietRounds = true
			quiet := run(t, cfg, name, specs...)
			must.Eq(t, all.JCTs, quiet.JCTs)
			must.Eq(t, all.Util, quiet.Util)
			must.Eq(t, all.Rounds, quiet.Rounds+quiet.SkippedRounds)
			must.Positive(t, quiet.SkippedRounds)
		})
	}
	// The deadlines matter to edf: it is not elastic-fifo here.
	must.NotEq(t, run(t, config(8, 8), builtin.EDFName, specs...).JCTs, run(t, config(8, 8), builtin.ElasticFIFOName, specs...).JCTs)
	// With a resize cooldown, elastic-fifo's plan waits on the time too:
	// e, shrunk for r, may grow back only ten minutes later, after r
	// has ended, in a round in which nothing else happens.
	e := sim.JobSpec{ID: "e", Submit: 0, GPUs: policy.GPURequest{Min: 2, Max: 8, PerWorker: 1},
		Model: sim.NewAmdahl(4000, 8, 0), ChargeStart: true}
	two := []sim.JobSpec{e, rigid("r", 100, 300, 4)}
	p := builtin.NewElasticFIFO()
	must.NoError(t, p.SetConfig(map[string]string{"resize_cooldown": "10m"}))
	all, quiet := runQuietToo(t, config(1, 8), two, p)
	must.Eq(t, all.JCTs, quiet.JCTs)
	must.Positive(t, quiet.SkippedRounds)
	must.NotEq(t, all.JCTs, run(t, config(1, 8), builtin.ElasticFIFOName, two...).JCTs, must.Sprint("the cooldown matters here"))
	// qoe and goodput-jct weigh the time every round.
	for _, name := range []string{builtin.QoEName, builtin.GoodputJCTName} {
		_, steady := host.Builtins()[name]().(policy.Steady)
		must.False(t, steady, must.Sprint(name))
	}
}

// Tiresias tells until when its plan stays the same (policy.Steady: until
// a running job's attained service reaches the next queue threshold), so
// a run that skips the quiet rounds before that is the same run; with
// thresholds low enough that jobs are demoted and preempted mid-run.
func TestRun_SkipQuietRoundsSteadyTiresias(t *testing.T) {
	specs := phillyLike(300, 64, 0.9)
	p := builtin.NewTiresias()
	must.NoError(t, p.SetConfig(map[string]string{"queue_thresholds": "1800,14400"}))
	all, quiet := runQuietToo(t, config(8, 8), specs, p)
	must.Positive(t, all.Preemptions, must.Sprint("jobs cross the thresholds mid-run"))
	must.Eq(t, all.JCTs, quiet.JCTs)
	must.Eq(t, all.Preemptions, quiet.Preemptions)
	must.Eq(t, all.Restarts, quiet.Restarts)
	must.Eq(t, all.Rounds, quiet.Rounds+quiet.SkippedRounds)
	must.Positive(t, quiet.SkippedRounds)

	// Nothing but the time changes when a crossing matters: a reaches
	// 3,600 GPU-s at 900 s and falls to the second queue, and b, waiting
	// in the first since 100 s, takes its GPUs in that round (a round is
	// every 60 s) and runs its 600 s (2,400 GPU-s: it stays in the first).
	two := []sim.JobSpec{rigid("a", 0, 10000, 4), rigid("b", 100, 600, 4)}
	must.NoError(t, p.SetConfig(map[string]string{"queue_thresholds": "3600"}))
	_, quiet = runQuietToo(t, config(1, 4), two, p)
	must.Eq(t, sim.JobJCT{ID: "b", JCT: 900 - 100 + 600}, quiet.JobJCTs[1])
	must.Positive(t, quiet.SkippedRounds)
}

// unsteady is fifo that cannot tell until when its plan stays the same,
// as an external policy behind the host cannot.
type unsteady struct{ *builtin.FIFO }

func (unsteady) SteadyUntil(*policy.Snapshot) (time.Time, bool) { return time.Time{}, false }

// A policy that cannot tell (policy.Steady's ok false) has every round
// planned, quiet or not.
func TestRun_SkipQuietRoundsNotWhenUnsteady(t *testing.T) {
	all, quiet := runQuietToo(t, config(8, 8), phillyLike(100, 64, 0.9), unsteady{builtin.NewFIFO()})
	must.Zero(t, quiet.SkippedRounds)
	must.Eq(t, all.Rounds, quiet.Rounds)
}

// runQuietToo runs specs with p on cfg's cluster planning every round,
// then skipping the quiet ones (Config.SkipQuietRounds).
func runQuietToo(t *testing.T, cfg sim.Config, specs []sim.JobSpec, p policy.Policy) (all, quiet *sim.Result) {
	t.Helper()
	all, err := sim.Run(context.Background(), cfg, t0, specs, p)
	must.NoError(t, err)
	cfg.SkipQuietRounds = true
	quiet, err = sim.Run(context.Background(), cfg, t0, specs, p)
	must.NoError(t, err)
	return all, quiet
}

// TestRun_ExternalPlugin replays a trace with the example external policy,
// launched from a plugin_dir over go-plugin gRPC.
func TestRun_ExternalPlugin(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the example plugin")
	}
	dir := t.TempDir()
	out, err := exec.Command("go", "build", "-o", filepath.Join(dir, "largest-first"),
		"../plugins/policy/examples/largestfirst/cmd/largest-first").CombinedOutput()
	must.NoError(t, err, must.Sprint(string(out)))
	p, err := host.NewRegistry(dir, nil).Open("largest-first", nil)
	must.NoError(t, err)
	defer p.Close()
	must.False(t, p.Builtin())
	r, err := sim.Run(context.Background(), config(2, 4), t0, phillyLike(50, 8, 0.5), p)
	must.NoError(t, err)
	must.Eq(t, 50, len(r.JCTs))
}

// The round is the planner's: a job that no node could ever hold is
// refused at submission by the planner's own check (the simulator used to
// queue it and stall), and the jobs the policy sees are the planner's
// records (the job's trace ID, its submission as the planner stored it).
func TestRun_ThePlannersRound(t *testing.T) {
	_, err := sim.Run(context.Background(), config(1, 4), t0, []sim.JobSpec{rigid("big", 0, 10, 8)}, builtin.NewFIFO())
	must.ErrorContains(t, err, "submit job big")
	must.ErrorContains(t, err, "needs at least 8 GPUs but the cluster has 4")

	p := &recorder{script: script{steps: map[int]map[string]policy.Allocation{1: {"a": {"node-0": 1}}}}}
	_, err = sim.Run(context.Background(), config(1, 1), t0, []sim.JobSpec{rigid("a", 30, 10, 1)}, p)
	must.NoError(t, err)
	j := p.jobs[0][0]
	must.Eq(t, "a", j.ID)
	must.Eq(t, t0.Add(30*time.Second), j.Submitted)
	must.Eq(t, t0.Add(30*time.Second), j.LastResized, must.Sprint("the planner's: a queued job's last change is its submission"))
}
