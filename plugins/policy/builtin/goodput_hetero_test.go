package builtin_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/shoenig/test/must"
)

// withByModel gives each job of s a random goodput table on each model of
// its nodes (some jobs none), as the simulator fills Job.ByModel.
func withByModel(r *rand.Rand, s *policy.Snapshot) {
	models := map[string]bool{}
	for _, n := range s.Nodes {
		models[n.GPUModel] = true
	}
	for i := range s.Jobs {
		if r.IntN(4) == 0 {
			continue
		}
		j := &s.Jobs[i]
		j.ByModel = map[string][]float64{}
		for m := range models {
			base, tab := 0.5+2*r.Float64(), make([]float64, j.GPUs.Max)
			for g := range tab {
				tab[g] = base * float64(g+1) / (1 + 0.1*r.Float64()*float64(g))
			}
			j.ByModel[m] = tab
		}
	}
}

// modelsOf returns the GPU models an allocation's nodes are of.
func modelsOf(s *policy.Snapshot, a policy.Allocation) map[string]bool {
	out := map[string]bool{}
	for i := range s.Nodes {
		if a[s.Nodes[i].ID] > 0 {
			out[s.Nodes[i].GPUModel] = true
		}
	}
	return out
}

// TestProperty_HeteroNeverMixesModels: on random snapshots of two GPU
// models, with and without goodput by model, and on the round after, the
// plans of goodput-hetero and goodput-unaware are valid and give no job
// GPUs of two models (a job that held two models before is cut to one).
func TestProperty_HeteroNeverMixesModels(t *testing.T) {
	iterations := 300
	if testing.Short() {
		iterations = 40
	}
	ctx := context.Background()
	for _, p := range []policy.Policy{builtin.NewGoodputHetero(), builtin.NewGoodputUnaware()} {
		t.Run(p.PluginInfo().Name, func(t *testing.T) {
			for seed := range uint64(iterations) {
				r := rand.New(rand.NewPCG(seed, 29))
				s := randomSnapshot(r)
				if seed%2 == 0 {
					withByModel(r, s)
				}
				why := must.Sprintf("seed %d", seed)
				for round := range 2 {
					plan, err := p.Plan(ctx, s)
					must.NoError(t, err, why)
					must.NoError(t, policy.Validate(s, plan), why)
					for i := range s.Jobs {
						j := &s.Jobs[i]
						must.LessEq(t, 1, len(modelsOf(s, plan.Target(j))), why,
							must.Sprintf("round %d: job %s on %v: %v", round, j.ID, plan.Target(j), plan.Why(j)))
					}
					s = s.Apply(plan, at(120+60*round))
				}
			}
		})
	}
}

// slowFast is a snapshot at second now of two nodes of gpus GPUs each,
// slow-0 of T4s and fast-0 of A100s, and jobs.
func slowFast(now, gpus int, jobs ...policy.Job) *policy.Snapshot {
	s := &policy.Snapshot{Now: at(now), Nodes: []policy.Node{node("slow-0", gpus, 0), node("fast-0", gpus, 0)}, Jobs: jobs}
	s.Nodes[0].GPUModel, s.Nodes[1].GPUModel = "T4", "A100"
	return s
}

// heteroPair is a running job on the slow model with the fast model's
// node free: its goodput there is gain times its goodput where it is.
func heteroPair(gain float64, resized int) *policy.Snapshot {
	j := running("j", 0, 1, 4, 1, policy.Allocation{"slow-0": 4}, resized)
	j.ByModel = map[string][]float64{"T4": {1, 2, 3, 4}, "A100": {gain, 2 * gain, 3 * gain, 4 * gain}}
	return slowFast(3600, 4, j)
}

