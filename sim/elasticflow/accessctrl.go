package elasticflow

import (
	"cmp"
	"container/heap"
	"fmt"
	"math"
	"slices"
)

// efPolicy is ElasticFlow's own scheduler, ef-accessctrl (scheduler.py,
// ef_sim_jobs_access_control), replayed: at every scheduling event
//
//  1. every job runs the interval since the last event on its GPUs,
//     losing its overhead first (jobs.py, run_all_jobs); jobs whose end
//     event it is leave, met if their planned last second (the plan's
//     real end, which leaves the last overhead out) is by the deadline;
//  2. admission: the admitted jobs and the arrivals are planned earliest
//     deadline first, each by its minimum satisfactory share over the
//     free GPUs the earlier ones leave (plan; estimate_all_jobs). If any
//     plan misses its deadline, every arrival of the event is declined and
//     the admitted jobs are planned again without them;
//  3. each job takes its plan's GPUs for now; the GPUs left over go one
//     level at a time to the job whose step up has the largest marginal
//     GPU-time (its plan at the next level, allocate_free_gpus and
//     get_marginal), a job with none first;
//  4. the jobs, all released, are placed again largest first (placer),
//     and each pays Overhead: nothing more if its GPU ranks were used since
//     the cache was last cleared (log.py, scheduling_result), which happens
//     at every 60th event, when the others pay a restart;
//  5. the next event: arrivals, the jobs' end events (their plans' slot
//     aligned ends, delayed by their overheads) and the first time a plan
//     changes a job's GPUs, stepped as nextEvent does (events a slot or
//     less ahead move to now + Slot, merged).
type efPolicy struct {
	n        int
	spec     Spec
	jobs     []*efJob
	runnable []*efJob
	free     timeline
	events   map[int64]*efEvent
	times    timeHeap
	cache    map[[2]int]bool
	count    int
	active   int         // admitted and not yet out
	bufs     [3]timeline // plan's scratch: nf, alloc and withZeros's
	without  freeWalk    // marginal's scratch
	diff     freeDiff    // the free GPUs' change at the last grow step
	pl       *placer     // its free nodes' order lasts from event to event
}

type efEvent struct {
	starts, ends []*efJob
}

type timeHeap []int64

