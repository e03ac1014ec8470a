// Package admission is deadline admission after ElasticFlow (Gu et al.,
// ASPLOS'23): a job with a deadline is admitted only if it can meet it
// given what is already admitted, each admitted job holding its minimum
// satisfactory share (the least GPUs, over time, that finish its work by
// its deadline, with its speedup curve) of the cluster's capacity over
// time, which the jobs due earlier have first claim on.
//
// Time from now is cut into slots (a Ledger): Options.Slot long at first,
// then growing by Options.Growth of their start, up to Options.MaxSlots, so
// the cost of a job is bounded whatever its deadline and the number of
// slots stays small (about 180 for a month). Within a slot capacity is
// fluid (GPU-seconds): a job held to g GPUs gets min(g, the slot's free
// GPUs on average) and does its speedup at that (interpolated between
// whole counts, and below its Min a proportional part of Min's) over the
// part of the slot before its deadline or its end.
//
// A job's share is the least cap g in [Min, Max] (whole workers) with which
// it finishes by its deadline given what is reserved; shares are reserved
// in the order the caller gives (Shares), earliest deadline first for the
// admitted jobs (Admit). Both the planner (at submission and every round)
// and the qoe policy use it; it imports only the policy contract.
package admission

import (
	"math"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Job is a job with a deadline as admission sees it.
type Job struct {
	// Due is the time left to its deadline, in seconds (<= 0: passed).
	Due float64
	// Work is its work left, in seconds on one GPU (policy.Progress's
	// RemainingWork); at g GPUs it needs Work / speedup(g) seconds.
	Work float64
	// Speedup is its speedup table (policy.Job.Speedup; nil: linear).
	Speedup []float64
	// Min, Max and PerWorker are its GPU range (policy.GPURequest).
	Min, Max, PerWorker int
}

// Share is a job's least satisfying share, given what was reserved before.
type Share struct {
	// OK: the job meets its deadline with GPUs at most its Max.
	OK bool
	// GPUs is its minimum satisfactory share: the least cap on its GPUs
	// that meets the deadline (its Max when !OK).
	GPUs int
	// Now is the GPUs the share gives it in the first slot, in whole
	// workers, at least Min (a job whose share starts later still needs
	// Min to run at all).
	Now int
	// Finish is when it is done at GPUs, in seconds from now (+Inf if not
	// within the ledger's horizon).
	Finish float64
}

// Late is how long after its deadline job j would finish at its Max given
// what is reserved (0 if it makes it, +Inf if not within the horizon).
func (l *Ledger) Late(j *Job) float64 {
	_, hi, _ := counts(j)
	if j.Work <= 0 || hi < 1 {
		return 0
	}
	return max(l.run(j, hi, false, nil)-j.Due, 0)
}

// Options bound the ledger.
type Options struct {
	// Slot is the length of the first slots, in seconds (default 60).
	Slot float64
	// Growth: past Slot/Growth seconds, each slot is Growth of its start
	// long (default 0.05).
	Growth float64
	// MaxSlots bounds the slots (default 256; with the defaults the
	// horizon is then over three years).
	MaxSlots int
	// MaxJobs bounds the jobs Shares and Admit reserve (default 5,000):
	// later ones are not judged (their Share is the zero Share, and Admit
	// ignores them).
	MaxJobs int
}

// Defaults.
const (
	DefaultSlot     = 60.0
	DefaultGrowth   = 0.05
	DefaultMaxSlots = 256
	DefaultMaxJobs  = 5000
)

func (o Options) withDefaults() Options {
	if !(o.Slot > 0) || math.IsInf(o.Slot, 0) {
		o.Slot = DefaultSlot
	}
	if !(o.Growth > 0) || o.Growth > 1 {
		o.Growth = DefaultGrowth
	}
	if o.MaxSlots <= 0 {
		o.MaxSlots = DefaultMaxSlots
	}
	if o.MaxJobs <= 0 {
		o.MaxJobs = DefaultMaxJobs
	}
	return o
}

// Ledger is the cluster's capacity over time and what is reserved of it.
type Ledger struct {
	capacity float64
	ends     []float64 // slot i is [ends[i-1], ends[i]), slot 0 from 0
	used     []float64 // GPU-seconds reserved in each slot
	// free is the GPUs left in each slot on average, as run reads them:
	// kept with used (reserve), not divided out again at each run.
	free    []float64
	maxJobs int
	// last is what the last run that met its deadline used of each slot
	// (for job lastJob at lastG GPUs), so that Reserve after Fit need not
	// play the job through the ledger again.
	last    []slotUse
	lastJob *Job
	lastG   int
}

type slotUse struct {
	i  int
	gs float64
}

// NewLedger returns an empty ledger of capacity GPUs.
func NewLedger(capacity int, o Options) *Ledger {
	o = o.withDefaults()
	l := &Ledger{capacity: float64(max(capacity, 0)), ends: make([]float64, o.MaxSlots),
		used: make([]float64, o.MaxSlots), free: make([]float64, o.MaxSlots), maxJobs: o.MaxJobs}
	t := 0.0
	for i := range l.ends {
		t += max(o.Slot, o.Growth*t)
		l.ends[i] = t
		l.reserve(i, 0)
	}
	return l
}

// reserve adds gs GPU-seconds to what is reserved of slot i.
func (l *Ledger) reserve(i int, gs float64) {
	l.used[i] += gs
	start := 0.0
	if i > 0 {
		start = l.ends[i-1]
	}
	length := l.ends[i] - start
	l.free[i] = max(l.capacity*length-l.used[i], 0) / length
}

// Horizon is the end of the ledger's last slot, in seconds from now.
func (l *Ledger) Horizon() float64 { return l.ends[len(l.ends)-1] }

// speedupAt is policy.SpeedupAt for a table already checked with
// policy.UsableSpeedup (nil: linear), without checking it again.
func speedupAt(tab []float64, g int) float64 {
	switch {
	case g < 1:
		return 0
	case tab == nil:
		return float64(g)
	}
	if s := tab[min(g, len(tab))-1]; s > 0 {
		return s
	}
	return math.SmallestNonzeroFloat64
}

// rate is the speed (in one-GPU units) on a GPUs, a a fluid count, of a
// job of speedup table tab (checked) and minimum lo.
func rate(tab []float64, lo int, a float64) float64 {
	if a <= 0 {
		return 0
	}
	lo = max(lo, 1)
	if a < float64(lo) {
		return a / float64(lo) * speedupAt(tab, lo)
	}
	g := int(a)
	s := speedupAt(tab, g)
	if f := a - float64(g); f > 0 {
		s += f * max(speedupAt(tab, g+1)-s, 0)
	}
	return s
}

// run plays job j held to g GPUs through the ledger: until its deadline
// when toDue, else until it is done. It returns when it is done (+Inf if
// not by the limit), and calls take(i, gpuSeconds) for what it uses of
// each slot, if take is not nil.
func (l *Ledger) run(j *Job, g int, toDue bool, take func(i int, gs float64)) float64 {
	limit := l.Horizon()
	if toDue {
		limit = min(limit, j.Due)
	}
	tab := j.Speedup
	if !policy.UsableSpeedup(tab) {
		tab = nil
	}
	done, start := 0.0, 0.0
	lastA, lastR := -1.0, 0.0
	for i, end := range l.ends {
		if start >= limit {
			break
		}
		a := min(float64(g), l.free[i])
		if a != lastA {
			lastA, lastR = a, rate(tab, j.Min, a)
		}
		r := lastR
		span := min(end, limit) - start
		if r > 0 && done+r*span >= j.Work {
			dt := (j.Work - done) / r
			if take != nil {
				take(i, a*dt)
			}
			return start + dt
		}
		done += r * span
		if take != nil && a > 0 {
			take(i, a*span)
		}
		start = end
	}
	return math.Inf(1)
}

// counts is job j's counts in [Min, Max] in whole workers, fewest first.
func counts(j *Job) (lo, hi, step int) {
	step = max(j.PerWorker, 1)
	lo = max(j.Min, step)
	hi = j.Max - j.Max%step
	return lo, hi, step
}

// Fit is job j's least satisfying share given what is reserved; it
// reserves nothing.
func (l *Ledger) Fit(j *Job) Share {
	lo, hi, step := counts(j)
	if j.Work <= 0 || hi < lo {
		return Share{OK: j.Work <= 0 && hi >= lo, GPUs: lo, Now: lo}
	}
	meets := func(g int) (float64, bool) {
		l.last, l.lastJob = l.last[:0], nil
		f := l.run(j, g, true, func(i int, gs float64) { l.last = append(l.last, slotUse{i, gs}) })
		if f <= j.Due {
			l.lastJob, l.lastG = j, g
		}
		return f, f <= j.Due
	}
	// The least count that meets the deadline alone bounds the search from
	// below: less capacity never helps.
	// (The table is checked once, not at each count: speedupAt is
	// policy.SpeedupAt for a checked table.)
	tab := j.Speedup
	if !policy.UsableSpeedup(tab) {
		tab = nil
	}
	first := lo
	for g := lo; g < hi; g += step {
		if j.Work/speedupAt(tab, g) <= j.Due {
			break
		}
		first = g + step
	}
	if f, ok := meets(first); ok {
		return Share{OK: true, GPUs: first, Now: l.now(j, first), Finish: f}
	}
	fMax, ok := meets(hi)
	if !ok {
		return Share{GPUs: hi, Now: l.now(j, hi), Finish: math.Inf(1)}
	}
	// Binary search on the worker count in (first, hi]: meets(hi) holds.
	a, b, fin := first/step, hi/step, fMax
	for b-a > 1 {
		m := (a + b) / 2
		if f, ok := meets(m * step); ok {
			b, fin = m, f
		} else {
			a = m
		}
	}
	g := b * step
	if l.lastG != g {
		l.lastJob = nil
	}
	return Share{OK: true, GPUs: g, Now: l.now(j, g), Finish: fin}
}

// now is what a cap of g gives job j in the first slot, in whole workers
// rounded up, at least its Min.
func (l *Ledger) now(j *Job, g int) int {
	lo, _, step := counts(j)
	a := min(float64(g), l.free[0])
	n := int(math.Ceil(a/float64(step)-1e-9)) * step
	return min(max(n, lo), g)
}

// Reserve reserves share s of job j (from Fit): until it is done at
// s.GPUs, or until its deadline if it does not make it.
func (l *Ledger) Reserve(j *Job, s Share) {
	if j.Work <= 0 {
		return
	}
	if s.OK && l.lastJob == j && l.lastG == s.GPUs {
		for _, u := range l.last {
			l.reserve(u.i, u.gs)
		}
		l.lastJob = nil
		return
	}
	l.run(j, s.GPUs, !s.OK, l.reserve)
}

// Shares reserves the jobs' shares in the order given, and returns them;
// jobs past the MaxJobs-th are not judged (the zero Share).
func (l *Ledger) Shares(jobs []Job) []Share {
	out := make([]Share, len(jobs))
	for i := range jobs[:min(len(jobs), l.maxJobs)] {
		out[i] = l.Fit(&jobs[i])
		if out[i].OK {
			l.Reserve(&jobs[i], out[i])
		}
	}
	return out
}

// Decision is Admit's answer.
type Decision struct {
	// Admit: the candidate meets its deadline on its share, and no
	// admitted job that met its own is pushed past it.
	Admit bool
	// Share is the candidate's.
	Share Share
	// Late is, when the candidate misses, how long after its deadline it
	// would finish at its Max (+Inf: not within the ledger's horizon).
	Late float64
	// Displaced are the admitted jobs (indexes) the candidate would push
	// past their deadlines.
	Displaced []int
}

// Admit says whether cand can be admitted beside admitted, on a cluster
// of capacity GPUs: every job's share is reserved earliest deadline first
// (cand after admitted jobs due at the same time). An admitted job that
// misses its deadline even without cand (its estimate grew, or capacity
// left) does not count against cand. Only the MaxJobs jobs due first are
// judged; cand is judged whatever its deadline.
func Admit(capacity int, admitted []Job, cand Job, o Options) Decision {
	o = o.withDefaults()
	order := make([]int, len(admitted))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmpDue(admitted[a].Due, admitted[b].Due) })
	if len(order) > o.MaxJobs-1 {
		order = order[:max(o.MaxJobs-1, 0)]
	}
	// The jobs due no later than cand are reserved alike with and without
	// it: once.
	with := NewLedger(capacity, o)
	k := 0
	for ; k < len(order) && admitted[order[k]].Due <= cand.Due; k++ {
		with.reserveFit(&admitted[order[k]])
	}
	without := with.clone()
	var d Decision
	if d.Share = with.Fit(&cand); d.Share.OK {
		with.Reserve(&cand, d.Share)
	} else {
		d.Late = with.Late(&cand)
	}
	for _, i := range order[k:] {
		if !with.reserveFit(&admitted[i]) && without.reserveFit(&admitted[i]) {
			d.Displaced = append(d.Displaced, i)
		}
	}
	d.Admit = d.Share.OK && len(d.Displaced) == 0
	return d
}

// reserveFit reserves job j's share if it meets its deadline, and says
// whether it does.
func (l *Ledger) reserveFit(j *Job) bool {
	s := l.Fit(j)
	if s.OK {
		l.Reserve(j, s)
	}
	return s.OK
}

// clone returns a copy of l.
func (l *Ledger) clone() *Ledger {
	c := *l
	c.used, c.free = slices.Clone(l.used), slices.Clone(l.free)
	c.last, c.lastJob = nil, nil
	return &c
}

func cmpDue(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
