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
	// level (get_marginal), which read what view holds (see viewOf).
	valued          bool
	read            readSet
	view            []point
	inCache, placed bool
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
	n := p.n
	iterLeft := j.iterLeft
	ddl := j.Deadline
	ad := alignUp(start, ddl)
	// nf and alloc are scratch: what the plan returns is merged copies.
	nf := append(p.bufs[0][:0], free...)
	if ad >= start && !nf.has(ad) {
		v, _ := nf.before(ad)
		nf.set(ad, v)
	}
	alloc := append(p.bufs[1][:0], point{start, 0})
	evt := start
	dur := func(from, to int64) float64 {
		if to == ad {
			return float64(ddl - from)
		}
		return float64(to - from)
	}
	// What the plan reads (with assign > 0; see readSet): assign's next
	// point; the points from there to the aligned deadline (the levels'
	// backward fills, the forward pass) up to the level found (from the
	// point found if the first level is enough: nothing before it then
	// gives the job GPUs); none if the job is done before the next point;
	// the points the fallback walks past the deadline; everything if the
	// deadline was before start.
	read := readSet{f1: math.MaxInt64, lo: math.MinInt64, hi: math.MaxInt64, cap: j.maxLevel()}
	if ad >= start {
		read.hi = ad
	}
	allocOut := func() timeline {
		if withFree {
			return alloc.merged()
		}
		return alloc
	}
	freeOut := func() timeline {
		if withFree {
			return nf.merged()
		}
		return nil
	}
	finish := func(out planOut) planOut {
		out.ok = out.realEnd <= ddl
		out.read = read
		if !withFree {
			out.gpuTime, out.alloc = out.alloc.mergedGPUTime(out.end), nil
		}
		p.bufs[0], p.bufs[1] = nf[:0], alloc[:0]
		return out
	}

	if assign > 0 {
		q := assign
		avail := nf.at(start, n)
		fi, ok := free.find(evt)
		if ok {
			fi++
		}
		future := ad
		if fi < len(free) {
			future = free[fi].T
			read.f1 = future
		}
		alloc.set(evt, q)
		realEnd := int64(math.Ceil(float64(evt) + iterLeft/j.rate(q)))
		end := alignUp(start, realEnd)
		if future >= end && ddl >= realEnd {
			last := nf.at(evt, n)
			if evt != end {
				nf.set(evt, avail-q)
			} else {
				nf.set(evt, last-q)
			}
			if !free.has(end) {
				nf.set(end, last)
			}
			if ad >= start {
				read.lo, read.hi = math.MaxInt64, math.MinInt64
			}
			return finish(planOut{alloc: allocOut(), free: freeOut(), end: end, realEnd: realEnd})
		}
		iterLeft -= dur(evt, future) * j.rate(q)
		nf.set(evt, nf.at(evt, n)-q)
		evt = future
		alloc.set(evt, 0)
		if ad >= start {
			read.lo = future
		}
	}

	// The least level whose backward fill from the deadline suffices.
	q := j.nextLevel(0)
	lastQ := 0
	below := nf.window(ad) // the points before the aligned deadline
	for q <= n && q <= j.maxGPU {
		if lastQ == 0 {
			// Every point before the deadline is a period of the plan
			// (its value set by the pass that finds the level).
			alloc = alloc.withZeros(nf[:below], &p.bufs[2])
		}
		periodEnd := ad
		acc := 0.0
		for i := below - 1; i >= 0; i-- {
			t := nf[i].T
			if t < evt {
				break
			}
			a := q
			if nf[i].V < q {
				a = min(q, j.lastLevel(nf[i].V+1))
			}
			if a == 0 {
				periodEnd = t
				continue
			}
			acc += dur(t, periodEnd) * j.rate(a)
			if acc >= iterLeft {
				if lastQ == 0 {
					read.lo = max(read.lo, t)
				}
				read.cap = q
				return finish(p.planForward(j, evt, ad, t, q, lastQ, iterLeft, free, nf, alloc, withFree))
			}
			periodEnd = t
		}
		lastQ = q
		q = j.nextLevel(q)
		if q == lastQ {
			break
		}
	}

	// No level suffices: the largest until the deadline...
	lastT, lastA := int64(-1), 0
	for i := nf.window(evt); i < len(nf) && nf[i].T <= ad; i++ {
		t := nf[i].T
		if lastT >= 0 {
			alloc.set(lastT, lastA)
			nf.set(lastT, nf.at(lastT, n)-lastA)
			if lastA != 0 {
				iterLeft -= dur(lastT, t) * j.rate(lastA)
			}
		}
		lastT, lastA = t, min(lastQ, j.lastLevel(nf[i].V+1))
	}
	// ...then what is free after it, period by period.
	last := max(ad, evt)
	for i := 0; i < len(nf); i++ {
		t := nf[i].T
		if t <= ad {
			continue
		}
		qd := min(j.lastLevel(nf.at(last, n)+1), j.maxGPU)
		if qd == 0 {
			alloc.set(last, 0)
			last = t
			continue
		}
		alloc.set(last, qd)
		if it := float64(t-last) * j.rate(qd); it >= iterLeft {
			read.hi = max(read.hi, t)
			realEnd := int64(math.Ceil(float64(last) + iterLeft/j.rate(qd)))
			end := alignUp(start, realEnd)
			orig := free.at(last, n)
			if last != end {
				nf.set(last, orig-qd)
			}
			if !free.has(end) {
				nf.set(end, orig)
			}
			return finish(planOut{alloc: allocOut(), free: freeOut(), end: end, realEnd: realEnd})
		} else {
			iterLeft -= it
			nf.set(last, nf.at(last, n)-qd)
		}
		last = t
	}
	// ...and past every point, the whole cluster is free.
	read.hi = math.MaxInt64
	qf := min(n, j.maxGPU)
	if assign > 0 {
		qf = assign
	}
	alloc.set(last, qf)
	realEnd := int64(math.Ceil(float64(last) + iterLeft/j.rate(qf)))
	end := alignUp(start, realEnd)
	nf.set(last, n-qf)
	nf.set(end, n)
	return finish(planOut{alloc: allocOut(), free: freeOut(), end: end, realEnd: realEnd, fallback: true})
}

