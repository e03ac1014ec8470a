package builtin

import (
	"context"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/admission"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
)

// QoEName is the name of the QoE (deadline-aware) builtin.
const QoEName = "qoe"

// qoeNoRoom is why a queued job that qoe cannot admit waits (Plan.Waiting).
var qoeNoRoom = []string{"queued: its minimum does not fit, even with the other jobs at what they need"}

// DefaultQoEHeadroom is the QoE builtin's default safety margin: a job is
// on track when its estimated time to target is within (1 - headroom) of
// the time left to its deadline. It is a margin for the planner's
// estimates, which are fitted to noisy reports and are optimistic right
// after a resize; in the simulator, whose estimates are exact, a smaller
// headroom meets slightly more deadlines (docs/sim/deadline/README.md).
const DefaultQoEHeadroom = 0.1

// QoE moves GPUs toward the jobs behind their targets, after the idea of
// DQoES (Mao et al., "Differentiate Quality of Experience Scheduling for
// Deep Learning Inferences/Trainings", 2020): users state a target (a
// metric's goal by a deadline), the scheduler estimates from the reported
// progress when each job reaches it, and GPUs go from jobs comfortably
// ahead of their targets to jobs behind them.
//
// Each job with a deadline is judged from Progress.RemainingWork (seconds
// on one GPU) and its speedup (Job.Speedup; linear where unknown): at g
// GPUs it needs RemainingWork / Speedup(g) seconds. Its need is the least
// count in [Min, Max] (whole workers) that reaches the target within
// (1 - headroom) of the time left to the deadline. Classes:
//
//   - on track: some count in [Min, Max] meets the deadline; need is it;
//   - unknown: a deadline but no estimate yet (RemainingWork 0); need Min;
//   - no target: no deadline, or the target is reached; need Min;
//   - behind: even Max does not reach the target within (1 - headroom) of
//     the time left (or the deadline has passed); need Min.
//
// Semantics, one round:
//  1. On-track jobs, earliest deadline first, are brought up to their need:
//     from idle GPUs, else by shrinking, a worker at a time on the nodes the
//     job may use, jobs without a target (never below Min), then jobs
//     behind (which miss their deadlines anyway: below Min, a job behind is
//     stopped), then jobs of unknown progress (never below Min), each most
//     recently resized first, then on-track jobs due later (latest deadline
//     first): never below their need, unless the donor can spare the time
//     (it would still be on track at its Max if stopped now and started
//     again when the job it gives to is done at its need); such a donor may
//     be shrunk below its need, and below Min it is stopped. A job whose
//     need cannot be met so is left to step 2.
//  2. Every job that holds nothing is admitted at Min, on-track and unknown
//     jobs earliest deadline first, then jobs without a target in
//     submission order, then jobs behind, shrinking the same donors in the
//     same way when Min does not fit. A job that does not fit waits, and
//     later jobs are still admitted (no head-of-line blocking).
//  3. Idle GPUs grow running jobs toward Max, a worker at a time, each to
//     the job whose next worker adds the most speedup per GPU (Pollux's
//     idea; ties to the job with fewer GPUs, then submission order). Jobs
//     shrunk this round are not grown; with resize_cooldown > 0, nor are
//     jobs resized less than resize_cooldown ago.
//
// A job holding more than it needs keeps it until another job needs it, so
// estimates that wobble do not move GPUs back and forth. The only jobs ever
// stopped are jobs behind, and on-track jobs with time to spare, for on-track
// jobs due earlier: without the latter, on-track jobs already running kept
// their need against queued ones due sooner, and under load the queued ones
// (often short) turned behind before they started. Without deadlines in the
// snapshot, QoE is Elastic FIFO without head-of-line blocking.
//
// Config: headroom = a number in [0, 1) (default 0.1); resize_cooldown = a
// Go duration from 0s to MaxResizeCooldown (default "0s").
type QoE struct {
	cooldown atomic.Int64  // nanoseconds
	headroom atomic.Uint64 // math.Float64bits
}

// NewQoE returns a QoE policy with the default configuration.
func NewQoE() *QoE {
	p := &QoE{}
	p.headroom.Store(math.Float64bits(DefaultQoEHeadroom))
	return p
}

// PluginInfo implements policy.Base.
func (p *QoE) PluginInfo() policy.Info {
	return policy.Info{Name: QoEName, Version: Version, IgnoresPriority: true,
		Description: "deadline-aware (DQoES's idea): moves GPUs from jobs ahead of their targets to jobs behind them; the rest share idle GPUs"}
}

