package builtin_test

import (
	"context"
	"slices"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
	"github.com/shoenig/test/must"
)

// BenchmarkPlan is one planning round with 10,000 queued jobs (sizes 1..16,
// half with a range) on an idle cluster of 1,000 nodes x 8 GPUs.
func BenchmarkPlan(b *testing.B) {
	benchPolicies(b, benchSnapshot(1000, 10000))
}

// BenchmarkPlanBusy is the round after: the first round's plan carried out
// (the cluster full of running jobs), and 10,000 more jobs queued, so
// elastic-fifo also shrinks to admit.
func BenchmarkPlanBusy(b *testing.B) {
	first := benchSnapshot(1000, 10000)
	p, err := builtin.NewElasticFIFO().Plan(context.Background(), first)
	must.NoError(b, err)
	s := first.Apply(p, first.Now)
	more := benchSnapshot(1000, 10000)
	for _, j := range more.Jobs {
		j.ID = "late-" + j.ID
		j.Submitted = j.Submitted.Add(more.Now.Sub(t0))
		s.Jobs = append(s.Jobs, j)
	}
	s.Jobs = slices.Clip(s.Jobs)
	benchPolicies(b, s)
}

func benchPolicies(b *testing.B, s *policy.Snapshot) {
	for _, name := range []string{builtin.FIFOName, builtin.ElasticFIFOName, builtin.RoundRobinName, builtin.EDFName, builtin.QoEName} {
		b.Run(name, func(b *testing.B) {
			p := host.Builtins()[name]()
			ctx := context.Background()
			b.ReportAllocs()
			var plan *policy.Plan
			for b.Loop() {
				var err error
				plan, err = p.Plan(ctx, s)
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			must.NoError(b, policy.Validate(s, plan))
			c := plan.Diff(s)
			b.ReportMetric(float64(len(c.Starts)), "starts")
			b.ReportMetric(float64(len(c.Grows)+len(c.Shrinks)), "resizes")
		})
	}
}

// BenchmarkValidate checks the elastic-fifo plan of BenchmarkPlan.
func BenchmarkValidate(b *testing.B) {
	s := benchSnapshot(1000, 10000)
	p, err := builtin.NewElasticFIFO().Plan(context.Background(), s)
	must.NoError(b, err)
	b.ReportAllocs()
	for b.Loop() {
		if err := policy.Validate(s, p); err != nil {
			b.Fatal(err)
		}
	}
}
