package builtin_test

import (
	"context"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
)

// The steps counts and fill drop at once (dropDead, dropUnfit) are those
// they would drop one by one: on busy random clusters (one GPU model or
// three, speedup tables or goodput by model), over rounds, goodput,
// goodput-jct and goodput-hetero plan the same with a pass after every
// dropped step as with the default (at 600 jobs, no pass at all).
func TestDropDead_SamePlans(t *testing.T) {
	defer builtin.DropAtOnce(false)
	models := []string{"A100", "T4", "V100"}
	for seed := range uint64(6) {
		r := rand.New(rand.NewPCG(seed, 11))
		s := policytest.BenchSnapshot(40, 600)
		for i := range s.Nodes {
			if seed%2 == 1 {
				s.Nodes[i].GPUModel = models[i%3]
			}
		}
		for i := range s.Jobs {
			j := &s.Jobs[i]
			tab := func() []float64 {
				out := make([]float64, j.GPUs.Max)
				base := 0.5 + r.Float64()
				for g := range out {
					out[g] = base * float64(g+1) / (1 + 0.2*r.Float64()*float64(g))
				}
				return out
			}
			j.Speedup = tab()
			if seed%2 == 1 {
				j.ByModel = map[string][]float64{}
				for _, m := range models {
					j.ByModel[m] = tab()
				}
			}
		}
		for round := range 4 {
			for _, p := range []policy.Policy{builtin.NewGoodput(), builtin.NewGoodputJCT(), builtin.NewGoodputHetero()} {
				builtin.DropAtOnce(false)
				want, err := p.Plan(context.Background(), s)
				must.NoError(t, err)
				builtin.DropAtOnce(true)
				got, err := p.Plan(context.Background(), s)
				must.NoError(t, err)
				why := must.Sprintf("seed %d round %d %s", seed, round, p.PluginInfo().Name)
				must.Eq(t, want.Allocations, got.Allocations, why)
				must.Eq(t, want.Reasons, got.Reasons, why)
			}
			builtin.DropAtOnce(false)
			s = afterRounds(t, s, 1)
		}
	}
}