// SetConfig implements policy.Base.
func (p *QoE) SetConfig(config map[string]string) error {
	d, err := cooldownConfig(QoEName, config, "headroom")
	if err != nil {
		return err
	}
	h, err := floatConfig(QoEName, config, "headroom", DefaultQoEHeadroom, func(x float64) bool { return x >= 0 && x < 1 }, "a number in [0, 1)")
	if err != nil {
		return err
	}
	p.cooldown.Store(int64(d))
	p.headroom.Store(math.Float64bits(h))
	return nil
}

type qoeClass uint8

const (
	qoeOnTrack qoeClass = iota
	qoeUnknown
	qoeNone
	qoeBehind
)

// qoeRound is the state of one QoE round.
type qoeRound struct {
	c        *place.Board
	jobs     []*policy.Job // c.Jobs()
	now      time.Time
	headroom float64
	class    []qoeClass // by job
	need     []int      // by job
	edf      []int32    // the jobs, earliest deadline first
	shrunk   []bool     // by job: shrunk in this round
	// donors are the jobs that hold GPUs, or held some since donors was
	// made, in the order they give GPUs up (donorBefore); nil until needed.
	// A job that holds none has none to give (place.Board.TakeFor passes
	// it over), so the queued jobs are left out until they start (donor).
	donors  []int32
	isDonor []bool  // by job: in donors
	edfAt   []int32 // by job: its place in edf
	// surplus is the sum over jobs of the GPUs above their floor: with
	// the free GPUs, a bound on what a job can gain (checked before
	// looking for donors, which is what makes a busy round cheap).
	surplus int
	// preempt is set while on-track jobs are brought up to their need:
	// then jobs behind (which miss their deadlines anyway) may be stopped.
	preempt bool
	// recipient is the job that grow is finding GPUs for (-1 outside
	// grow): in step 1, on-track jobs due after it that can spare the time
	// may be shrunk below their need, or stopped, for it (see spare).
	recipient int32
}

// Plan implements policy.Policy.
func (p *QoE) Plan(ctx context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	jobs := c.Jobs()
	q := &qoeRound{c: c, jobs: jobs, now: s.Now, headroom: math.Float64frombits(p.headroom.Load()),
		class: make([]qoeClass, len(jobs)), need: make([]int, len(jobs)),
		edf: c.DeadlineOrder(), shrunk: make([]bool, len(jobs)), recipient: -1}
	for j := range jobs {
		q.judge(int32(j))
	}
	capacity := 0
	for _, n := range s.Nodes {
		capacity += n.GPUs
	}
	q.shares(capacity)
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}

	// 1. On-track jobs up to their need.
	q.preempt = true
	for _, j := range q.edf {
		if q.class[j] != qoeOnTrack || c.Held(j) >= q.need[j] {
			continue
		}
		from := c.Held(j)
		if !q.grow(j, q.need[j]-from, "which is behind its target") {
			continue
		}
		if from == 0 {
			c.NoteStarted(j, "what its target needs", q.outlook(j, c.Held(j)))
		} else {
			c.Notef(j, "grown from %d to %s: behind its target at %d; %s", from, policy.GPUs(c.Held(j)), from, q.outlook(j, c.Held(j)))
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}

	q.preempt = false
	for j := range q.jobs {
		q.surplus += q.above(int32(j))
	}

	// 2. Admission at Min.
	for _, j := range q.order(qoeOnTrack, qoeUnknown, qoeNone, qoeBehind) {
		if c.Held(j) > 0 {
			continue
		}
		if c.FreeGPUs() == 0 && q.surplus <= 0 {
			// Nothing to start it on (its Min is at least 1): what grow
			// would find, without reading the job (thousands wait a
			// round under load).
			c.Wait(j, qoeNoRoom)
			continue
		}
		job := q.jobs[j]
		if !q.grow(j, job.GPUs.Min, "to admit it") {
			c.Wait(j, qoeNoRoom)
			continue
		}
		c.NoteStarted(j, "its minimum", q.outlook(j, job.GPUs.Min))
	}

	// 3. Growth into idle GPUs, a worker at a time, where it adds the most
	// speedup per GPU.
	q.fill(time.Duration(p.cooldown.Load()))
	return c.Plan(QoEName), nil
}

