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

// keepView records what j's plan, which read r, read of free: the points
// from lo to hi as they are (a copy; sameView compares what the plan saw
// of them, seen, only where they differ).
func (j *efJob) keepView(free timeline, r readSet, now int64) {
	j.read, j.valued = r, true
	j.view = j.view[:0]
	if r.lo <= r.hi {
		lo := searchT(free, r.lo)
		hi := lo + searchT(free[lo:], r.hi)
		if hi < len(free) && free[hi].T == r.hi {
			hi++
		}
		j.view = append(j.view, free[lo:hi]...)
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
		if n == len(j.view) || (j.view[n] != pt && j.seen(j.view[n]) != j.seen(pt)) {
			return false
		}
		n++
	}
}

// freeDiff is how the free GPUs changed at allocateFree's last grow step,
// round (counted over the whole replay), as functions of time from the
// event on: by d on each [from, to) of changes (to math.MaxInt64 if open),
// nothing elsewhere. ok is false when either timeline does not start at
// the event (then the change is not known and views are walked).
type freeDiff struct {
	round   int
	ok      bool
	changes []freeChange
}

type freeChange struct {
	from, to int64
	d        int
}

// set records the change from old to cur, the free GPUs before and after
// a grow step at now, as round's.
func (fd *freeDiff) set(old, cur timeline, now int64) {
	fd.round++
	fd.changes = fd.changes[:0]
	fd.ok = len(old) > 0 && len(cur) > 0 && old[0].T == now && cur[0].T == now
	if !fd.ok {
		return
	}
	i, k, vo, vc := 0, 0, 0, 0
	for i < len(old) || k < len(cur) {
		t := int64(math.MaxInt64)
		if i < len(old) {
			t = old[i].T
		}
		if k < len(cur) {
			t = min(t, cur[k].T)
		}
		if i < len(old) && old[i].T == t {
			vo = old[i].V
			i++
		}
		if k < len(cur) && cur[k].T == t {
			vc = cur[k].V
			k++
		}
		// The change from t on: the open run goes on if it is the same,
		// else it ends at t and a new one starts unless it is none.
		d := vc - vo
		if n := len(fd.changes); n > 0 && fd.changes[n-1].to == math.MaxInt64 {
			if fd.changes[n-1].d == d {
				continue
			}
			fd.changes[n-1].to = t
		}
		if d != 0 {
			fd.changes = append(fd.changes, freeChange{t, math.MaxInt64, d})
		}
	}
}

// at is the change at t.
func (fd *freeDiff) at(t int64) int {
	for _, c := range fd.changes {
		if c.from > t {
			break
		}
		if t < c.to {
			return c.d
		}
	}
	return 0
}

// constOn says whether the change is the same at every time from a to b
// (inclusive; b may be math.MaxInt64): no run of changes starts or ends
// after a and by b.
func (fd *freeDiff) constOn(a, b int64) bool {
	for _, c := range fd.changes {
		if c.from > b {
			break
		}
		if c.from > a || (c.to > a && c.to <= b && c.to != math.MaxInt64) {
			return false
		}
	}
	return true
}

// zeroOn says whether nothing changed from a to b (inclusive).
func (fd *freeDiff) zeroOn(a, b int64) bool {
	for _, c := range fd.changes {
		if c.from > b {
			break
		}
		if c.to > a {
			return false
		}
	}
	return true
}

// viewKept says, without walking them, that the free GPUs without j still
// offer j what its last plan read (sameView), given fd, their change since
// j's view last held (the step before): a sufficient condition, not a
// necessary one (on false, marginal walks them).
//
// From now on the free GPUs without j are a step function F (the free GPUs
// plus j's GPUs before its end, freeWalk), and what sameView compares are
// F's change points after now (the walk's points, merged): the first, f1,
// and those from lo to hi with the level each offers. fd changes F as it
// changes the free GPUs. So the view holds if fd is the same over [now,
// f1) (no change point before f1; F's value there, before, moves by that
// much) and does not cancel F's step at f1 (F's values on either side are
// kept, in before and atF1), and changes nothing from lo to hi (and, if lo
// is after f1, at the time before lo: the step into lo).
func (j *efJob) viewKept(fd *freeDiff, now int64) bool {
	if !fd.ok || j.viewRound != fd.round-1 {
		return false
	}
	f1 := j.read.f1
	if f1 == math.MaxInt64 {
		if len(j.view) > 0 || !fd.constOn(now, math.MaxInt64) {
			return false
		}
		j.viewRound = fd.round
		return true
	}
	if !fd.constOn(now, f1-1) {
		return false
	}
	d0, d1 := fd.at(now), fd.at(f1)
	if j.atF1+d1 == j.before+d0 {
		return false
	}
	if lo, hi := j.read.lo, j.read.hi; lo <= hi {
		switch {
		case lo <= now:
			lo = now
		case lo > f1:
			lo--
		}
		if !fd.zeroOn(lo, hi) {
			return false
		}
	}
	j.before, j.atF1 = j.before+d0, j.atF1+d1
	j.viewRound = fd.round
	return true
}

// keepSteps records F's values either side of its first change point
// after now (see viewKept) from out, F's merged points, and that the view
// holds at round.
func (j *efJob) keepSteps(out timeline, now int64, round int) {
	i := 0
	for i < len(out) && out[i].T <= now {
		i++
	}
	// A merged timeline starts from -1: a first value of -1 has no point.
	j.before, j.atF1 = -1, 0
	if i > 0 {
		j.before = out[i-1].V
	}
	if i < len(out) {
		j.atF1 = out[i].V
	}
	j.viewRound = round
}
