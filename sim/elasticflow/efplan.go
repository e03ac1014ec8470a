package elasticflow

import (
	"math"
	"math/bits"
)

// efJob is a job under ElasticFlow's own policy (ef-accessctrl).
type efJob struct {
	*job
	maxGPU int       // MaxGPUsElastic (jobs.py, add_job, for ef-accessctrl)
	rates  []float64 // iterations per second on 2^k GPUs
	best   []float64 // the most of rates[:k+1]
	top    int       // maxLevel

	state int // efArriving, efPending (admitted), efRunning, efOut
	// The plan (scheduler.py: 'allocations', 'end_time',
	// 'real_end_time'): GPUs from each time on, the slot-aligned end
	// (its end event) and the second of its last iteration.
	alloc        timeline
	end, realEnd int64
	num          int // GPUs now ('num_gpu')
	next         int // the next level up ('next_level_gpu')
	marginal     float64
	// valued: marginal is the value of a plan made this event at the next
	// level (get_marginal), which read what view holds (see keepView).
	valued bool
	read   readSet
	view   []point
	// The view held at grow step viewRound, when the free GPUs without
	// the job were before up to its first change after now and atF1 there
	// (see viewKept).
	viewRound    int
	before, atF1 int
	inCache      bool
	set          *nodeSet // where it is placed ('node_set'), nil if not
}

const (
	efArriving = iota
	efPending
	efRunning
	efOut
)

func newEFJob(j *job, tp *Throughputs) *efJob {
	e := &efJob{job: j, maxGPU: MaxGPUsElastic(j.Model, j.Batch), rates: tp.rates[j.Model][j.Batch]}
	e.top = min(e.maxGPU, 1<<(len(e.rates)-1))
	e.best = make([]float64, len(e.rates))
	for k, r := range e.rates {
		e.best[k] = r
		if k > 0 {
			e.best[k] = max(r, e.best[k-1])
		}
	}
	return e
}

func (j *efJob) rate(g int) float64 {
	if g <= 0 {
		return 0
	}
	k := bits.Len(uint(g - 1)) // the least k with 2^k >= g
	if k >= len(j.rates) {
		return 0
	}
	return j.rates[k]
}

// bestRate is the most iterations per second on any level up to q.
func (j *efJob) bestRate(q int) float64 {
	if len(j.best) == 0 {
		return 0
	}
	return j.best[min(bits.Len(uint(q-1)), len(j.best)-1)]
}

// levels are the tables' columns up to maxGPU (utils.py, get_next_level
// and get_last_level walk them).
func (j *efJob) maxLevel() int { return j.top }

// nextLevel is the column after g (the first for 0), or g at the top
// (utils.py, get_next_level).
func (j *efJob) nextLevel(g int) int {
	m := j.maxLevel()
	switch {
	case g == 0 && m >= 1:
		return 1
	case g >= 1 && isPow2(g) && 2*g <= m:
		return 2 * g
	}
	return g
}

// lastLevel is the largest column below n within maxGPU, 0 if none
// (utils.py, get_last_level): the most a job takes from n-1 free GPUs.
func (j *efJob) lastLevel(n int) int {
	return Pow2Floor(min(n-1, j.maxLevel()))
}

// planOut is one run of ElasticFlow's planner for a job.
type planOut struct {
	alloc, free  timeline // merged
	end, realEnd int64
	ok           bool // realEnd <= deadline
	// fallback: no level met the deadline, and the job was given the most
	// GPUs free after it (the only case where a marginal of a job that
	// does not grow is defined, as -inf).
	fallback bool
	// read is what a plan with assign > 0 read of the free GPUs it was
	// given: its alloc and end depend on nothing else (see readSet).
	read readSet
	// gpuTime is alloc's (alloc.gpuTime(end)) where the plan was made
	// without the free GPUs after it, which leaves alloc out.
	gpuTime float64
}