// fill grows running jobs into the idle GPUs, a worker at a time, each to
// the job whose next worker adds the most speedup per GPU (ties: the job
// with fewer GPUs, then submission order), skipping jobs shrunk this round
// and, with cooldown > 0, jobs resized less than cooldown ago.
func (q *qoeRound) fill(cooldown time.Duration) {
	c := q.c
	var h place.Steps
	from := make(map[int32]int)
	next := func(j int32) (place.Step, bool) {
		r, t := q.jobs[j].GPUs, c.Held(j)
		if t+r.PerWorker > r.Max {
			return place.Step{}, false
		}
		gain := (policy.SpeedupAt(q.jobs[j].Speedup, t+r.PerWorker) - policy.SpeedupAt(q.jobs[j].Speedup, t)) / float64(r.PerWorker)
		return place.Step{Job: j, From: t, To: t + r.PerWorker, Score: gain, Running: true}, gain > 0
	}
	for j, job := range q.jobs {
		jj := int32(j)
		if c.Held(jj) == 0 || q.shrunk[j] {
			continue
		}
		if cooldown > 0 && job.Allocation.Total() > 0 && q.now.Sub(job.LastResized) < cooldown {
			continue
		}
		if st, ok := next(jj); ok {
			h = append(h, st)
		}
	}
	h.Init()
	for h.Len() > 0 && c.FreeGPUs() > 0 {
		st := h.Take()
		if st.To-st.From > c.FreeGPUs() || !c.Grow(st.Job, st.To-st.From) {
			continue
		}
		if _, ok := from[st.Job]; !ok {
			from[st.Job] = st.From
		}
		if st, ok := next(st.Job); ok {
			h.Add(st)
		}
	}
	for j := range q.jobs {
		if f, ok := from[int32(j)]; ok {
			c.NoteGrown(int32(j), f, "into idle GPUs", q.outlook(int32(j), c.Held(int32(j))))
		}
	}
}

// judge sets job j's class and need.
func (q *qoeRound) judge(j int32) {
	job := q.jobs[j]
	r, pr := job.GPUs, &job.Progress
	q.need[j] = r.Min
	switch {
	case pr.Deadline.IsZero() || pr.Reached:
		q.class[j] = qoeNone
	case pr.RemainingWork <= 0:
		q.class[j] = qoeUnknown
	default:
		q.class[j] = qoeBehind
		budget := pr.Deadline.Sub(q.now).Seconds() * (1 - q.headroom)
		for g := r.Min; g <= r.Max && budget > 0; g += r.PerWorker {
			if pr.RemainingWork/policy.SpeedupAt(job.Speedup, g) <= budget {
				q.class[j], q.need[j] = qoeOnTrack, g
				break
			}
		}
	}
}

// shares judges the jobs on track alone again, by their least satisfying
// shares of the cluster's GPUs over time given one another
// (plugins/policy/admission, within 1 - headroom of the time to their
// deadlines): earliest deadline first, among jobs due at the same time
// those the planner admitted first, then those it did not judge, then
// those it did not admit, each reserves its share in turn. A job whose
// deadline cannot be met beside the jobs before it is behind (ElasticFlow
// drops it to best effort); the others need what their share gives them
// now, and at least what they need alone. Where the on-track jobs' Max sum to at most capacity, every job's
// share is what it needs alone (judge's): nothing to do.
//
// Plain deadline order, not the planner's admitted jobs before all others:
// on the Philly deadline week (docs/sim/deadline/README.md) keeping the
// jobs the planner did not admit behind every admitted one for good met
// 104 fewer deadlines, since jobs refused at submission under load would
// often have made it once capacity freed.
func (q *qoeRound) shares(capacity int) {
	on := make([]int32, 0, len(q.edf))
	sum := 0
	for _, j := range q.edf {
		if q.class[j] == qoeOnTrack {
			on = append(on, j)
			sum += q.jobs[j].GPUs.Max
		}
	}
	if sum <= capacity {
		return
	}
	// Ties of deadline: admitted first (q.edf is in deadline order).
	for i := 0; i < len(on); {
		k := i + 1
		for k < len(on) && q.jobs[on[k]].Progress.Deadline.Equal(q.jobs[on[i]].Progress.Deadline) {
			k++
		}
		if k-i > 1 {
			slices.SortStableFunc(on[i:k], func(a, b int32) int {
				return admissionRank(q.jobs[a].Progress.Admission) - admissionRank(q.jobs[b].Progress.Admission)
			})
		}
		i = k
	}
	l := admission.NewLedger(capacity, admission.Options{})
	for _, j := range on {
		job := q.jobs[j]
		r, pr := job.GPUs, &job.Progress
		aj := admission.Job{Due: pr.Deadline.Sub(q.now).Seconds() * (1 - q.headroom), Work: pr.RemainingWork,
			Speedup: job.Speedup, Min: r.Min, Max: r.Max, PerWorker: r.PerWorker}
		sh := l.Fit(&aj)
		if !sh.OK {
			q.class[j], q.need[j] = qoeBehind, r.Min
			continue
		}
		l.Reserve(&aj, sh)
		// Never less than the constant count it needs alone (judge's): a
		// share that is small now and grows later counts on GPUs that
		// later arrivals may take (and kept a job due in a minute at its
		// start size until the GPUs it was counting on came free).
		q.need[j] = max(q.need[j], sh.Now)
	}
}

