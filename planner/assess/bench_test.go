package assess

import (
	"math/rand/v2"
	"testing"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// 200 observations at 1, 2, 4 and 8 GPUs.
func BenchmarkChooseGPUs(b *testing.B) {
	obs := observe(200, 0.15, []int{1, 2, 4, 8}, 50, 0.02, 1)
	b.ReportAllocs()
	for b.Loop() {
		if ChooseGPUs(obs, Counts{Min: 1, Max: 16, PerWorker: 1}, 0).GPUs != 3 {
			b.Fatal("wrong count")
		}
	}
}

// A full history (structs.MaxProgressHistory = 200 reports), every one
// with the metric.
func BenchmarkToGoal(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	h, _ := train("accuracy", acc, phase{n: structs.MaxProgressHistory - 1, dt: 60, rate: 500, batch: 32, ws: 1})
	for i := range h {
		h[i].Metric.Value += 0.004 * rng.NormFloat64()
	}
	b.ReportAllocs()
	for b.Loop() {
		if ToGoal(h, Goal{Metric: "accuracy", Value: 0.93}).Status != Estimated {
			b.Fatal("no estimate")
		}
	}
}
