package elasticflow

import "math"

// readSet is what a valuation's plan (plan with assign > 0) read of the
// free GPUs it was given: the time of their first point after start (f1,
// math.MaxInt64 if none), and their points from lo to hi, each point's
// time and, at each, the level the job could take there up to cap
// (min(lastLevel(V+1), cap): the plan reads a point's value only as
// min(level, lastLevel(V+1)) for the levels up to the one it settles on;
// uncapped when no level meets the deadline). Given the same job state, a
// plan given free GPUs that agree with these gives the same allocation and
// end.
type readSet struct {
	f1, lo, hi int64
	cap        int
}

// seen is what j's plan saw of a point of the free GPUs at or after lo.
func (j *efJob) seen(pt point) point {
	return point{pt.T, min(j.lastLevel(pt.V+1), j.read.cap)}
}

// keepView records what j's plan, which read r, read of free.
func (j *efJob) keepView(free timeline, r readSet, now int64) {
	j.read, j.valued = r, true
	j.view = j.view[:0]
	for _, pt := range free {
		if pt.T > r.hi {
			break
		}
		if pt.T >= r.lo {
			j.view = append(j.view, j.seen(pt))
		}
	}
}

// sameView says whether the free GPUs w walks offer j what its last plan
// read, walking them only as far as needed (on a difference, no further),
// and jumping from their first point after now to the first j's plan read
// the level at (so that out may lack points: w.jumped).
func (j *efJob) sameView(w *freeWalk, now int64) bool {
	i := 0
	for ; ; i++ {
		for len(w.out) == i && w.step(math.MaxInt64) {
		}
		if len(w.out) == i { // no point after now
			return j.read.f1 == math.MaxInt64 && len(j.view) == 0
		}
		if w.out[i].T > now {
			break
		}
	}
	if w.out[i].T != j.read.f1 {
		return false
	}
	if j.read.lo > w.out[i].T {
		w.jump(j.read.lo)
		i = len(w.out)
	}
	for n := 0; ; i++ {
		for len(w.out) == i && w.step(j.read.hi) {
		}
		if len(w.out) == i {
			return n == len(j.view)
		}
		pt := w.out[i]
		if pt.T < j.read.lo {
			continue
		}
		if n == len(j.view) || j.view[n] != j.seen(pt) {
			return false
		}
		n++
	}
}
