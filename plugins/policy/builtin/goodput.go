package builtin

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// GoodputName is the name of the goodput builtin.
const GoodputName = "goodput"

// DefaultGoodputStickiness is the goodput builtin's default bonus on the
// GPUs a job already holds (see Goodput).
const DefaultGoodputStickiness = 0.1

// Goodput gives GPUs where they add the most goodput per GPU, after the
// idea of Pollux (Qiao et al., OSDI'21), as a greedy on each job's speedup
// function (Job.Speedup; linear where unknown) instead of Pollux's genetic
// search.
//
// Semantics, one round:
//  1. Counts. Every job (queued or running) climbs from 0 GPUs in steps: to
//     Min first, then a worker (PerWorker GPUs) at a time up to Max. A step's
//     score is its gain in speedup per GPU, (S(to) - S(from)) / (to - from);
//     GPUs a job holds already score (1 + stickiness) times as much, so that
//     near ties do not move GPUs (a rescale costs the job time). Steps are
//     taken best score first (ties: running jobs, then submission order) while
//     the cluster's GPUs last; a job whose next step does not fit, or adds
//     nothing, stops climbing. With concave speedups this is the allocation
//     of greatest total speedup; with S(1) = 1 every job gets its first GPU
//     before any job gets its second.
//  2. Placement, so that GPUs are released before they are taken: running
//     jobs above their count shrink (whole workers, from the nodes where they
//     hold the fewest) or stop; running jobs below it grow, own nodes first;
//     queued jobs start in the order their first step was taken, packed best
//     fit. A job that does not fit whole workers gets the largest count that
//     does (at least Min), or waits. GPUs still free then go, one step at a
//     time, to the jobs whose next step scores best and fits, except jobs
//     that gave up GPUs in this round (growing them again would move them).
//     (goodput-jct, which prices restarts, gives such a job its best step
//     of those that fit the GPUs left instead: see fillLimit.)
//
// Running jobs are never moved. The round costs O((jobs + GPUs) log jobs)
// plus the placements.
//
// Pollux's restart penalty, if restart_penalty d is set: Pollux scales
// the speedup of any allocation other than a job's current one by
// max(age - restarts * d, 0) / (age + d), age being the time since its
// submission and restarts its changes so far (Job.Restarts), so a job
// that has changed often for its age is hard to change again. Here the
// held count's speedup is raised by the same ratio instead (by at most
// MaxRestartPenaltyRaise times).
//
// Config: stickiness = a non-negative number (default 0.1),
// restart_penalty = a duration from 0s to MaxResizeCooldown (default 0s:
// off; Pollux's is 30s).
type Goodput struct {
	stickiness atomic.Uint64 // math.Float64bits
	penalty    atomic.Int64  // time.Duration
}

// MaxRestartPenaltyRaise bounds the raise of a held count's speedup by
// goodput's restart_penalty: where Pollux's ratio is 0 the job keeps its
// GPUs (a raise beyond any gain), as Pollux's search would.
const MaxRestartPenaltyRaise = 1e6

// NewGoodput returns a goodput policy with the default configuration.
func NewGoodput() *Goodput {
	p := &Goodput{}
	p.stickiness.Store(math.Float64bits(DefaultGoodputStickiness))
	return p
}

// PluginInfo implements policy.Base.
func (p *Goodput) PluginInfo() policy.Info {
	return policy.Info{Name: GoodputName, Version: Version, IgnoresPriority: true,
		Description: "greedy on marginal goodput per GPU (Pollux's idea) from each job's speedup table; preemptive, elastic"}
}

// SetConfig implements policy.Base.
func (p *Goodput) SetConfig(config map[string]string) error {
	if err := checkKeys(config, "stickiness", "restart_penalty"); err != nil {
		return fmt.Errorf("failed to configure %s: %w", GoodputName, err)
	}
	s, err := floatConfig(GoodputName, config, "stickiness", DefaultGoodputStickiness,
		func(x float64) bool { return x >= 0 }, "a finite non-negative number")
	if err != nil {
		return err
	}
	d, err := durationConfig(GoodputName, config, "restart_penalty", 0, MaxResizeCooldown)
	if err != nil {
		return err
	}
	p.stickiness.Store(math.Float64bits(s))
	p.penalty.Store(int64(d))
	return nil
}