// admissionRank orders jobs by their deadline admission: admitted, not
// judged, not admitted.
func admissionRank(a string) int {
	switch a {
	case policy.AdmissionAdmitted:
		return 0
	case policy.AdmissionUnadmitted:
		return 2
	}
	return 1
}

// order returns the jobs of the given classes, class by class in that
// order; within a class, jobs with a deadline earliest first and the others
// in submission order.
func (q *qoeRound) order(classes ...qoeClass) []int32 {
	// One pass over the jobs to count, one to place, rather than one a
	// class (classes are distinct).
	rank := [...]int{qoeOnTrack: -1, qoeUnknown: -1, qoeNone: -1, qoeBehind: -1}
	for r, cl := range classes {
		rank[cl] = r
	}
	var at [len(rank) + 1]int // at[r+1]: the jobs of rank r; then where the next goes
	for _, j := range q.edf {
		if r := rank[q.class[j]]; r >= 0 {
			at[r+1]++
		}
	}
	for r := range classes {
		at[r+1] += at[r]
	}
	out := make([]int32, at[len(classes)])
	for _, j := range q.edf {
		if r := rank[q.class[j]]; r >= 0 {
			out[at[r]] = j
			at[r]++
		}
	}
	return out
}

// floor is how far donor d may shrink.
func (q *qoeRound) floor(d int32) int {
	switch {
	case q.class[d] == qoeOnTrack:
		if q.preempt && q.recipient >= 0 && q.spare(d, q.recipient) {
			return 0
		}
		return q.need[d]
	case q.class[d] == qoeBehind && q.preempt:
		return 0
	}
	return q.jobs[d].GPUs.Min
}

// spare reports whether on-track job d, whose deadline is after b's, would
// still be on track at its Max if it stopped now and started again when b,
// at its need, is done.
func (q *qoeRound) spare(d, b int32) bool {
	jd, jb := q.jobs[d], q.jobs[b]
	if q.class[b] != qoeOnTrack || !jd.Progress.Deadline.After(jb.Progress.Deadline) {
		return false
	}
	tb := jb.Progress.RemainingWork / policy.SpeedupAt(jb.Speedup, q.need[b])
	left := jd.Progress.Deadline.Sub(q.now).Seconds() - tb
	return jd.Progress.RemainingWork/policy.SpeedupAt(jd.Speedup, jd.GPUs.Max) <= left*(1-q.headroom)
}

// above is how many GPUs job j holds above its floor: none if it holds
// none, as no floor is negative (NewBoard refuses PerWorker < 1 and
// Min < PerWorker), found without reading the thousands of queued jobs.
func (q *qoeRound) above(j int32) int {
	h := q.c.Held(j)
	if h == 0 {
		return 0
	}
	return max(0, h-q.floor(j))
}

// grow gives job b gain more GPUs, from idle ones or else from donors (see
// QoE); or changes nothing and returns false. why ends the donors' reason.
func (q *qoeRound) grow(b int32, gain int, why string) bool {
	c := q.c
	// Outside step 1 the surplus bounds what b can gain.
	before := q.above(b)
	// Grow cannot place more than the free GPUs: thousands of queued jobs
	// a round need not ask it.
	if c.FreeGPUs() >= gain && c.Grow(b, gain) {
		q.surplus += q.above(b) - before
		q.donor(b)
		return true
	}
	if !q.preempt && c.FreeGPUs()+q.surplus-before < gain {
		return false
	}
	if q.donors == nil {
		q.makeDonors()
	}
	q.recipient = b
	taken, ok := c.TakeFor(b, gain, q.donors, q.floor)
	q.recipient = -1
	if ok {
		q.donor(b)
	}
	if ok && !q.preempt {
		q.surplus += q.above(b) - before
	}
	for _, t := range taken {
		q.shrunk[t.Job] = true
		if tot := c.Held(t.Job); tot < q.jobs[t.Job].GPUs.Min {
			// Below its min it cannot run: stopped (preempted), and the
			// rest of its GPUs are free.
			c.Shrink(t.Job, tot)
			c.Notef(t.Job, "preempted (%s) for job %s, %s; this job: %s", policy.GPUs(t.GPUs+tot), q.jobs[b].ID, why, q.outlook(t.Job, 0))
			continue
		}
		if !q.preempt {
			q.surplus -= t.GPUs
		}
		c.Notef(t.Job, "shrunk from %d to %s for job %s, %s; this job: %s",
			c.Held(t.Job)+t.GPUs, policy.GPUs(c.Held(t.Job)), q.jobs[b].ID, why, q.outlook(t.Job, c.Held(t.Job)))
	}
	return ok
}

