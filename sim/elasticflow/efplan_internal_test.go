package elasticflow

import (
	"slices"
	"testing"
)

// A job past its deadline is planned from now with the largest level the
// GPUs free now allow (ElasticFlow's "allocate from ddl": its aligned
// deadline lies before now, so its first period, from now to now, is
// empty and holds nothing). Here 56 of 64 GPUs are free until 60 s: the
// job takes 32 (not 16, what 56 - 32 would leave), finishes its 100
// iterations at 10 iterations a second on 32 GPUs in 10 s, and leaves 24
// free until its slot-aligned end.
func TestPlan_LateJobTakesTheLevelFreeNow(t *testing.T) {
	p := &efPolicy{n: 64}
	rates := []float64{1, 2, 3, 5, 7, 10, 11} // 1, 2, ..., 64 GPUs
	j := &efJob{job: &job{Job: &Job{ID: "late", Submit: 0, Deadline: 911}, iterLeft: 100}, maxGPU: 64, rates: rates, top: 64}
	j.best = slices.Clone(rates)
	now := int64(1000)
	free := timeline{{now, 56}, {now + 60, 64}}

	out := p.plan(j, now, free, 0, true)

	if want := (timeline{{now, 32}}); !slices.Equal(out.alloc, want) {
		t.Fatalf("alloc %v, want %v", out.alloc, want)
	}
	if out.realEnd != now+10 || out.end != now+60 || out.ok {
		t.Fatalf("real end %d, end %d, ok %t; want %d, %d, false", out.realEnd, out.end, out.ok, now+10, now+60)
	}
	if want := (timeline{{now, 24}, {now + 60, 64}}); !slices.Equal(out.free, want) {
		t.Fatalf("free after %v, want %v", out.free, want)
	}
}
