package builtin_test

import (
	"context"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/internal/policytest"
	"github.com/shoenig/test/must"
)

// heteroBench returns a busy cluster of nodes x 8 GPUs of three models (a
// third each) with jobs/2 jobs placed by a first goodput-hetero round and
// jobs/2 more queued, every job with goodput by model: five shared
// profiles, as the simulator's jobs of one application share theirs.
func heteroBench(b testing.TB, nodes, jobs int) *policy.Snapshot {
	models := []string{"T4", "RTX", "A100"}
	var profiles []map[string][]float64
	for k := range 5 {
		p := map[string][]float64{}
		for m, name := range models {
			base := 1 + float64(m)*(0.5+0.4*float64(k))
			tab := make([]float64, 64)
			for g := range tab {
				tab[g] = base * float64(g+1) / (1 + 0.02*float64(k+1)*float64(g))
			}
			p[name] = tab
		}
		profiles = append(profiles, p)
	}
	snap := func(n int) *policy.Snapshot {
		s := benchSnapshot(nodes, n)
		for i := range s.Nodes {
			s.Nodes[i].GPUModel = models[i*3/len(s.Nodes)]
		}
		for i := range s.Jobs {
			s.Jobs[i].ByModel = profiles[i%len(profiles)]
		}
		return s
	}
	first := snap(jobs / 2)
	p, err := builtin.NewGoodputHetero().Plan(context.Background(), first)
	must.NoError(b, err)
	s := first.Apply(p, first.Now)
	more := snap(jobs / 2)
	for _, j := range more.Jobs {
		j.ID = "late-" + j.ID
		j.Submitted = j.Submitted.Add(more.Now.Sub(t0))
		s.Jobs = append(s.Jobs, j)
	}
	s.Jobs = slices.Clip(s.Jobs)
	return policytest.Vouched(s)
}

// afterRounds returns snapshot s after n goodput-hetero rounds a minute
// apart, each plan carried out and each job's attained service grown by
// its GPUs, vouched: the cluster some rounds after a burst of arrivals,
// where the jobs run at the counts the policy gave them.
func afterRounds(b testing.TB, s *policy.Snapshot, n int) *policy.Snapshot {
	p := builtin.NewGoodputHetero()
	for range n {
		plan, err := p.Plan(context.Background(), s)
		must.NoError(b, err)
		next := s.Apply(plan, s.Now.Add(time.Minute))
		for i := range next.Jobs {
			j := &next.Jobs[i]
			j.AttainedGPUSeconds += 60 * float64(j.Allocation.Total())
		}
		s = policytest.Vouched(next)
	}
	return s
}

// BenchmarkGoodputHetero is one goodput-hetero round on a busy cluster of
// three GPU models, vouched as the planner's snapshots are, and a check
// that no job mixes models: the round of a burst (half the jobs queued at
// once), and at 100k the tenth round after it (the cluster full, the
// queue long, a few hundred changes a round). The figures are in
// docs/sim/hetero/README.md.
func BenchmarkGoodputHetero(b *testing.B) {
	for _, size := range []struct {
		name        string
		nodes, jobs int
		after       int // rounds after the burst
	}{{"10k_jobs_1k_nodes", 1000, 10_000, 0}, {"100k_jobs_10k_nodes", 10_000, 100_000, 0}, {"100k_jobs_10k_nodes_10th_round", 10_000, 100_000, 10}} {
		b.Run(size.name, func(b *testing.B) {
			s := afterRounds(b, heteroBench(b, size.nodes, size.jobs), size.after)
			p := builtin.NewGoodputHetero()
			ctx := context.Background()
			b.ReportAllocs()
			var plan *policy.Plan
			cpu0 := cpuSeconds(b)
			for b.Loop() {
				var err error
				if plan, err = p.Plan(ctx, s); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			// The machines these run on are shared: CPU time (user and
			// system, the GC's included), not wall time, is the figure.
			b.ReportMetric((cpuSeconds(b)-cpu0)*1e3/float64(b.N), "cpu-ms/op")
			must.NoError(b, policy.Validate(s, plan))
			c := plan.Diff(s)
			b.ReportMetric(float64(len(c.Starts)), "starts")
			b.ReportMetric(float64(len(c.Grows)+len(c.Shrinks)+len(c.Moves)), "resizes")
		})
	}
}

// cpuSeconds is the CPU time (user and system) this process has used.
func cpuSeconds(b *testing.B) float64 {
	var ru syscall.Rusage
	must.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}