// donorRank is the group of a job's class in the donors' order: jobs
// without a deadline (or past their target), then those behind, then
// those not estimated yet, each the latest resized first (then the latest
// submitted); then the on-track jobs, the latest deadline first.
var donorRank = [...]int{qoeNone: 0, qoeBehind: 1, qoeUnknown: 2, qoeOnTrack: 3}

// donorBefore reports whether job x gives GPUs up before job y.
func (q *qoeRound) donorBefore(x, y int32) bool {
	if rx, ry := donorRank[q.class[x]], donorRank[q.class[y]]; rx != ry {
		return rx < ry
	}
	if q.class[x] == qoeOnTrack {
		return q.edfAt[x] > q.edfAt[y]
	}
	if d := q.jobs[x].LastResized.Compare(q.jobs[y].LastResized); d != 0 {
		return d > 0
	}
	return x > y
}

// makeDonors orders the jobs that hold GPUs as donors.
func (q *qoeRound) makeDonors() {
	q.isDonor = make([]bool, len(q.jobs))
	q.edfAt = make([]int32, len(q.jobs))
	for i, j := range q.edf {
		q.edfAt[j] = int32(i)
	}
	q.donors = make([]int32, 0, 64)
	for j := range q.jobs {
		if q.c.Held(int32(j)) > 0 {
			q.donors = append(q.donors, int32(j))
			q.isDonor[j] = true
		}
	}
	slices.SortFunc(q.donors, func(x, y int32) int {
		switch {
		case x == y:
			return 0
		case q.donorBefore(x, y):
			return -1
		}
		return 1 // a total order: x and y differ
	})
}

// donor puts job b, which now holds GPUs, in its place among the donors
// (once they are made) if it is not there yet.
func (q *qoeRound) donor(b int32) {
	if q.donors == nil || q.isDonor[b] {
		return
	}
	i, _ := slices.BinarySearchFunc(q.donors, b, func(d, b int32) int {
		if q.donorBefore(d, b) {
			return -1
		}
		return 1
	})
	q.donors = slices.Insert(q.donors, i, b)
	q.isDonor[b] = true
}

// outlook says how job j stands at g GPUs, for the reasons.
func (q *qoeRound) outlook(j int32, g int) string {
	job := q.jobs[j]
	pr := &job.Progress
	switch q.class[j] {
	case qoeNone:
		if pr.Reached {
			return "target reached"
		}
		return "no deadline"
	case qoeUnknown:
		return "no estimate of its progress yet"
	}
	left := pr.Deadline.Sub(q.now)
	if left <= 0 {
		return fmt.Sprintf("its deadline passed %s ago", (-left).Round(time.Second))
	}
	if g <= 0 {
		if q.class[j] == qoeBehind {
			return fmt.Sprintf("behind: misses its deadline even at %s (with the headroom)", policy.GPUs(job.GPUs.Max))
		}
		return "on track"
	}
	sec := pr.RemainingWork / policy.SpeedupAt(job.Speedup, g)
	eta := time.Duration(sec * float64(time.Second)).Round(time.Second)
	est := fmt.Sprintf("about %s to its target at %s, %s to the deadline", eta, policy.GPUs(g), left.Round(time.Second))
	switch {
	case sec <= left.Seconds()*(1-q.headroom):
		return "on track: " + est
	case q.class[j] == qoeBehind:
		return fmt.Sprintf("behind: %s; misses it even at %s (with the headroom)", est, policy.GPUs(job.GPUs.Max))
	}
	return fmt.Sprintf("behind: %s; it needs %d", est, q.need[j])
}