// Plan implements policy.Policy.
func (p *Goodput) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	g := goodputRound{c: c, jobs: c.Jobs(), bonus: 1 + math.Float64frombits(p.stickiness.Load())}
	var setup func()
	if d := time.Duration(p.penalty.Load()).Seconds(); d > 0 {
		setup = func() { g.restartPenalty(d, s.Now) }
	}
	if err := g.counts(ctx, setup); err != nil {
		return nil, err
	}
	g.place()
	return c.Plan(GoodputName), nil
}

// restartPenalty sets the raise of each running job's held count by
// Pollux's restart penalty of d seconds at now (see Goodput).
func (g *goodputRound) restartPenalty(d float64, now time.Time) {
	g.bump, g.priced = make([]float64, len(g.jobs)), true
	for j, job := range g.jobs {
		if g.cur[j] == 0 {
			continue
		}
		age := max(now.Sub(job.Submitted).Seconds(), 0)
		ratio := max(age-float64(max(job.Restarts, 0))*d, 0) / (age + d)
		g.bump[j] = MaxRestartPenaltyRaise
		if ratio > 1/MaxRestartPenaltyRaise {
			g.bump[j] = 1/ratio - 1
		}
	}
}

// goodputRound is the state of one Goodput round.
type goodputRound struct {
	c      *place.Board
	jobs   []*policy.Job // c.Jobs()
	bonus  float64
	cur    []int       // by job: GPUs held after the board's repairs
	target []int       // by job: the count of step 1
	linear []bool      // by job: speedup unknown or unusable
	h      place.Steps // scratch
	// req is each job's GPU request, copied out of the jobs (counts): the
	// round reads it for every step of every job, in the heap's order, and
	// at 100,000 jobs each read of a job was a cache miss (a fifth of
	// goodput-hetero's round), where this array is 2.4 MB.
	req []policy.GPURequest
	// The options of goodput-jct (the goodput builtin sets none): weight,
	// if set, scales each job's scores; bump, if set, raises each running
	// job's speedup at the count it holds by that fraction (what a restart
	// would cost it); repack re-places the jobs a round starts or resizes
	// (see repackResized).
	weight []float64
	bump   []float64
	priced bool // restarts are priced (bump): see fillLimit
	repack bool
	// oneNode, if set, grows an elastic job to a count that fits on one
	// node only on one node (growOneNode) and gives shrunk jobs back the
	// GPUs nobody took (undoShrinks); nodes are the snapshot's.
	oneNode bool
	nodes   []policy.Node
	caps    map[nodeCapKey]int // nodeCap's answers
	// hp, if set, confines each job's steps to one GPU model (goodput-
	// hetero): its speedup is its table there, its scores are scaled by
	// that model's price, and a model's GPUs are counted apart.
	hp *heteroPools
}

// speedup returns job j's speedup with n GPUs.
func (g *goodputRound) speedup(j int32, n int) float64 {
	if n <= 0 {
		return 0
	}
	v := float64(n)
	switch {
	case g.hp != nil:
		v = g.hp.value(j, n)
	case !g.linear[j]:
		tab := g.jobs[j].Speedup
		v = tab[min(n, len(tab))-1]
	}
	if g.bump != nil && n == g.cur[j] {
		v *= 1 + g.bump[j]
	}
	return v
}

// next returns job j's next step from n GPUs and its score; ok is false if
// there is none. The step goes to the count of best gain per GPU from n, not
// only one worker on: a speedup table is not concave where a job crosses
// to another node (the sync cost jumps), and a one-worker step there gains
// little or nothing although a few more workers gain a lot. The steps thus
// follow the upper concave envelope of the table; ties go to the smaller
// count.
func (g *goodputRound) next(j int32, n int) (to int, score float64, ok bool) {
	return g.nextUpTo(j, n, math.MaxInt)
}