// TestGoodputHetero_MovesOnlyWhenTheGainPaysTheRestart: a job moves to a
// faster model only when its gain exceeds 1 + move_cost / the time since
// its allocation last changed (move_cost 4m here; the default, 15m, moves
// a job an hour old only for a gain above 1.25).
func TestGoodputHetero_MovesOnlyWhenTheGainPaysTheRestart(t *testing.T) {
	for _, tc := range []struct {
		name    string
		gain    float64
		resized int // second of the last change; now is 3600
		moves   bool
	}{
		// A 240 s move cost: an allocation of 3600 s needs a gain above 1 + 1/15.
		{"long allocation, small gain", 1.05, 0, false},
		{"long allocation, gain above the price", 1.1, 0, true},
		// An allocation of 240 s: the gain must be above 2.
		{"fresh allocation, large gain below the price", 1.9, 3360, false},
		{"fresh allocation, gain above the price", 2.2, 3360, true},
		{"slower elsewhere", 0.5, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := heteroPair(tc.gain, tc.resized)
			p := plan(t, configured(t, builtin.GoodputHeteroName, map[string]string{"move_cost": "4m"}), s)
			to := p.Target(&s.Jobs[0])
			if tc.moves {
				must.Eq(t, policy.Allocation{"fast-0": 4}, to.Clone(), must.Sprintf("%v", p.Reasons))
				must.StrContains(t, p.Why(&s.Jobs[0])[len(p.Why(&s.Jobs[0]))-1], "moved from 4 GPUs to 4 GPUs of A100")
			} else {
				must.Eq(t, policy.Allocation{"slow-0": 4}, to.Clone(), must.Sprintf("%v", p.Reasons))
			}
		})
	}
}

// With the default move cost (15 minutes), a job an hour at its
// allocation moves for a gain above 1.25 and not below.
func TestGoodputHetero_DefaultMoveCost(t *testing.T) {
	for gain, moves := range map[float64]bool{1.2: false, 1.3: true} {
		s := heteroPair(gain, 0)
		p := plan(t, builtin.NewGoodputHetero(), s)
		want := policy.Allocation{"slow-0": 4}
		if moves {
			want = policy.Allocation{"fast-0": 4}
		}
		must.Eq(t, want, p.Target(&s.Jobs[0]).Clone(), must.Sprintf("gain %v: %v", gain, p.Reasons))
	}
}

// TestGoodputHetero_ComparativeAdvantage: of two queued jobs and one GPU
// of each model, the fast GPU goes to the job it speeds up more, though
// both are faster there and the other was submitted first.
func TestGoodputHetero_ComparativeAdvantage(t *testing.T) {
	a, b := queued("a", 0, 1, 1, 1), queued("b", 1, 1, 1, 1)
	a.ByModel = map[string][]float64{"T4": {1}, "A100": {1.3}}
	b.ByModel = map[string][]float64{"T4": {2}, "A100": {8}}
	s := slowFast(60, 1, a, b)
	p := plan(t, builtin.NewGoodputHetero(), s)
	must.Eq(t, policy.Allocation{"slow-0": 1}, p.Target(&s.Jobs[0]).Clone())
	must.Eq(t, policy.Allocation{"fast-0": 1}, p.Target(&s.Jobs[1]).Clone())
}

// TestGoodputHetero_Constrained: a job constrained to a model runs only
// there, though the other model is free and faster for it.
func TestGoodputHetero_Constrained(t *testing.T) {
	a := queued("a", 0, 1, 2, 1)
	a.Constraints.GPUModel = "T4"
	a.ByModel = map[string][]float64{"T4": {1, 2}, "A100": {5, 10}}
	s := slowFast(60, 2, a)
	p := plan(t, builtin.NewGoodputHetero(), s)
	must.Eq(t, policy.Allocation{"slow-0": 2}, p.Target(&s.Jobs[0]).Clone())
}

// TestGoodputUnaware_CutsToTheModelHoldingMost: the unaware base spreads a
// job over two models; it keeps the model holding most of its GPUs.
func TestGoodputUnaware_CutsToTheModelHoldingMost(t *testing.T) {
	s := &policy.Snapshot{Now: at(60), Nodes: []policy.Node{node("a-0", 4, 0), node("b-0", 8, 4)}}
	s.Nodes[0].GPUModel, s.Nodes[1].GPUModel = "T4", "A100"
	j := queued("j", 0, 1, 6, 1)
	j.Speedup = []float64{1, 2, 3, 4, 5, 6}
	s.Jobs = []policy.Job{j}
	p := plan(t, builtin.NewGoodputUnaware(), s)
	must.Eq(t, 1, len(modelsOf(s, p.Target(&s.Jobs[0]))), must.Sprintf("%v %v", p.Target(&s.Jobs[0]), p.Reasons))
	must.Eq(t, 4, p.Target(&s.Jobs[0]).Total())
}

