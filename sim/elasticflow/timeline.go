package elasticflow

import "slices"

// A timeline is a step function of time: at each point's T the value
// becomes V, until the next point. ElasticFlow keeps its plans this way
// (scheduler.py: CLUSTER.future_free_gpus, the free GPUs from each time
// on; a job's 'allocations', its GPUs from each time on), as ordered
// dicts whose keys are the only times a plan may change.
//
// The points matter, not only the function: ElasticFlow's planner
// (ef_sim_allocation) walks the keys as periods, so a key that repeats its
// predecessor's value still splits a period. Points are kept in time
// order, one per time.
type timeline []point

type point struct {
	T int64
	V int
}

// find is the index of t's point, or where it would go, and whether it
// is there (a binary search, written out: the planner's hottest lookup).
func (tl timeline) find(t int64) (int, bool) {
	lo, hi := 0, len(tl)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if tl[m].T < t {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(tl) && tl[lo].T == t
}

func (tl timeline) has(t int64) bool { _, ok := tl.find(t); return ok }

// before is the value of the last point before t, and whether there is
// one.
func (tl timeline) before(t int64) (int, bool) {
	i, _ := tl.find(t)
	if i == 0 {
		return 0, false
	}
	return tl[i-1].V, true
}

// at is the value in force at t (the last point at or before it); def if
// there is none (utils.py's get_available_gpu gives the cluster's size).
func (tl timeline) at(t int64, def int) int {
	i, ok := tl.find(t)
	if ok {
		return tl[i].V
	}
	if i == 0 {
		return def
	}
	return tl[i-1].V
}

// set gives t the value v, adding its point if needed.
func (tl *timeline) set(t int64, v int) {
	i, ok := tl.find(t)
	if ok {
		(*tl)[i].V = v
		return
	}
	*tl = slices.Insert(*tl, i, point{t, v})
}

// add adds d to the value at t, giving t a point if it has none (with the
// value in force there, def if none): set(t, at(t, def)+d).
func (tl *timeline) add(t int64, d, def int) {
	i, ok := tl.find(t)
	if ok {
		(*tl)[i].V += d
		return
	}
	if i > 0 {
		def = (*tl)[i-1].V
	}
	*tl = slices.Insert(*tl, i, point{t, def + d})
}

// split gives t a point with the value before it (0 if none) unless it has
// one.
func (tl *timeline) split(t int64) {
	i, ok := tl.find(t)
	if ok {
		return
	}
	v := 0
	if i > 0 {
		v = (*tl)[i-1].V
	}
	*tl = slices.Insert(*tl, i, point{t, v})
}

// setDefault adds t with value v unless t has a point.
func (tl *timeline) setDefault(t int64, v int) {
	if i, ok := tl.find(t); !ok {
		*tl = slices.Insert(*tl, i, point{t, v})
	}
}

// setFrom is set for a t after every point before *c, searching from *c
// on and leaving it at t's point: a pass that sets times in order walks the
// timeline once.
func (tl *timeline) setFrom(c *int, t int64, v int) {
	for *c < len(*tl) && (*tl)[*c].T < t {
		*c++
	}
	if *c < len(*tl) && (*tl)[*c].T == t {
		(*tl)[*c].V = v
		return
	}
	*tl = slices.Insert(*tl, *c, point{t, v})
}

// withZeros is tl with a point of value 0 at each of ref's times that tl
// lacks (setDefault(t, 0) for each, in one pass), into *buf, which it
// takes as its scratch; tl's array becomes *buf.
func (tl timeline) withZeros(ref timeline, buf *timeline) timeline {
	out := (*buf)[:0]
	i := 0
	for _, r := range ref {
		for i < len(tl) && tl[i].T < r.T {
			out = append(out, tl[i])
			i++
		}
		if i < len(tl) && tl[i].T == r.T {
			continue
		}
		out = append(out, point{r.T, 0})
	}
	out = append(out, tl[i:]...)
	*buf = tl[:0]
	return out
}

// merged drops every point whose value repeats the previous point's
// (utils.py, merge_dict), into a new timeline.
func (tl timeline) merged() timeline {
	out := make(timeline, 0, len(tl))
	last := -1
	for _, p := range tl {
		if p.V == last {
			continue
		}
		out = append(out, p)
		last = p.V
	}
	return out
}

// gpuTime is the GPU-seconds of an allocation timeline up to end
// (utils.py, get_allocation_time): each point's GPUs until the next
// point, and the last point's until end (which may be before it: the
// sum is ElasticFlow's, points after end included).
func (tl timeline) gpuTime(end int64) float64 {
	var s float64
	for i, p := range tl {
		if i+1 < len(tl) {
			s += float64(p.V) * float64(tl[i+1].T-p.T)
		} else {
			s += float64(p.V) * float64(end-p.T)
		}
	}
	return s
}

// mergedGPUTime is tl.merged().gpuTime(end), without making the merged
// timeline.
func (tl timeline) mergedGPUTime(end int64) float64 {
	var s float64
	last, lastT, some := -1, int64(0), false
	for _, p := range tl {
		if p.V == last {
			continue
		}
		if some {
			s += float64(last) * float64(p.T-lastT)
		}
		last, lastT, some = p.V, p.T, true
	}
	if some {
		s += float64(last) * float64(end-lastT)
	}
	return s
}

// alignUp is the first slot boundary counted from start at or after t
// (utils.py, align_to_time_slot; t may be before start).
func alignUp(start, t int64) int64 {
	d := t - start
	n := d / Slot
	if d%Slot != 0 && d > 0 {
		n++
	}
	return start + n*Slot
}