func (h timeHeap) Len() int           { return len(h) }
func (h timeHeap) Less(i, k int) bool { return h[i] < h[k] }
func (h timeHeap) Swap(i, k int)      { h[i], h[k] = h[k], h[i] }
func (h *timeHeap) Push(x any)        { *h = append(*h, x.(int64)) }
func (h *timeHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (p *efPolicy) event(t int64) *efEvent {
	e, ok := p.events[t]
	if !ok {
		e = &efEvent{}
		p.events[t] = e
		heap.Push(&p.times, t)
	}
	return e
}

// firstEvents are the times of the earliest two events (fewer if there
// are fewer).
func (p *efPolicy) firstEvents() []int64 {
	var keep []int64
	for p.times.Len() > 0 && len(keep) < 2 {
		t := heap.Pop(&p.times).(int64)
		if _, ok := p.events[t]; !ok || (len(keep) > 0 && keep[len(keep)-1] == t) {
			continue
		}
		keep = append(keep, t)
	}
	for _, t := range keep {
		heap.Push(&p.times, t)
	}
	return keep
}

// moveEnd moves j's end event from old to now (jobs.py,
// change_job_end_event): an event left with no arrivals and no ends goes.
func (p *efPolicy) moveEnd(j *efJob, old, now int64) {
	if old == now {
		return
	}
	if e, ok := p.events[old]; ok {
		e.ends = slices.DeleteFunc(e.ends, func(x *efJob) bool { return x == j })
		if len(e.starts)+len(e.ends) == 0 {
			delete(p.events, old)
		}
	}
	e := p.event(now)
	if !slices.Contains(e.ends, j) {
		e.ends = append(e.ends, j)
	}
}

func runAccessCtrl(jobs []*job, cfg Config) error {
	p := &efPolicy{n: cfg.Spec.GPUs(), spec: cfg.Spec, events: map[int64]*efEvent{}, cache: map[[2]int]bool{}, pl: newPlacer(cfg.Spec)}
	for _, j := range jobs {
		e := newEFJob(j, cfg.Throughputs)
		p.jobs = append(p.jobs, e)
		ev := p.event(j.Submit)
		ev.starts = append(ev.starts, e)
	}
	cur := p.firstEvents()[0]
	var timeDiff int64
	for len(p.events)+p.active > 0 {
		p.progress(cur, timeDiff)
		ev, ok := p.events[cur]
		if !ok {
			return fmt.Errorf("at %d s: no event", cur)
		}
		delete(p.events, cur)
		if p.active == 0 && len(ev.starts)+len(ev.ends) == 0 {
			if ts := p.firstEvents(); len(ts) > 0 {
				cur, timeDiff = ts[0], ts[0]-cur
			}
			continue
		}
		if err := p.schedule(cur, ev); err != nil {
			return fmt.Errorf("at %d s: %w", cur, err)
		}
		next := p.step(cur)
		if next < 0 {
			break
		}
		cur, timeDiff = next, next-cur
	}
	return nil
}

// progress runs each job with GPUs over the interval ending now (jobs.py,
// run_all_jobs): its overhead first; no further than its plan's real end;
// a job that finishes before its end event has it moved to now.
func (p *efPolicy) progress(now, diff int64) {
	for _, j := range p.runnable {
		if j.num == 0 {
			continue
		}
		run := float64(diff)
		if now > j.realEnd {
			run -= float64(now - j.realEnd)
		}
		if run < j.overhead {
			run = 0
		} else {
			run -= j.overhead
		}
		r := j.rate(j.num)
		it := run * r
		if j.iterLeft <= it && j.end > now {
			from := now - diff
			it = float64(j.end-from) * r
			p.moveEnd(j, j.end, now)
			j.end = from + int64(math.Ceil(j.iterLeft/r))
		}
		j.iterLeft -= it
		j.overhead = 0
	}
	for _, j := range p.runnable {
		j.overhead = 0
	}
}

// estimate plans list earliest deadline first (stable) from an empty
// cluster at now (scheduler.py, estimate_all_jobs), releasing the placed
// jobs in that order first; it says whether every plan meets its deadline.
func (p *efPolicy) estimate(list []*efJob, now int64) bool {
	p.free = timeline{{now, p.n}}
	slices.SortStableFunc(list, func(a, b *efJob) int { return cmp.Compare(a.Deadline, b.Deadline) })
	for _, j := range list {
		if j.set != nil {
			p.pl.release(j)
		}
	}
	ok := true
	for _, j := range list {
		out := p.plan(j, now, p.free, 0, true)
		p.free = out.free
		j.alloc, j.end, j.realEnd = out.alloc, out.end, out.realEnd
		ok = ok && out.ok
	}
	return ok
}

func (p *efPolicy) schedule(now int64, ev *efEvent) error {
	for _, j := range ev.ends {
		if j.state == efOut || j.set == nil {
			continue
		}
		p.pl.release(j)
		j.state = efOut
		j.done, j.finish = true, j.realEnd
		p.active--
		p.runnable = slices.DeleteFunc(p.runnable, func(x *efJob) bool { return x == j })
	}
	old := make(map[*efJob]int64, len(p.runnable)+len(ev.starts))
	for _, j := range p.runnable {
		old[j] = j.end
	}
	if len(ev.starts) > 0 {
		list := append(slices.Clone(p.runnable), ev.starts...)
		for _, j := range ev.starts {
			j.iterLeft = float64(j.Iterations)
			old[j] = j.end
		}
		if p.estimate(list, now) {
			for _, j := range ev.starts {
				j.state = efPending
				p.active++
			}
			p.runnable = append(p.runnable, ev.starts...)
		} else {
			for _, j := range ev.starts {
				j.state = efOut
			}
			p.estimate(p.runnable, now)
		}
	} else {
		p.estimate(p.runnable, now)
	}
	slices.SortStableFunc(p.runnable, func(a, b *efJob) int { return cmp.Compare(a.Deadline, b.Deadline) })
	for _, j := range p.runnable {
		j.num = j.alloc.at(now, 0)
		p.moveEnd(j, old[j], j.end)
	}
	// Admitted jobs start once their plan gives them GPUs now.
	for _, j := range p.runnable {
		if j.state != efPending {
			continue
		}
		first := true
		for _, a := range j.alloc {
			if a.V != 0 {
				first = a.T <= now
				break
			}
		}
		if first {
			j.state = efRunning
		}
	}
	p.allocateFree(now)
	slices.SortStableFunc(p.runnable, func(a, b *efJob) int { return b.num - a.num })
	return p.place(now)
}

// allocateFree gives the GPUs no plan uses now one level at a time
// (scheduler.py, allocate_free_gpus): to the first job, by marginal
// GPU-time per GPU from the largest (stable), whose step up fits; then
// every job that can grow is valued again.
func (p *efPolicy) allocateFree(now int64) {
	used := 0
	for _, j := range p.runnable {
		j.next = j.nextLevel(j.num)
		used += j.num
	}
	left := p.n - used
	if left <= 0 {
		return
	}
	for _, j := range p.runnable {
		j.valued = false
		p.marginal(j, left, now)
	}
	byMarginal := func(a, b *efJob) int { return cmp.Compare(b.marginal, a.marginal) }
	slices.SortStableFunc(p.runnable, byMarginal)
	for grown := true; left > 0 && grown; {
		grown = false
		for _, j := range p.runnable {
			if j.next-j.num > left || j.next == j.num {
				continue
			}
			// The plan marginal valued j by, made again (now with the free
			// GPUs after it): nothing it read has changed since.
			prop := p.plan(j, now, p.without.start(j, p.free, p.n).to(math.MaxInt64), j.next, true)
			p.diff.set(p.free, prop.free, now)
			p.free = prop.free
			old := j.end
			j.alloc, j.end, j.realEnd = prop.alloc, prop.end, prop.realEnd
			left -= j.next - j.num
			j.num = j.next
			if j.state == efPending {
				j.state = efRunning
			}
			p.moveEnd(j, old, j.end)
			j.next = j.nextLevel(j.num)
			j.valued = false
			grown = true
			break
		}
		for _, j := range p.runnable {
			if j.next-j.num > 0 {
				p.marginal(j, left, now)
			}
		}
		slices.SortStableFunc(p.runnable, byMarginal)
	}
}

var efInf = float64(math.MaxInt64)

// marginal values j's step up to its next level (scheduler.py,
// get_marginal): its plan at that level, holding it until the next point
// of the free GPUs without j's own plan, against its plan now, in
// GPU-seconds per GPU added; a job without GPUs comes first, one that
// cannot step up within left last.
//
// The plan is made only when the value needs it (allocateFree makes it
// again for the job it steps up): a job without GPUs comes first whatever
// its plan, and a job valued earlier in the event keeps its value when the
// free GPUs without its plan offer it, where that plan read them, what
// they offered then (see readSet), since its plan is then the same.
func (p *efPolicy) marginal(j *efJob, left int, now int64) {
	if j.next-j.num > left || j.next == j.num {
		j.marginal = -efInf
		j.valued = false
		return
	}
	if j.num == 0 {
		j.marginal, j.valued = efInf, false
		return
	}
	if j.valued && j.viewKept(&p.diff, now) {
		return
	}
	w := p.without.start(j, p.free, p.n)
	if j.valued && j.sameView(w, now) {
		j.keepSteps(w.out, now, p.diff.round)
		return
	}
	// The plan reads the points up to the deadline and the first after it
	// (see readSet) unless it finds the deadline cannot be met and walks
	// on past them all: then it is made again on the whole.
	if w.jumped {
		w.start(j, p.free, p.n)
	}
	tmp := w.past(alignUp(now, j.Deadline))
	out := p.plan(j, now, tmp, j.next, false)
	if out.read.hi == math.MaxInt64 && w.step(math.MaxInt64) {
		tmp = w.to(math.MaxInt64)
		out = p.plan(j, now, tmp, j.next, false)
	}
	j.marginal = (out.gpuTime - j.alloc.gpuTime(j.end)) / float64(j.next-j.num)
	j.keepView(tmp, out.read, now)
	j.keepSteps(tmp, now, p.diff.round)
}

// place places the jobs with GPUs (largest first, then each size below a
// node's from the largest) and charges each its overhead (see efPolicy).
func (p *efPolicy) place(now int64) error {
	for _, j := range p.runnable {
		if j.set != nil {
			return fmt.Errorf("job %s was not released before placement", j.ID)
		}
	}
	pl := p.pl
	pl.begin()
	for _, j := range p.runnable {
		if j.num >= p.spec.GPUsPerNode {
			if err := pl.place(j); err != nil {
				return err
			}
		}
	}
	for i := len(groupSizes) - 1; i >= 0; i-- {
		g := groupSizes[i]
		if g >= p.spec.GPUsPerNode {
			continue
		}
		for _, j := range p.runnable {
			if j.num == g {
				if err := pl.place(j); err != nil {
					return err
				}
			}
		}
	}
	pl.ranks(func(j *efJob, rank int) {
		k := [2]int{rank, j.num}
		j.inCache = p.cache[k]
		p.cache[k] = true
	})
	return nil
}

// step adds the first time a plan changes a job's GPUs as an event if it
// comes first, charges the overheads (moving the end events), and steps
// to the next event; -1 when there is none.
func (p *efPolicy) step(now int64) int64 {
	scale := int64(math.MaxInt64)
	for _, j := range p.runnable {
		for _, a := range j.alloc {
			if a.T > now {
				scale = min(scale, a.T)
				break
			}
		}
	}
	if ts := p.firstEvents(); (len(ts) == 0 || scale < ts[0]) && scale != math.MaxInt64 {
		p.event(scale)
	}
	restart := p.count > 0 && p.count%Slot == 0
	p.count++
	if restart {
		clear(p.cache)
	}
	for _, j := range p.runnable {
		if j.num > 0 {
			j.overhead = Overhead(p.n, j.num, restart, j.inCache)
			old := j.end
			j.end += int64(j.overhead)
			p.moveEnd(j, old, j.end)
		} else {
			j.overhead = 0
		}
	}
	ts := p.firstEvents()
	if len(ts) == 0 {
		return -1
	}
	if len(ts) < 2 || ts[0]-now > Slot {
		return ts[0]
	}
	// The first event moves to now + Slot and takes in every other event
	// up to then.
	head := p.events[ts[0]]
	delete(p.events, ts[0])
	for {
		rest := p.firstEvents()
		if len(rest) == 0 || rest[0]-now > Slot {
			break
		}
		e := p.events[rest[0]]
		head.starts = append(head.starts, e.starts...)
		head.ends = append(head.ends, e.ends...)
		delete(p.events, rest[0])
	}
	to := now + Slot
	p.events[to] = head
	heap.Push(&p.times, to)
	return to
}