// nextUpTo is next among the steps of at most limit GPUs: where a job's
// best step does not fit, the best one that does (a step to 6 GPUs may be
// best per GPU where 4 and 5 are not, and only 2 are left).
func (g *goodputRound) nextUpTo(j int32, n, limit int) (to int, score float64, ok bool) {
	r := g.req[j]
	switch {
	case n == 0:
		to = r.Min
	case n+r.PerWorker <= r.Max:
		to = n + r.PerWorker
	default:
		return 0, 0, false
	}
	if to-n > limit {
		return 0, 0, false
	}
	base := g.speedup(j, n)
	gain := g.speedup(j, to) - base
	score = gain / float64(to-n)
	if last := g.tableLen(j); last > 0 {
		// Beyond the table more GPUs add nothing, so look no further.
		hi := min(r.Max, last)
		if limit < hi-n {
			hi = n + limit
		}
		for m := to + r.PerWorker; m <= hi; m += r.PerWorker {
			if sc := (g.speedup(j, m) - base) / float64(m-n); sc > score*(1+1e-9) {
				to, gain, score = m, g.speedup(j, m)-base, sc
			}
		}
	}
	if gain <= 0 {
		if n > 0 {
			return 0, 0, false
		}
		gain = 1e-9 // a job that claims no speedup still runs, last
		score = gain / float64(to-n)
	}
	if g.weight != nil {
		score *= g.weight[j]
	}
	if g.hp != nil {
		score *= g.hp.scale(j)
	}
	if to <= g.cur[j] {
		score *= g.bonus
	}
	if math.IsNaN(score) {
		// Tables of extreme values (Inf - Inf): last, like a job that
		// claims no speedup. The steps' order is then total, so the
		// greedy's choices do not depend on the heap's layout.
		score = 0
	}
	return to, score, true
}

// tableLen returns the length of job j's speedup table, 0 if it scales
// linearly.
func (g *goodputRound) tableLen(j int32) int {
	switch {
	case g.hp != nil:
		return g.hp.tableLen(j)
	case g.linear[j]:
		return 0
	}
	return len(g.jobs[j].Speedup)
}

// counts is step 1: target counts by greedy marginal speedup per GPU.
// setup, if not nil, is called once cur and linear are known, before the
// first step is scored (to set the options).
func (g *goodputRound) counts(ctx context.Context, setup func()) error {
	c := g.c
	n := len(g.jobs)
	g.cur = make([]int, n)
	g.target = make([]int, n)
	g.linear = make([]bool, n)
	g.req = make([]policy.GPURequest, n)
	capacity := c.FreeGPUs()
	g.h = make(place.Steps, 0, n)
	for j, job := range g.jobs {
		g.req[j] = job.GPUs
		g.cur[j] = c.Held(int32(j))
		capacity += g.cur[j]
		g.linear[j] = !policy.UsableSpeedup(job.Speedup)
	}
	if setup != nil {
		setup()
	}
	rem := capacity
	for j := range g.jobs {
		if to, score, ok := g.next(int32(j), 0); ok {
			g.h = append(g.h, place.Step{Job: int32(j), To: to, Score: score, Running: g.cur[j] > 0})
		}
	}
	g.h.Init()
	failed := 0 // steps dropped since the last dropDead
	for steps := 0; g.h.Len() > 0 && rem > 0; steps++ {
		if steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("failed to plan: %w", err)
			}
		}
		if failed > dropThreshold(len(g.h)) {
			g.dropDead(rem)
			failed = 0
			continue
		}
		st := &g.h[0]
		cost := st.To - g.target[st.Job]
		if cost > rem || (g.hp != nil && !g.hp.fits(st.Job, cost)) {
			if g.hp != nil && g.target[st.Job] == 0 && g.hp.switchPool(st.Job) {
				// Its model is full: its next choice of model.
				if to, score, ok := g.next(st.Job, 0); ok {
					st.From, st.To, st.Score = 0, to, score
					g.h.Fix(0)
					continue
				}
			}
			g.h.Take()
			failed++
			continue
		}
		rem -= cost
		if g.hp != nil {
			g.hp.take(st.Job, cost)
		}
		g.target[st.Job] = st.To
		if to, score, ok := g.next(st.Job, st.To); ok {
			st.From, st.To, st.Score = st.To, to, score
			g.h.Fix(0)
		} else {
			g.h.Take()
		}
	}
	return nil
}

