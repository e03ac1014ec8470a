package elasticflow

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// freeWithoutByOps is get_marginal's construction as ElasticFlow writes it
// (scheduler.py): copy the free GPUs, add a point at the job's end (the
// value before it), a point at each of its allocation's times (the value
// in force there), and add the job's GPUs back at every point before its
// end, allocation time by allocation time; then merge.
func freeWithoutByOps(free timeline, alloc timeline, end int64, n int) timeline {
	tmp := slices.Clone(free)
	if !tmp.has(end) {
		v, _ := tmp.before(end)
		tmp.set(end, v)
	}
	last := 0
	for _, a := range alloc {
		if !tmp.has(a.T) {
			tmp.set(a.T, tmp.at(a.T, n))
		}
		i, _ := tmp.find(a.T)
		for ; i < len(tmp) && tmp[i].T < end; i++ {
			tmp[i].V += a.V - last
		}
		last = a.V
	}
	return tmp.merged()
}

func randomTimeline(r *rand.Rand, n int) timeline {
	var tl timeline
	t := int64(r.IntN(3)) * 60
	for range r.IntN(8) {
		tl = append(tl, point{t, r.IntN(n+3) - 2}) // negative too, as a plan may leave them
		t += int64(1+r.IntN(3)) * 60
	}
	return tl
}

// freeWalk's one pass builds what the construction by operations
// builds, on random timelines (ends and allocation times on and off the
// free GPUs' points, before, among and after them).
func TestFreeWalk_AsByOps(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 16
	var w freeWalk
	for i := range 20000 {
		free := randomTimeline(r, n)
		j := &efJob{alloc: randomTimeline(r, 8).merged(), end: int64(r.IntN(12)) * 60}
		want := freeWithoutByOps(free, j.alloc, j.end, n)
		got := w.start(j, free, n).to(math.MaxInt64)
		if !slices.Equal(want, got) {
			t.Fatalf("case %d: free %v alloc %v end %d: got %v, want %v", i, free, j.alloc, j.end, got, want)
		}
		// In two steps: the first up to until, then the rest.
		until := int64(r.IntN(12)) * 60
		k, _ := want.find(until + 1)
		w.start(j, free, n)
		if got := w.to(until); !slices.Equal(want[:k], got) {
			t.Fatalf("case %d: until %d: got %v, want %v", i, until, got, want[:k])
		}
		if got := w.to(math.MaxInt64); !slices.Equal(want, got) {
			t.Fatalf("case %d: after until %d: got %v, want %v", i, until, got, want)
		}
		// Jumping to until from the start, or from the first point: the
		// points from until on are as walked.
		for _, first := range []bool{false, true} {
			w.start(j, free, n)
			if first {
				t0 := j.end
				if len(free) > 0 {
					t0 = min(t0, free[0].T)
				}
				if len(j.alloc) > 0 {
					t0 = min(t0, j.alloc[0].T)
				}
				if t0 >= until {
					continue
				}
				w.step(math.MaxInt64)
			}
			at := len(w.out)
			w.jump(until)
			got := w.to(math.MaxInt64)[at:]
			k, _ := want.find(until)
			if !slices.Equal(want[k:], got) {
				t.Fatalf("case %d: free %v alloc %v end %d: jump to %d (first %v): got %v, want %v", i, free, j.alloc, j.end, until, first, got, want[k:])
			}
		}
		// Past until: up to the first point after it.
		k, _ = want.find(until + 1)
		w.start(j, free, n)
		if got := w.past(until); !slices.Equal(want[:min(k+1, len(want))], got) {
			t.Fatalf("case %d: past %d: got %v, want %v", i, until, got, want[:min(k+1, len(want))])
		}
	}
}

// The one-pass timeline helpers give what the operations they replace give.
func TestTimeline_OnePassAsByOps(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 20000 {
		tl, ref := randomTimeline(r, 8), randomTimeline(r, 8)
		end := int64(r.IntN(12)) * 60
		if got, want := tl.mergedGPUTime(end), tl.merged().gpuTime(end); got != want {
			t.Fatalf("case %d: mergedGPUTime(%v, %d) = %v, want %v", i, tl, end, got, want)
		}
		want := slices.Clone(tl)
		for _, p := range ref {
			want.setDefault(p.T, 0)
		}
		var buf timeline
		if got := slices.Clone(tl).withZeros(ref, &buf); !slices.Equal(got, want) {
			t.Fatalf("case %d: %v withZeros %v = %v, want %v", i, tl, ref, got, want)
		}
		// setFrom at increasing times from one cursor is set at each.
		got, want, c := slices.Clone(tl), slices.Clone(tl), 0
		for _, p := range ref {
			got.setFrom(&c, p.T, p.V+100)
			want.set(p.T, p.V+100)
		}
		if !slices.Equal(got, want) {
			t.Fatalf("case %d: setFrom %v on %v = %v, want %v", i, ref, tl, got, want)
		}
	}
}