// planForward is the forward half of plan once a level q and its point
// are found: min(lastQ, free) before the point, min(q, free) from it,
// period by period from evt until the iterations are done.
func (p *efPolicy) planForward(j *efJob, evt, ad, point int64, q, lastQ int, iterLeft float64, free, nf, alloc timeline, withFree bool) planOut {
	n := p.n
	pick := func(t int64, v int) int {
		if t >= point {
			return min(q, j.lastLevel(v+1))
		}
		return min(lastQ, j.lastLevel(v+1))
	}
	// The pass walks nf's points in order: lastI is lastT's index, and
	// alloc is set from cursor ac on.
	lastT, lastA, lastI, ac := int64(-1), 0, -1, 0
	end, realEnd := int64(-1), int64(0)
	for i := nf.window(evt); i < len(nf) && nf[i].T <= ad; i++ {
		t := nf[i].T
		if lastT < 0 {
			lastT, lastA, lastI = t, pick(t, nf[i].V), i
			continue
		}
		alloc.setFrom(&ac, lastT, lastA)
		nf[lastI].V -= lastA
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
				break
			}
		}
		lastT, lastA, lastI = t, pick(t, nf[i].V), i
	}
	if end < 0 {
		alloc.setFrom(&ac, lastT, lastA)
		nf[lastI].V -= lastA
		rtl := int64(math.Ceil(iterLeft / j.rate(lastA)))
		end, realEnd = lastT+alignUp(0, rtl), lastT+rtl
	}
	if !withFree {
		return planOut{alloc: alloc, end: end, realEnd: realEnd}
	}
	out := planOut{alloc: alloc.merged(), end: end, realEnd: realEnd}
	// The end gets a point with the GPUs free there before this job.
	if !free.has(end) {
		orig := n
		for _, pt := range free {
			if pt.T >= evt && pt.T < end {
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