// plan is ElasticFlow's planner, ef_sim_allocation (scheduler.py), for
// job j from start against free, the future free GPUs; it returns the
// job's allocation timeline and the free GPUs after it (without withFree,
// for a valuation: the allocation's GPU-time and neither timeline). With
// assign > 0 (get_marginal's what-if) the job holds assign GPUs until
// free's next point, then is planned as any other from there.
//
// The plan: find the least level q (1, 2, 4, ... up to maxGPU and the
// cluster) such that running at min(q, what is free) in the periods
// between free's points, counted backwards from the deadline (slot
// aligned; its last period ending at the deadline itself), does the
// iterations left; the latest period start that suffices is the point.
// Then, going forward from start, the job takes min(previous level, free)
// before the point and min(q, free) from it, until its iterations are
// done; the end is the slot-aligned finish. If no level suffices, it takes
// the largest level until the deadline, then what is free after it.
func (p *efPolicy) plan(j *efJob, start int64, free timeline, assign int, withFree bool) planOut {
	r := planRun{p: p, j: j, n: p.n, start: start, free: free, withFree: withFree,
		ddl: j.Deadline, evt: start, iterLeft: j.iterLeft}
	r.ad = alignUp(start, r.ddl)
	// nf and alloc are scratch: what the plan returns is merged copies.
	r.nf = append(p.bufs[0][:0], free...)
	if r.ad >= start {
		r.nf.split(r.ad)
	}
	r.alloc = append(p.bufs[1][:0], point{start, 0})
	// What the plan reads (with assign > 0; see readSet): assign's next
	// point; the points from there to the aligned deadline (the levels'
	// backward fills, the forward pass) up to the level found (from the
	// point found if the first level is enough: nothing before it then
	// gives the job GPUs); none if the job is done before the next point;
	// the points the fallback walks past the deadline; everything if the
	// deadline was before start.
	r.read = readSet{f1: math.MaxInt64, lo: math.MinInt64, hi: math.MaxInt64, cap: j.maxLevel()}
	if r.ad >= start {
		r.read.hi = r.ad
	}
	if assign > 0 {
		if out, done := r.holdAssigned(assign); done {
			return out
		}
	}
	out, lastQ, found := r.leastLevel()
	if found {
		return out
	}
	return r.fallback(lastQ, assign)
}

// planRun is one run of plan: its job, start and free GPUs, and the state
// its steps share.
type planRun struct {
	p        *efPolicy
	j        *efJob
	n        int
	start    int64
	free     timeline
	withFree bool
	ddl, ad  int64 // the deadline, and its slot-aligned end
	// evt is where the plan goes on from (start, or assign's next point);
	// iterLeft the iterations left from there.
	evt      int64
	iterLeft float64
	// nf (the free GPUs after the plan) and alloc (the job's) are scratch
	// (p.bufs); read is what the plan has read so far.
	nf, alloc timeline
	read      readSet
}

// dur is the seconds of the plan's period from..to; the period that ends
// at the aligned deadline ends at the deadline itself.
func (r *planRun) dur(from, to int64) float64 {
	if to == r.ad {
		return float64(r.ddl - from)
	}
	return float64(to - from)
}

// allocOut is the job's allocation as the plan returns it: a merged copy
// with withFree, the scratch itself without.
func (r *planRun) allocOut() timeline {
	if r.withFree {
		return r.alloc.merged()
	}
	return r.alloc
}

// freeOut is the free GPUs after the plan as it returns them: a merged
// copy with withFree, none without.
func (r *planRun) freeOut() timeline {
	if r.withFree {
		return r.nf.merged()
	}
	return nil
}

// finish completes out (whether it meets the deadline, what it read, and
// without withFree its GPU-time in place of its allocation) and hands
// the scratch timelines back to p.
func (r *planRun) finish(out planOut) planOut {
	out.ok = out.realEnd <= r.ddl
	out.read = r.read
	if !r.withFree && out.alloc != nil { // planForward sums it itself
		out.gpuTime, out.alloc = out.alloc.mergedGPUTime(out.end), nil
	}
	r.p.bufs[0], r.p.bufs[1] = r.nf[:0], r.alloc[:0]
	return out
}

// holdAssigned is get_marginal's what-if: the job holds assign GPUs until
// free's next point. If it is done by then, within its deadline, that is
// the plan (done); else the plan goes on from that point with the
// iterations left.
func (r *planRun) holdAssigned(assign int) (out planOut, done bool) {
	n, j := r.n, r.j
	q := assign
	fi, ok := r.free.find(r.evt)
	if ok {
		fi++
	}
	future := r.ad
	if fi < len(r.free) {
		future = r.free[fi].T
		r.read.f1 = future
	}
	r.alloc.set(r.evt, q)
	realEnd := int64(math.Ceil(float64(r.evt) + r.iterLeft/j.rate(q)))
	end := alignUp(r.start, realEnd)
	if future >= end && r.ddl >= realEnd {
		last := r.nf.at(r.evt, n)
		r.nf.set(r.evt, last-q)
		if !r.free.has(end) {
			r.nf.set(end, last)
		}
		if r.ad >= r.start {
			r.read.lo, r.read.hi = math.MaxInt64, math.MinInt64
		}
		return r.finish(planOut{alloc: r.allocOut(), free: r.freeOut(), end: end, realEnd: realEnd}), true
	}
	r.iterLeft -= r.dur(r.evt, future) * j.rate(q)
	r.nf.add(r.evt, -q, n)
	r.evt = future
	r.alloc.set(r.evt, 0)
	if r.ad >= r.start {
		r.read.lo = future
	}
	return planOut{}, false
}