// TestGoodputUnaware_PolluxRestartPenalty: over goodput, the unaware
// baseline charges Pollux's 30 s restart penalty, as Sia's Pollux does,
// unless configured off; over goodput-jct it has none (restart_cost is
// that base's price).
func TestGoodputUnaware_PolluxRestartPenalty(t *testing.T) {
	snap := func() *policy.Snapshot {
		return &policy.Snapshot{Now: at(100), Nodes: []policy.Node{node("n1", 4, 0)}, Jobs: givesUp(3)}
	}
	kept := map[string]A{"a": {"n1": 4}}
	moved := map[string]A{"a": {"n1": 1}, "b": {"n1": 3}}
	for _, tc := range []struct {
		config map[string]string
		want   map[string]A
	}{
		{nil, kept},
		{map[string]string{"stickiness": "0.1"}, kept},
		{map[string]string{"restart_penalty": "0s"}, moved},
		{map[string]string{"base": builtin.GoodputJCTName, "restart_cost": "0s"}, moved},
	} {
		p := builtin.NewGoodputUnaware()
		if tc.config != nil {
			must.NoError(t, p.SetConfig(tc.config))
		}
		s := snap()
		must.Eq(t, tc.want, targets(s, plan(t, p, s)), must.Sprintf("config %v", tc.config))
	}
}

// TestGoodputHetero_FairnessConfig: fairness is a number in [-4, 0]; 0
// turns Sia's utility off.
func TestGoodputHetero_FairnessConfig(t *testing.T) {
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"-0.5", true}, {"0", true}, {"-4", true}, {"0.5", false}, {"-5", false}, {"NaN", false}} {
		err := builtin.NewGoodputHetero().SetConfig(map[string]string{"fairness": tc.value})
		if tc.ok {
			must.NoError(t, err, must.Sprint(tc.value))
		} else {
			must.ErrorContains(t, err, "fairness", must.Sprint(tc.value))
		}
	}
	// Either way a plan on two models keeps each job on one.
	for _, v := range []string{"0", "-0.5"} {
		p := builtin.NewGoodputHetero()
		must.NoError(t, p.SetConfig(map[string]string{"fairness": v}))
		s := heteroPair(3, 0)
		must.Eq(t, policy.Allocation{"fast-0": 4}, plan(t, p, s).Target(&s.Jobs[0]).Clone())
	}
}

// TestGoodputHetero_PriceExponent: a queued job's GPU model is the one of
// greatest one-GPU goodput over price^price_exponent. Job a runs twice as
// fast on an A100 as on a T4, job b ten times, so an A100 costs six T4s
// (the mean of 2 and 10): by comparative advantage (1, the default) a
// starts on the T4, by speed alone (0) on the A100, and with 0.5 (2 / 6^0.5
// < 1) still on the T4. b takes the A100 every time.
func TestGoodputHetero_PriceExponent(t *testing.T) {
	for _, tc := range []struct {
		config map[string]string
		a      string // a's node
	}{
		{nil, "slow-0"},
		{map[string]string{"price_exponent": "1"}, "slow-0"},
		{map[string]string{"price_exponent": "0.5"}, "slow-0"},
		{map[string]string{"price_exponent": "0"}, "fast-0"},
	} {
		a, b := queued("a", 0, 1, 1, 1), queued("b", 0, 1, 1, 1)
		a.ByModel = map[string][]float64{"T4": {1}, "A100": {2}}
		b.ByModel = map[string][]float64{"T4": {1}, "A100": {10}}
		s := slowFast(60, 4, a, b)
		p := builtin.NewGoodputHetero()
		must.NoError(t, p.SetConfig(tc.config))
		out := plan(t, p, s)
		why := must.Sprintf("config %v: %v", tc.config, out.Reasons)
		must.Eq(t, policy.Allocation{tc.a: 1}, out.Target(&s.Jobs[0]).Clone(), why)
		must.Eq(t, policy.Allocation{"fast-0": 1}, out.Target(&s.Jobs[1]).Clone(), why)
	}
	for _, tc := range []struct {
		value string
		ok    bool
	}{{"0", true}, {"0.5", true}, {"1", true}, {"-0.1", false}, {"1.5", false}, {"NaN", false}, {"x", false}} {
		err := builtin.NewGoodputHetero().SetConfig(map[string]string{"price_exponent": tc.value})
		if tc.ok {
			must.NoError(t, err, must.Sprint(tc.value))
		} else {
			must.ErrorContains(t, err, "price_exponent", must.Sprint(tc.value))
		}
	}
}
