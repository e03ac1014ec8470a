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
	last        int  // the last point's value kept (-1 none yet)
	// out is the timeline walked, less what jump skipped if jumped.
	out    timeline
	jumped bool
}

// start walks the free GPUs without j's plan from the beginning.
func (w *freeWalk) start(j *efJob, free timeline, n int) *freeWalk {
	*w = freeWalk{free: free, alloc: j.alloc, end: j.end, n: n, last: -1, out: w.out[:0]}
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
		if v != w.last {
			w.out = append(w.out, point{t, v})
			w.last = v
		}
		return true
	}
	return false
}

// jump moves the walk on to the first time at or after to, which it has
// not reached, without walking the times before it: out then lacks their
// points (jumped), and the walk goes on from to as if it had walked them.
// The state at to is the last time before it: its value before the job's
// GPUs is the free GPUs' there, or for the end's point the free GPUs'
// before it (0 if none), or for an allocation time's the value of the time
// before it (the cluster if none); its value kept is that plus the job's
// GPUs in force if it is before the end.
func (w *freeWalk) jump(to int64) {
	fi := w.fi + searchT(w.free[w.fi:], to)
	ai := w.ai + searchT(w.alloc[w.ai:], to)
	endDone := w.endDone || w.end < to
	if fi == w.fi && ai == w.ai && endDone == w.endDone {
		return
	}
	if ai > 0 {
		w.gpus = w.alloc[ai-1].V
	}
	w.fi, w.ai, w.endDone, w.jumped = fi, ai, endDone, true
	// The last time before to, and its value before the job's GPUs,
	// found from the latest back (allocation times take the value before).
	fk, ak, endIn := fi, ai, endDone
	last := int64(math.MinInt64)
	for {
		tf, ta, te := int64(math.MinInt64), int64(math.MinInt64), int64(math.MinInt64)
		if fk > 0 {
			tf = w.free[fk-1].T
		}
		if ak > 0 {
			ta = w.alloc[ak-1].T
		}
		if endIn {
			te = w.end
		}
		t := max(tf, ta, te)
		if last == math.MinInt64 {
			last = t
		}
		if t == math.MinInt64 { // only allocation times before
			w.raw = w.n
			break
		}
		if t == tf {
			w.raw = w.free[fk-1].V
			break
		}
		if t == te {
			w.raw = 0
			if fk > 0 {
				w.raw = w.free[fk-1].V
			}
			break
		}
		ak--
	}
	w.some = true
	w.last = w.raw
	if last < w.end {
		w.last += w.gpus
	}
}

// searchT is the index of tl's first point at or after t.
func searchT(tl timeline, t int64) int {
	i, _ := tl.find(t)
	return i
}