// leastLevel finds the least level whose backward fill from the deadline
// suffices and plans forward with it (planForward); if none does (found
// false), lastQ is the largest level it tried.
func (r *planRun) leastLevel() (out planOut, lastQ int, found bool) {
	j, nf, evt, ad := r.j, r.nf, r.evt, r.ad
	q := j.nextLevel(0)
	below := nf.window(ad) // the points before the aligned deadline
	tried := false
	for q <= r.n && q <= j.maxGPU {
		tried = true
		periodEnd := ad
		acc := 0.0
		// The walk adds up to a period's length times a rate at most
		// bestRate(q); its periods lie between evt and ad but for the
		// last, which may end at the deadline before it begins (less than
		// nothing), so no sum it makes can reach the iterations left if
		// bestRate(q)*(ad-evt) is short of them by more than the sum's
		// rounding: the level fails without the walk.
		i := below - 1
		if r.iterLeft > 0 && j.bestRate(q)*float64(max(ad-evt, 0))*(1+1e-9) < r.iterLeft {
			i = -1
		}
		rq := j.rate(q)
		for ; i >= 0; i-- {
			t := nf[i].T
			if t < evt {
				break
			}
			rate := rq // where q GPUs are free, as mostly
			if nf[i].V < q {
				a := min(q, j.lastLevel(nf[i].V+1))
				if a == 0 {
					periodEnd = t
					continue
				}
				rate = j.rate(a)
			}
			acc += r.dur(t, periodEnd) * rate
			if acc >= r.iterLeft {
				if lastQ == 0 {
					r.read.lo = max(r.read.lo, t)
				}
				r.read.cap = q
				return r.finish(r.planForward(t, q, lastQ)), lastQ, true
			}
			periodEnd = t
		}
		lastQ = q
		q = j.nextLevel(q)
		if q == lastQ {
			break
		}
	}
	if tried {
		r.zeros()
	}
	return planOut{}, lastQ, false
}

// zeros gives the allocation a point at every point of the free GPUs
// before the aligned deadline: each is a period of the plan, of 0 GPUs
// unless the pass that finds the level (or the fallback) sets it.
func (r *planRun) zeros() {
	r.alloc = r.alloc.withZeros(r.nf[:r.nf.window(r.ad)], &r.p.bufs[2])
}

// fallback is the plan when no level suffices: the largest level tried,
// lastQ, until the deadline, then what is free after it period by period,
// and past free's last point the whole cluster (assign GPUs with assign >
// 0).
func (r *planRun) fallback(lastQ, assign int) planOut {
	n, j, ad := r.n, r.j, r.ad
	// The largest level until the deadline...
	lastT, lastA := int64(-1), 0
	for i := r.nf.window(r.evt); i < len(r.nf) && r.nf[i].T <= ad; i++ {
		t := r.nf[i].T
		if lastT >= 0 {
			r.alloc.set(lastT, lastA)
			r.nf.add(lastT, -lastA, n)
			if lastA != 0 {
				r.iterLeft -= r.dur(lastT, t) * j.rate(lastA)
			}
		}
		lastT, lastA = t, min(lastQ, j.lastLevel(r.nf[i].V+1))
	}
	// ...then what is free after it, period by period.
	last := max(ad, r.evt)
	for i := 0; i < len(r.nf); i++ {
		t := r.nf[i].T
		if t <= ad {
			continue
		}
		qd := min(j.lastLevel(r.nf.at(last, n)+1), j.maxGPU)
		if qd == 0 {
			r.alloc.set(last, 0)
			last = t
			continue
		}
		r.alloc.set(last, qd)
		if it := float64(t-last) * j.rate(qd); it >= r.iterLeft {
			r.read.hi = max(r.read.hi, t)
			realEnd := int64(math.Ceil(float64(last) + r.iterLeft/j.rate(qd)))
			end := alignUp(r.start, realEnd)
			orig := r.free.at(last, n)
			if last != end {
				r.nf.set(last, orig-qd)
			}
			if !r.free.has(end) {
				r.nf.set(end, orig)
			}
			return r.finish(planOut{alloc: r.allocOut(), free: r.freeOut(), end: end, realEnd: realEnd})
		} else {
			r.iterLeft -= it
			if t > last {
				// The period last..t holds the level. A late job's
				// first period (its aligned deadline before now: it
				// starts at now, itself a point) is empty and holds
				// nothing, so the next level is read from what is free
				// now whole (scheduler.py, ef_sim_allocation, "allocate
				// from ddl": the points in [last, t) lose the level).
				r.nf.add(last, -qd, n)
			}
		}
		last = t
	}
	// ...and past every point, the whole cluster is free.
	r.read.hi = math.MaxInt64
	qf := min(n, j.maxGPU)
	if assign > 0 {
		qf = assign
	}
	r.alloc.set(last, qf)
	realEnd := int64(math.Ceil(float64(last) + r.iterLeft/j.rate(qf)))
	end := alignUp(r.start, realEnd)
	r.nf.set(last, n-qf)
	r.nf.set(end, n)
	return r.finish(planOut{alloc: r.allocOut(), free: r.freeOut(), end: end, realEnd: realEnd, fallback: true})
}