// dropThreshold is how many steps counts and fill drop one by one, on a
// heap of n steps, before they drop every step that can no longer be
// taken at once (dropDead, dropUnfit): a pass over the heap, paid for by
// the sifts it saves (the tests set dropAfter and dropShare to make a
// pass after every drop).
func dropThreshold(n int) int { return max(dropAfter, n/dropShare) }

var dropAfter, dropShare = 1024, 4

// dropDead takes off the heap at once the steps that can no longer be
// taken with rem GPUs left, as each would be taken off when it came up:
// rem only falls, so a step larger than rem never fits. (goodput-hetero's
// queued jobs are left: theirs moves to their next model when it comes
// up.) In a full cluster most of a round's steps came up only to be
// dropped, one sift each, while the last GPUs waited for a step small
// enough (80,000 a round at 100,000 jobs, some rounds after a burst).
func (g *goodputRound) dropDead(rem int) {
	g.h.Keep(func(st *place.Step) bool {
		j := st.Job
		return st.To-g.target[j] <= rem || (g.hp != nil && g.target[j] == 0)
	})
}

// place is step 2: carry the counts out on the cluster.
func (g *goodputRound) place() {
	c := g.c
	// The jobs shrunk or stopped; those under the one-node rule, and where
	// they held their GPUs, for undoShrinks.
	var shrunk, undo []int32
	var held []place.Holding
	for j := range g.jobs {
		jj := int32(j)
		if cur, t := g.cur[j], g.target[j]; t < cur {
			shrunk = append(shrunk, jj)
			if g.oneNodeRule(jj) {
				undo = append(undo, jj)
				held = append(held, c.HoldingOf(jj))
			}
			c.Shrink(jj, cur-t)
		}
	}
	var starts []int32
	for j := range g.jobs {
		jj := int32(j)
		cur, t := g.cur[j], g.target[j]
		if t <= cur {
			continue
		}
		if cur == 0 {
			starts = append(starts, jj)
			continue
		}
		var got int
		if g.oneNodeRule(jj) {
			got = g.growOneNode(jj, t, cur+g.req[j].PerWorker)
		} else {
			got = g.fit(jj, t)
		}
		if got > cur {
			c.Notef(jj, "grown from %d to %s: best marginal goodput per GPU", cur, policy.GPUs(got))
		}
	}
	// Queued jobs start in the order their first step was taken: by score,
	// then submission order, as the heap took them.
	sortStarts(starts, func(j int32) float64 { _, s, _ := g.next(j, 0); return s })
	for _, j := range starts {
		got := 0
		if g.oneNodeRule(j) {
			got = g.growOneNode(j, g.target[j], g.req[j].Min)
		}
		if got == 0 {
			got = g.fit(j, g.target[j])
		}
		if got > 0 {
			c.NoteStarted(j, "best marginal goodput per GPU", "")
		}
	}
	g.undoShrinks(undo, held)
	for _, j := range shrunk {
		switch cur, now := g.cur[j], c.Held(j); now {
		case cur:
		case 0:
			c.Notef(j, "preempted: its %s add more goodput to other jobs", policy.GPUs(cur))
		default:
			c.Notef(j, "shrunk from %d to %s: the rest add more goodput to other jobs", cur, policy.GPUs(now))
		}
	}
	g.fill()
	if g.repack {
		g.repackResized()
	}
	// A queued job that stays queued shares one reason (the plan's
	// Waiting), and a running job that keeps its GPUs where they are needs
	// none: formatting them for every job every round was a tenth of a
	// whole-Philly replay.
	for j := range g.jobs {
		switch held := c.Held(int32(j)); {
		case held == 0 && g.cur[j] == 0:
			c.Wait(int32(j), goodputNoRoom)
		case held == g.cur[j] && c.Changed(int32(j)):
			c.Notef(int32(j), "kept its %s", policy.GPUs(g.cur[j]))
		}
	}
}

