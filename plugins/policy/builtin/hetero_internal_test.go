package builtin

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// heteroPools.value keeps its answers (vals, lin): they are the utility
// computed afresh, on random tables (some with zeros, some jobs linear or
// with a speedup table only, some sharing a map), every fairness, any
// model, counts past the tables' ends, asked in any order.
func TestHeteroValue_CachedIsComputed(t *testing.T) {
	models := []string{"A100", "T4", "V100"}
	nodeModel := map[string]string{}
	s := &policy.Snapshot{}
	for i, m := range models {
		id := fmt.Sprintf("n%d", i)
		s.Nodes = append(s.Nodes, policy.Node{ID: id, GPUs: 8, GPUModel: m})
		nodeModel[id] = m
	}
	r := rand.New(rand.NewPCG(29, 1))
	table := func() []float64 {
		tab := make([]float64, 1+r.IntN(12))
		for g := range tab {
			tab[g] = float64(r.IntN(3)) * r.Float64() * float64(g+1)
		}
		return tab
	}
	shared := map[string][]float64{"A100": table(), "T4": table()}
	var jobs []*policy.Job
	for i := range 60 {
		job := &policy.Job{ID: fmt.Sprintf("j%d", i), GPUs: policy.GPURequest{Min: 1, Max: 16, PerWorker: 1}}
		switch r.IntN(4) {
		case 0:
			job.ByModel = shared
		case 1:
			job.ByModel = map[string][]float64{}
			for _, m := range models {
				if r.IntN(3) != 0 {
					job.ByModel[m] = table()
				}
			}
		case 2:
			job.Speedup = table()
		}
		if r.IntN(5) == 0 {
			job.Constraints.GPUModel = models[r.IntN(len(models))]
		}
		jobs = append(jobs, job)
	}
	for _, fair := range []float64{-0.5, -4, -0.01, 0} {
		hp := newHeteroPools(jobs, models, nodeModel, s, DefaultGoodputHeteroPriceExponent)
		hp.fair = fair
		for range 5000 {
			j := int32(r.IntN(len(jobs)))
			hp.pool[j] = int8(r.IntN(len(models)+1) - 1)
			n := 1 + r.IntN(20)
			want := hp.speedup(j, n)
			if fair < 0 && want > 0 {
				want = heteroLambda - math.Pow(want, fair)
			}
			must.Eq(t, math.Float64bits(want), math.Float64bits(hp.value(j, n)),
				must.Sprintf("fairness %v, job %d on %d, %d GPUs", fair, j, hp.pool[j], n))
		}
	}
}