// planForward is the forward half of plan once a level q and its point
// are found: min(lastQ, free) before the point, min(q, free) from it,
// period by period from evt until the iterations are done.
//
// Without withFree (a valuation) it makes neither the allocation nor the
// free GPUs after it, only the allocation's GPU-time, summed as the pass
// goes (allocation points it would hold, zeros, make no GPU-time; merging
// changes no sum): the held GPUs from start to evt, then each time the
// pass sets until the next point (every time of the free GPUs before the
// aligned deadline is one), the last one set until the end when no point
// follows it.
func (r *planRun) planForward(point int64, q, lastQ int) planOut {
	j, nf, ad, iterLeft, withFree := r.j, r.nf, r.ad, r.iterLeft, r.withFree
	if withFree {
		r.zeros()
	}
	alloc := r.alloc
	var gpuTime float64
	if !withFree {
		gpuTime = alloc.gpuTime(r.evt)
	}
	pick := func(t int64, v int) int {
		l := lastQ
		if t >= point {
			l = q
		}
		if v >= l { // l, a level, fits: lastLevel(v+1) >= l
			return l
		}
		return min(l, j.lastLevel(v+1))
	}
	// The pass walks nf's points in order: lastI is lastT's index, and
	// alloc is set from cursor ac on.
	lastT, lastA, lastI, ac := int64(-1), 0, -1, 0
	end, realEnd := int64(-1), int64(0)
	for i := nf.window(r.evt); i < len(nf) && nf[i].T <= ad; i++ {
		t := nf[i].T
		if lastT < 0 {
			lastT, lastA, lastI = t, pick(t, nf[i].V), i
			continue
		}
		if withFree {
			alloc.setFrom(&ac, lastT, lastA)
			nf[lastI].V -= lastA
		}
		if lastA != 0 {
			d := float64(t - lastT)
			if t == ad {
				d = float64(j.Deadline - lastT)
			}
			it := d * j.rate(lastA)
			if lastT < point || it < iterLeft {
				iterLeft -= it
			} else {
				rtl := int64(math.Ceil(iterLeft / j.rate(lastA)))
				end, realEnd = lastT+alignUp(0, rtl), lastT+rtl
				if t == ad { // no point follows lastT's
					t = end
				}
				gpuTime += float64(lastA) * float64(t-lastT)
				break
			}
			gpuTime += float64(lastA) * float64(t-lastT)
		}
		lastT, lastA, lastI = t, pick(t, nf[i].V), i
	}
	if end < 0 {
		rtl := int64(math.Ceil(iterLeft / j.rate(lastA)))
		end, realEnd = lastT+alignUp(0, rtl), lastT+rtl
		gpuTime += float64(lastA) * float64(end-lastT)
		if withFree {
			alloc.setFrom(&ac, lastT, lastA)
			nf[lastI].V -= lastA
		}
	}
	if !withFree {
		return planOut{end: end, realEnd: realEnd, gpuTime: gpuTime}
	}
	r.alloc = alloc
	out := planOut{alloc: alloc.merged(), end: end, realEnd: realEnd}
	// The end gets a point with the GPUs free there before this job.
	if !r.free.has(end) {
		orig := r.n
		for _, pt := range r.free {
			if pt.T >= r.evt && pt.T < end {
				orig = pt.V
			}
		}
		nf.set(end, orig)
	}
	out.free = nf.merged()
	return out
}

// window is the index of the first point at or after from: the planner
// walks the points from there to the aligned deadline.
func (tl timeline) window(from int64) int {
	i, _ := tl.find(from)
	return i
}