// goodputNoRoom is why a queued job that goodput leaves queued waits.
var goodputNoRoom = []string{"queued: the free GPUs add more goodput to other jobs, or its workers do not fit"}

// fit grows job j toward t GPUs: t if it fits, else the largest count in
// whole workers that does (0 or at least Min). It returns the new total.
func (g *goodputRound) fit(j int32, t int) int {
	c := g.c
	cur := c.Held(j)
	if c.Grow(j, t-cur) {
		return t
	}
	r := g.req[j]
	n := min(t-cur, c.RoomOf(j)) / r.PerWorker * r.PerWorker
	if cur+n < r.Min || n <= 0 || !c.Grow(j, n) {
		return cur
	}
	return cur + n
}

// fill gives GPUs still free to the best-scoring next steps that fit.
func (g *goodputRound) fill() {
	c := g.c
	if c.FreeGPUs() == 0 {
		return
	}
	g.h = g.h[:0]
	for j := range g.jobs {
		jj := int32(j)
		if g.target[j] < g.cur[j] {
			continue // gave GPUs up this round: growing it again would move it
		}
		held, least := c.Held(jj), g.req[j].PerWorker
		if held == 0 {
			least = g.req[j].Min
		}
		free := c.FreeFor(jj)
		if least > free {
			continue // no step of it fits: skipped before it is scored
		}
		if to, score, ok := g.nextUpTo(jj, held, g.fillLimit(free)); ok && to-held <= free {
			g.h = append(g.h, place.Step{Job: jj, From: held, To: to, Score: score, Running: g.cur[j] > 0})
		}
	}
	g.h.Init()
	// grown is what each job grown here held before, in the order first
	// grown: one reason a job, however many steps it took.
	var grown map[int32]int
	var order []int32
	failed := 0 // steps dropped for want of free GPUs since the last dropUnfit
	for g.h.Len() > 0 && c.FreeGPUs() > 0 {
		if failed > dropThreshold(len(g.h)) {
			g.dropUnfit()
			failed = 0
			continue
		}
		st := &g.h[0]
		from := c.Held(st.Job)
		if free := c.FreeFor(st.Job); st.To-from > free {
			if g.priced { // fillLimit: its best step that may fit
				if to, score, ok := g.nextUpTo(st.Job, from, free); ok {
					st.To, st.Score = to, score
					g.h.Fix(0)
					continue
				}
			}
			g.h.Take()
			failed++
			continue
		}
		if !g.growStep(st.Job, from, st.To) {
			g.h.Take()
			continue
		}
		if _, ok := grown[st.Job]; !ok {
			if grown == nil {
				grown = make(map[int32]int)
			}
			grown[st.Job] = from
			order = append(order, st.Job)
		}
		if to, score, ok := g.next(st.Job, st.To); ok {
			st.From, st.To, st.Score = st.To, to, score
			g.h.Fix(0)
		} else {
			g.h.Take()
		}
	}
	for _, j := range order {
		if from := grown[j]; from == 0 {
			c.NoteStarted(j, "into GPUs left free", "")
		} else {
			c.NoteGrown(j, from, "into GPUs left free", "")
		}
	}
}

// dropUnfit takes off fill's heap at once the steps that would be taken
// off when they came up: the free GPUs only fall as fill hands them out,
// so a step larger than its job's bound on them (FreeFor) never fits, nor,
// where restarts are priced (fillLimit), does any step of a job whose
// least step (a worker, or Min to start) is larger. In a full cluster
// most of fill's steps were of jobs on models without a free GPU left.
func (g *goodputRound) dropUnfit() {
	c := g.c
	g.h.Keep(func(st *place.Step) bool {
		j := st.Job
		held, free := c.Held(j), c.FreeFor(j)
		least := g.req[j].PerWorker
		if held == 0 {
			least = g.req[j].Min
		}
		return st.To-held <= free || (g.priced && least <= free)
	})
}

