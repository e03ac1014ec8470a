package sim_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/schedulearn/schedulearn/sim"
)

// phillyLike returns n rigid jobs drawn like the Philly trace's: GPU
// counts with its frequencies, log-normal run times with its median of
// 1,144 s (capped at a day), Poisson arrivals offering load of the given
// fraction of gpus.
func phillyLike(n, gpus int, load float64) []sim.JobSpec {
	r := rand.New(rand.NewPCG(1, 2))
	sizes := []struct {
		gpus int
		jobs int
	}{{1, 76627}, {2, 1818}, {4, 1870}, {8, 1643}, {16, 199}, {32, 67}, {64, 6}}
	total := 0
	for _, s := range sizes {
		total += s.jobs
	}
	durations := make([]float64, n)
	counts := make([]int, n)
	mean := 0.0
	for i := range n {
		k := r.IntN(total)
		for _, s := range sizes {
			if k < s.jobs {
				counts[i] = s.gpus
				break
			}
			k -= s.jobs
		}
		durations[i] = min(86400, math.Exp(math.Log(1144)+1.8*r.NormFloat64()))
		mean += durations[i] * float64(counts[i]) / float64(n)
	}
	gap := mean / (load * float64(gpus)) // seconds between arrivals
	specs := make([]sim.JobSpec, n)
	t := 0.0
	for i := range n {
		t += r.ExpFloat64() * gap
		w := min(counts[i], 8)
		specs[i] = sim.JobSpec{ID: fmt.Sprintf("job-%05d", i), Submit: t,
			GPUs:  policy.GPURequest{Min: counts[i], Max: counts[i], PerWorker: w},
			Model: &sim.Rigid{Duration: durations[i], GPUs: counts[i]}, Kind: "rigid"}
	}
	return specs
}

// BenchmarkReplay replays 5,000 Philly-like jobs on 64 x 8 GPUs at 70%
// offered load, once per policy.
func BenchmarkReplay(b *testing.B) {
	specs := phillyLike(5000, 512, 0.7)
	benchReplay(b, specs, 64, 8)
}

// BenchmarkReplayPhilly replays 5,000 jobs of the real Philly trace (the
// 40,000th to the 45,000th submission, about 6 days of arrivals) on 64 x 8
// GPUs.
func BenchmarkReplayPhilly(b *testing.B) {
	needTraces(b)
	tr, err := sim.LoadTrace(filepath.Join(sharedTraces, "philly", "philly.csv"), "", "")
	if err != nil {
		b.Fatal(err)
	}
	tr.Jobs = tr.Jobs[40_000:45_000]
	specs, _ := tr.Specs(sim.JobOptions{GPUsPerNode: 8, ClusterGPUs: 512})
	benchReplay(b, specs, 64, 8)
}

func benchReplay(b *testing.B, specs []sim.JobSpec, nodes, gpus int) {
	for _, name := range []string{builtin.FIFOName, builtin.ElasticFIFOName, builtin.TiresiasName, builtin.GoodputName} {
		b.Run(name, func(b *testing.B) {
			cfg := config(nodes, gpus)
			cfg.Gantt = false
			var r *sim.Result
			for b.Loop() {
				var err error
				r, err = sim.Run(context.Background(), cfg, t0, specs, host.Builtins()[name]())
				if err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(r.Rounds), "rounds")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(r.Rounds)/1e3, "µs/round")
			b.ReportMetric(r.JCT.Mean, "avgJCT_s")
		})
	}
}
