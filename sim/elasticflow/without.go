package elasticflow

import "math"

// freeWalk builds the free GPUs as they would be without a job's plan,
// merged, as far as it is asked to (marginal compares what a plan read
// before making the rest): get_marginal's copy of the free GPUs
// (scheduler.py) with a point added at the job's end and at each of its
// allocation's times, and the job's GPUs given back before its end. It
// walks the union of those times once: a point the free GPUs have keeps
// its value, the end's new point takes the value before it (0 if none),
// an allocation time's new point the value of the point before it before
// any GPUs were given back (the cluster if none); then a point before the
// end gets the job's GPUs there. The timeline it returns is its scratch,
// which the next start reuses.
type freeWalk struct {
	free, alloc timeline
	end         int64
	n           int
	fi, ai      int
	endDone     bool
	gpus        int  // the job's allocation in force
	raw         int  // the last point's value before the job's GPUs
	some        bool // a point was walked
	out         timeline
}

// start walks the free GPUs without j's plan from the beginning.
func (w *freeWalk) start(j *efJob, free timeline, n int) *freeWalk {
	*w = freeWalk{free: free, alloc: j.alloc, end: j.end, n: n, out: w.out[:0]}
	return w
}

// to walks on to until and returns the timeline up to it.
func (w *freeWalk) to(until int64) timeline {
	for w.step(until) {
	}
	return w.out
}

// past walks on to until and on to the timeline's first point after it
// (if any), and returns the timeline up to there.
func (w *freeWalk) past(until int64) timeline {
	w.to(until)
	for (len(w.out) == 0 || w.out[len(w.out)-1].T <= until) && w.step(math.MaxInt64) {
	}
	return w.out
}

// step walks the next time if it is at or before until; false if there
// is none.
func (w *freeWalk) step(until int64) bool {
	if w.fi < len(w.free) || w.ai < len(w.alloc) || !w.endDone {
		t := int64(math.MaxInt64)
		if w.fi < len(w.free) {
			t = w.free[w.fi].T
		}
		if w.ai < len(w.alloc) {
			t = min(t, w.alloc[w.ai].T)
		}
		if !w.endDone {
			t = min(t, w.end)
		}
		if t > until {
			return false
		}
		var v int
		switch {
		case w.fi < len(w.free) && w.free[w.fi].T == t:
			v = w.free[w.fi].V
			w.fi++
		case !w.endDone && w.end == t:
			if w.fi > 0 {
				v = w.free[w.fi-1].V
			}
		case w.some:
			v = w.raw
		default:
			v = w.n
		}
		w.raw, w.some = v, true
		if w.ai < len(w.alloc) && w.alloc[w.ai].T == t {
			w.gpus = w.alloc[w.ai].V
			w.ai++
		}
		if w.end == t {
			w.endDone = true
		}
		if t < w.end {
			v += w.gpus
		}
		// Merged as merged does: a point repeating the last kept value
		// goes (and a first point of -1, as its start value has it).
		last := -1
		if len(w.out) > 0 {
			last = w.out[len(w.out)-1].V
		}
		if v != last {
			w.out = append(w.out, point{t, v})
		}
		return true
	}
	return false
}