// fillLimit is the largest step fill gives a job where free GPUs are
// left for it: with restarts priced (priced, bump), free, so that a job whose best
// step does not fit takes its best that does, where that gain pays its
// restart; without, any (a step that does not fit is skipped): there
// every small grow into the GPUs left would cost its job a restart nobody
// weighed (on Pollux's workloads the goodput builtin's average JCT rose
// 1-15% with it).
func (g *goodputRound) fillLimit(free int) int {
	if !g.priced {
		return math.MaxInt
	}
	return free
}

// undoShrinks gives each job of js (shrunk or stopped this round, under the
// one-node rule; held is where it held its GPUs) back what it held where
// all of those GPUs are still free after the grows and starts: GPUs that
// nobody took (a grow held back by the one-node rule) would cost the job a
// restart for nothing. Rigid jobs are left to fill, as before the rule.
func (g *goodputRound) undoShrinks(js []int32, held []place.Holding) {
	c := g.c
	for i, j := range js {
		now := c.HoldingOf(j)
		c.Shrink(j, c.Held(j))
		if c.Restore(j, held[i]) {
			g.target[j] = g.cur[j]
			continue
		}
		c.Restore(j, now) // what it held a moment ago is free: this succeeds
	}
}

// growStep grows job j from `from` to `to` GPUs into free GPUs (fill),
// under the one-node rule where it applies; a start that cannot keep to
// it is placed as Grow places it.
func (g *goodputRound) growStep(j int32, from, to int) bool {
	if g.oneNodeRule(j) {
		if g.growOneNode(j, to, to) == to {
			return true
		}
		if from > 0 {
			return false
		}
	}
	return g.c.Grow(j, to-from)
}

// oneNodeRule reports whether the one-node rule (growOneNode) applies to
// job j: goodput-jct sets it for elastic jobs (a rigid job runs at its
// count or not at all).
func (g *goodputRound) oneNodeRule(j int32) bool {
	return g.oneNode && g.req[j].Min < g.req[j].Max
}

// growOneNode grows job j to t GPUs, or to the largest count below t in
// whole workers, at least lo, that it can take: a count that fits on one
// node only on one node, where it is (its own node first) or placed afresh
// (a resize restarts it anyway); a count beyond one node where it is, as
// fit grows. It returns the count, or what it held, where it held it, if
// there is none. Why: the speedup tables are for packed placements, and
// Pollux's measured step times show what a job loses on two nodes where
// one would do: the gradients sync over the network (yolov3's step on 2
// GPUs of two nodes takes 2.3 times as long as on one node, at 8 images a
// GPU: slower than one GPU). Beyond one node the sync is over the network
// anyway (Pollux's throughput model: multi-node or not, and the replicas).
func (g *goodputRound) growOneNode(j int32, t, lo int) int {
	c := g.c
	cur := c.Held(j)
	h := c.HoldingOf(j)
	one := g.nodeCap(j)
	for n := t; n >= max(lo, 1) && n > cur; n -= g.req[j].PerWorker {
		if n > one {
			if c.Grow(j, n-cur) {
				return n
			}
			continue
		}
		if c.Grow(j, n-cur) && c.NodesHeld(j) == 1 {
			return n
		}
		if cur > 0 {
			// Afresh, best fit.
			c.Shrink(j, c.Held(j))
			if c.Grow(j, n) && c.NodesHeld(j) == 1 {
				return n
			}
		}
		c.Shrink(j, c.Held(j))
		c.Restore(j, h) // what it held is free again: this succeeds
	}
	return cur
}

// nodeCap returns the most GPUs of job j that one node can hold, in whole
// workers, on the nodes its constraints allow, with nothing else running.
func (g *goodputRound) nodeCap(j int32) int {
	job := g.jobs[j]
	w, capN := max(job.GPUs.PerWorker, 1), job.Constraints.MaxGPUsPerNode
	// Its constraints, with the GPU model goodput-hetero pinned it to.
	cons := job.Constraints
	if g.hp != nil && g.hp.pool[j] >= 0 {
		cons.GPUModel = g.hp.models[g.hp.pool[j]]
	}
	// Jobs constrained by GPU model alone (goodput-hetero pins one on
	// every job) share the answer: a pass over every node a job was most
	// of a round at 10,000 nodes.
	key := nodeCapKey{cons.GPUModel, w, capN}
	simple := cons.MinGPUMemoryMiB == 0 && cons.Pool == "" && len(cons.NodeAttributes) == 0
	if simple {
		if v, ok := g.caps[key]; ok {
			return v
		}
	}
	v := g.capOf(&cons, w, capN)
	if simple {
		if g.caps == nil {
			g.caps = make(map[nodeCapKey]int)
		}
		g.caps[key] = v
	}
	return v
}

// nodeCapKey is what nodeCap's answer depends on for a job constrained by
// GPU model alone.
type nodeCapKey struct {
	model   string
	w, capN int
}

// capOf is nodeCap's pass over the nodes, for a job of constraints cons.
func (g *goodputRound) capOf(cons *policy.Constraints, w, capN int) int {
	most := 0
	for i := range g.nodes {
		nd := &g.nodes[i]
		if !cons.Allows(nd) {
			continue
		}
		k := nd.GPUs - nd.Reserved
		if capN > 0 {
			k = min(k, capN)
		}
		most = max(most, k/w*w)
	}
	return most
}

// sortStarts orders jobs by score, highest first, then by index (which is
// submission order).
func sortStarts(js []int32, score func(int32) float64) {
	// The scores beside the jobs, not in a map: a round at 100,000 jobs
	// starts thousands, and the sort looked each score up a dozen times.
	type scored struct {
		j     int32
		score float64
	}
	ss := make([]scored, len(js))
	for i, j := range js {
		ss[i] = scored{j, score(j)}
	}
	slices.SortFunc(ss, func(a, b scored) int {
		if x := cmp.Compare(b.score, a.score); x != 0 {
			return x
		}
		return cmp.Compare(a.j, b.j)
	})
	for i, s := range ss {
		js[i] = s.j
	}
}

// repackResized re-places, from scratch and largest first, the jobs that
// this round starts or resizes (they restart anyway), when that puts them
// on fewer nodes in all: the speedup tables are for packed placements, and
// a job spread over more nodes than it needs syncs over the network. If
// any of them does not fit again, or the nodes do not drop, the placements
// stay as they were, and each of them, largest first, is re-placed alone
// where that puts it on fewer nodes (the others kept where they are): one
// job that cannot move, or that another's packing pushes onto more nodes,
// no longer keeps the rest spread.
func (g *goodputRound) repackResized() {
	c := g.c
	var js []int32
	before := 0
	for j := range g.jobs {
		if held := c.Held(int32(j)); held > 0 && held != g.cur[j] {
			js = append(js, int32(j))
			before += c.NodesHeld(int32(j))
		}
	}
	if len(js) == 0 {
		return
	}
	slices.SortFunc(js, func(a, b int32) int {
		if x := cmp.Compare(c.Held(b), c.Held(a)); x != 0 {
			return x
		}
		return cmp.Compare(a, b)
	})
	held := make([]int, len(js))
	hs := make([]place.Holding, len(js))
	for i, j := range js {
		held[i] = c.Held(j)
		hs[i] = c.Preempt(j)
	}
	after, ok := 0, true
	for i, j := range js {
		if !c.Grow(j, held[i]) {
			ok = false
			break
		}
		after += c.NodesHeld(j)
	}
	if ok && after < before {
		return
	}
	// Back to the board as it was: every job of js released, each holding
	// is free again and was valid beside the others, so Restore succeeds.
	for _, j := range js {
		c.Shrink(j, c.Held(j))
	}
	for i, j := range js {
		c.Restore(j, hs[i])
	}
	for i, j := range js {
		n := c.NodesHeld(j)
		if n <= 1 {
			continue
		}
		h := c.Preempt(j)
		if c.Grow(j, held[i]) && c.NodesHeld(j) < n {
			continue
		}
		// Back as it was: what it held is free again, so Restore succeeds.
		c.Shrink(j, c.Held(j))
		c.Restore(j, h)
	}
}
