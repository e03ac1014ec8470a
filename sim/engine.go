package sim

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Launcher is how a job's GPU count changes while it runs.
type Launcher string

const (
	// LauncherRestart stops and restarts the job from a checkpoint on every
	// change (AdaptDL, Pollux's simulator): RestartDelay each time.
	LauncherRestart Launcher = "restart"
	// LauncherInPlace grows and shrinks the running job without a restart
	// (Horovod elastic, Schedulearn's driver): InPlaceDelay per grow or
	// shrink; starts, resumes and moves still cost RestartDelay.
	LauncherInPlace Launcher = "inplace"
)

// Config is the simulated cluster and its costs.
type Config struct {
	// Nodes x GPUsPerNode is a cluster of one GPU model, unless Groups
	// is set.
	Nodes, GPUsPerNode int
	// Groups, if set, is the cluster instead: groups of nodes, each of
	// one GPU model (policy.Node.GPUModel), in this order (node IDs
	// follow it). Jobs whose model is a TypedModel run at the speed of
	// the model of their GPUs.
	Groups []NodeGroup
	// SpeedupNodeGPUs, if above 0, is the node size for which the jobs'
	// speedup tables (policy.Job.Speedup) are made, instead of the size
	// of the nodes of the job's GPU model: Sia's heterogeneity-unaware
	// baseline sees 8-GPU nodes as two of 4.
	SpeedupNodeGPUs int
	// SpeedupModel, if set, is the GPU model whose speedup tables every
	// job of a TypedModel reports, wherever it runs (a policy blind to
	// models learns one curve a job).
	SpeedupModel string
	// Round is the time between scheduling rounds (60 s by default).
	Round time.Duration
	// EventRounds adds a round at every arrival and completion; without it
	// (the default, as Pollux's simulator) jobs arrive and complete at their
	// exact times but wait for the next timed round.
	EventRounds bool
	// RestartDelay is what a (re)start costs a job: it holds its GPUs and
	// makes no progress. InPlaceDelay is the same for an in-place rescale.
	RestartDelay, InPlaceDelay time.Duration
	Launcher                   Launcher
	// Gantt records every GPU's holders over time (for the Gantt chart).
	Gantt bool
	// WholeSeconds ends the epochs of the jobs whose model steps in whole
	// seconds (WholeSecondModel: the Pollux workloads' Goodput) on whole
	// seconds, as Pollux's simulator does; off, they end at their exact
	// times.
	WholeSeconds bool
	// SkipQuietRounds skips a timed round when nothing has happened since
	// the last one (no arrival, completion or change of a job's rate or
	// speedup), that round changed nothing, and the policy's plan stays
	// the same until after it (policy.Steady); the run is then the same,
	// only faster. For a policy that is not a policy.Steady, every quiet
	// round is skipped: only correct if its plan does not depend on the
	// time; one that cannot tell (ok false) has every round planned.
	// Simultaneous events still run a round each.
	SkipQuietRounds bool
	// Progress, if set, is called now and then with the jobs finished so far.
	Progress func(finished, total int, now float64)
	// Queues, if set, puts each job in its queue (JobSpec.Queue) and
	// reports per queue (Result.Queues); unless Queues.Off, the planner
	// enforces them.
	Queues *Queues
	// DeadlineAdmission is the planner's deadline admission mode where
	// Queues sets no tree (quota.AdmissionWarn, the default where "", or
	// quota.AdmissionReject); with a tree, each queue's. A job the planner
	// refuses at submission for its deadline never runs and counts as
	// missing it (Result.Refused), as ElasticFlow counts the jobs it drops.
	DeadlineAdmission string
}

// Validate checks the configuration.
func (c *Config) Validate() error {
	var errs []error
	switch {
	case len(c.Groups) > 0:
		for _, g := range c.Groups {
			if g.Nodes < 1 || g.Nodes > MaxNodes || g.GPUsPerNode < 1 || g.GPUsPerNode > MaxGPUsPerNode {
				errs = append(errs, fmt.Errorf("node group %s: nodes must be 1 to %d, GPUs a node 1 to %d", g, MaxNodes, MaxGPUsPerNode))
			}
		}
		if err := checkGroups(c.Groups); err != nil {
			errs = append(errs, err)
		}
	case c.Nodes < 1 || c.GPUsPerNode < 1:
		errs = append(errs, fmt.Errorf("the cluster must have nodes (%d) and GPUs per node (%d)", c.Nodes, c.GPUsPerNode))
	}
	if c.SpeedupNodeGPUs < 0 || c.SpeedupNodeGPUs > MaxGPUsPerNode {
		errs = append(errs, fmt.Errorf("speedup node size %d is not 0 to %d", c.SpeedupNodeGPUs, MaxGPUsPerNode))
	}
	if c.Round < MinRound {
		errs = append(errs, fmt.Errorf("round %s is shorter than %s", c.Round, MinRound))
	}
	if c.RestartDelay < 0 || c.InPlaceDelay < 0 {
		errs = append(errs, errors.New("delays must not be negative"))
	}
	if c.Launcher != LauncherRestart && c.Launcher != LauncherInPlace {
		errs = append(errs, fmt.Errorf("launcher %q is not restart or inplace", c.Launcher))
	}
	switch c.DeadlineAdmission {
	case "", quota.AdmissionWarn, quota.AdmissionReject:
	default:
		errs = append(errs, fmt.Errorf("deadline admission %q is not %s or %s", c.DeadlineAdmission, quota.AdmissionWarn, quota.AdmissionReject))
	}
	return errors.Join(errs...)
}

// ClusterGroups returns the cluster's node groups: Groups, or one group of
// Nodes x GPUsPerNode of no model.
func (c *Config) ClusterGroups() []NodeGroup {
	if len(c.Groups) > 0 {
		return c.Groups
	}
	return []NodeGroup{{Nodes: c.Nodes, GPUsPerNode: c.GPUsPerNode}}
}

// TotalGPUs returns the cluster's GPUs.
func (c *Config) TotalGPUs() int {
	n := 0
	for _, g := range c.ClusterGroups() {
		n += g.Nodes * g.GPUsPerNode
	}
	return n
}

// LargestNode returns the GPUs of the cluster's largest node.
func (c *Config) LargestNode() int {
	n := 0
	for _, g := range c.ClusterGroups() {
		n = max(n, g.GPUsPerNode)
	}
	return n
}

// Bounds of a run: they keep its clock within time.Duration (292 years)
// and its loop finite whatever the input.
const (
	// MinRound is the shortest round.
	MinRound = time.Second
	// MaxSimSeconds is the simulated time after which a run fails (200
	// years): jobs that have not finished by then never will (a model
	// whose rate does not add up), and a run must not go on forever.
	MaxSimSeconds = 200 * 365 * 24 * 3600
)

// DefaultConfig is the Pollux simulator's setting: 16 nodes x 4 GPUs,
// 60 s rounds, a 30 s restart on every re-allocation.
func DefaultConfig() Config {
	return Config{Nodes: 16, GPUsPerNode: 4, Round: time.Minute, RestartDelay: 30 * time.Second,
		InPlaceDelay: 5 * time.Second, Launcher: LauncherRestart, Gantt: true}
}

// simJob is one job's state in a run.
type simJob struct {
	// What every round's pass over the active jobs reads (schedule:
	// advance, report) comes first, in 64 bytes: with thousands of jobs
	// queued, each job's is then one or two cache misses, not four and
	// one of its spec.
	finished bool
	deadline bool // spec.HasDeadline
	gpus     int
	done     float64   // progress at time t
	t        float64   // when done and attained were last brought up to date
	speedup  []float64 // the model's speedup table (policy.Job.Speedup)
	speedTo  float64   // progress up to which speedup holds

	spec  *JobSpec
	idx   int32
	alloc policy.Allocation // what it holds

	placement []int // GPUs per node, largest first, zeros dropped
	work      float64
	rate      float64    // progress per second once pauseUntil is past
	until     float64    // progress up to which rate holds
	pause     float64    // end of the current (re)start delay
	attained  float64    // GPU-seconds held
	reported  lastReport // what the planner was last told
	seq       uint64     // version of the job's pending event

	arrived, started bool
	// refused: the planner refused it at submission (deadline admission);
	// it never ran (finished is set too).
	refused               bool
	firstStart, end       float64
	restarts, preemptions int

	remaining remainingWorker // the model, if it knows its remaining work
	whole     bool            // WholeSecondModel: its events fall on whole seconds
	queue     int             // index in simulator.queues (Config.Queues)

	// On a heterogeneous cluster (Config.Groups): typed is the model if
	// it is a TypedModel; gpu is the GPU model of the job's GPUs (the
	// one it last held, or the cluster's default before its first
	// start), mixed whether its GPUs are of more than one model;
	// byModel is its goodput by model (policy.Job.ByModel), up to
	// progress byTo.
	typed   TypedModel
	gpu     string
	mixed   []string
	byModel map[string][]float64
	byTo    float64
}

// event is a job reaching a point where its rate changes or it is done.
type event struct {
	t   float64
	job int32
	seq uint64
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].t != h[j].t {
		return h[i].t < h[j].t
	}
	return h[i].job < h[j].job
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// simulator is one run.
type simulator struct {
	cfg     Config
	policy  policy.Policy
	planner *planner.Planner
	start   time.Time
	round   float64

	nodes   []policy.Node
	nodeIdx map[string]int
	jobs    []*simJob // submission order
	byID    map[string]*simJob
	// ended are the jobs whose work is done and whose records the
	// planner has not yet ended (simActuator.Outcome reads it for every
	// running job every round: a handful, not every job of the trace).
	ended  map[string]bool
	active []*simJob // arrived, not finished
	events eventHeap

	now      float64
	tie      time.Duration // added to the planner's clock while submitting (loop)
	busy     int
	finished int
	util     []UtilPoint
	planMs   []float64
	rounds   int
	skipped  int
	steps    int   // of the loop: the times the clock moved
	dirty    bool  // something happened since the last round
	err      error // a model gave what the loop cannot use
	// steady is the policy, if it tells until when its plan stays the
	// same (policy.Steady); until is that time, in seconds, as of the
	// last round (+Inf: forever, as for a time-invariant policy; -Inf:
	// it could not tell).
	steady policy.Steady
	until  float64

	queues   []queueTrack // per queue (Config.Queues), by name
	queueIdx map[string]int
	queueT   float64 // when queues were last brought up to date
	queueOn  bool    // the first job has arrived

	owner    [][]int32 // per node, per GPU: the job holding it, or -1
	since    [][]float64
	segments []Segment

	gpus     int            // the cluster's
	gpuBase  []int32        // per node: the index of its first GPU (Gantt)
	perNode  map[string]int // per GPU model: the GPUs of its nodes
	capacity map[string]int // per GPU model: its GPUs
	defModel string         // the GPU model of the largest group
}

// Run simulates specs (in submission order, as Trace.Specs returns them) on
// the cluster of cfg, scheduled by p, and returns the measurements. start is
// the wall-clock time of second 0, which the policy sees as Snapshot.Now.
func Run(ctx context.Context, cfg Config, start time.Time, specs []JobSpec, p policy.Policy) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("failed to simulate: %w", err)
	}
	wall := time.Now()
	s := &simulator{cfg: cfg, policy: p, start: start, round: cfg.Round.Seconds(),
		nodeIdx: make(map[string]int, cfg.Nodes), byID: make(map[string]*simJob, len(specs)), ended: map[string]bool{}, until: math.Inf(1)}
	s.steady, _ = p.(policy.Steady)
	s.buildCluster()
	for i := range specs {
		sp := &specs[i]
		if _, dup := s.byID[sp.ID]; dup {
			return nil, fmt.Errorf("failed to simulate: job ID %s is not unique", sp.ID)
		}
		if err := checkSpec(sp); err != nil {
			return nil, fmt.Errorf("failed to simulate: %w", err)
		}
		if i > 0 && sp.Submit < specs[i-1].Submit {
			return nil, fmt.Errorf("failed to simulate: jobs are not in submission order at %s", sp.ID)
		}
		j := &simJob{spec: sp, deadline: sp.HasDeadline, idx: int32(i), work: sp.Model.Work()}
		if sp.HasDeadline {
			j.remaining, _ = sp.Model.(remainingWorker)
		}
		if w, ok := sp.Model.(WholeSecondModel); ok {
			j.whole = w.WholeSeconds()
		}
		j.typed, _ = sp.Model.(TypedModel)
		j.gpu = s.defModel
		s.jobs = append(s.jobs, j)
		s.byID[sp.ID] = j
	}
	s.initQueues()
	s.planner = s.newPlanner(p)
	if err := s.loop(ctx); err != nil {
		return nil, err
	}
	return s.result(time.Since(wall)), nil
}

// checkSpec refuses a job whose times the loop cannot order or reach
// (NaN compares false with everything: a NaN submission never arrives).
func checkSpec(sp *JobSpec) error {
	finite := func(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }
	switch {
	case sp.Model == nil:
		return fmt.Errorf("job %s has no model", sp.ID)
	case !finite(sp.Submit) || sp.Submit < 0 || sp.Submit > MaxTraceSeconds:
		return fmt.Errorf("job %s: submission time %g is not from 0 to %d s", sp.ID, sp.Submit, MaxTraceSeconds)
	case sp.HasDeadline && !finite(sp.Deadline):
		return fmt.Errorf("job %s: deadline %g is not a finite time", sp.ID, sp.Deadline)
	}
	if !finite(sp.RestartDelay) || sp.RestartDelay < 0 || sp.RestartDelay > MaxTraceSeconds {
		return fmt.Errorf("job %s: restart delay %g is not from 0 to %d s", sp.ID, sp.RestartDelay, MaxTraceSeconds)
	}
	if w := sp.Model.Work(); !finite(w) || w < 0 {
		return fmt.Errorf("job %s: work %g is not a finite, non-negative amount", sp.ID, w)
	}
	return nil
}

// at is the wall-clock time of simulated second sec, clamped to the
// run's bounds (a deadline may lie beyond them).
func (s *simulator) at(sec float64) time.Time {
	sec = min(max(sec, -MaxSimSeconds), MaxSimSeconds)
	return s.start.Add(time.Duration(math.Round(sec * 1e9)))
}

// loop replays the jobs step by step, from one timed round, event or
// arrival to the next, until every job has finished.
func (s *simulator) loop(ctx context.Context) error {
	next := 0 // the next job to arrive
	// The timed rounds are on a grid from second 0: the next is number n,
	// at n x Round.
	n := 0.0
	if len(s.jobs) > 0 {
		n = s.roundAfter(s.jobs[0].spec.Submit)
	}
	for ; s.finished < len(s.jobs); s.steps++ {
		if s.steps%4096 == 0 {
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("failed to simulate: %w", err)
			}
		}
		nextRound := n * s.round
		t := s.nextStep(nextRound, next)
		if s.err != nil {
			return s.err
		}
		if !(t <= MaxSimSeconds) { // NaN too
			return fmt.Errorf("failed to simulate: %d job(s) unfinished after %d s of simulated time, the most a run may take", len(s.jobs)-s.finished, MaxSimSeconds)
		}
		s.now = t
		changed := s.reachEvents(t)
		arrived, err := s.submitArrivals(ctx, t, &next)
		if err != nil {
			return err
		}
		changed = changed || arrived
		if t >= nextRound || (changed && s.cfg.EventRounds) {
			if n, err = s.runRound(ctx, t, nextRound, n, next); err != nil {
				return err
			}
		}
	}
	if s.cfg.Progress != nil {
		s.cfg.Progress(s.finished, len(s.jobs), s.now)
	}
	return nil
}

// nextStep is the time of the loop's next step: the first of the next
// timed round (at nextRound), the next event and the next arrival (job
// next).
func (s *simulator) nextStep(nextRound float64, next int) float64 {
	t := nextRound
	if len(s.events) > 0 {
		t = min(t, s.events[0].t)
	}
	if next < len(s.jobs) {
		t = min(t, s.jobs[next].spec.Submit)
	}
	return t
}

// reachEvents handles the events due by t, in order (an event a later
// one replaced, or of a finished job, is dropped); it reports whether a
// job finished.
func (s *simulator) reachEvents(t float64) bool {
	finished := false
	for len(s.events) > 0 && s.events[0].t <= t {
		ev := heap.Pop(&s.events).(event)
		j := s.jobs[ev.job]
		if ev.seq != j.seq || j.finished {
			continue
		}
		s.reach(j)
		s.dirty = true
		finished = finished || j.finished
	}
	return finished
}

// submitArrivals submits the jobs from *next on that arrive by t, moving
// *next past them; it reports whether one joined the active jobs (one the
// planner refused does not).
func (s *simulator) submitArrivals(ctx context.Context, t float64, next *int) (bool, error) {
	arrived := false
	for k := 0; *next < len(s.jobs) && s.jobs[*next].spec.Submit <= t; k++ {
		j := s.jobs[*next]
		j.arrived, j.t = true, j.spec.Submit
		s.arrive(j)
		// Jobs that arrive together are submitted a nanosecond apart,
		// so that the queue's order (Submitted, then ID) is the trace's.
		s.tie = time.Duration(k)
		err := s.submit(ctx, j)
		s.tie = 0
		if err != nil {
			return arrived, err
		}
		*next++
		if j.refused {
			continue
		}
		s.active = append(s.active, j)
		arrived, s.dirty = true, true
	}
	return arrived, nil
}

// runRound is the round at t: the timed round number n (at nextRound) or,
// before it, an event round. It plans unless the round is quiet, and
// returns the number of the next timed round (skipping the quiet ones,
// and when no job is active those before the next arrival, job next). It
// fails when the queued jobs can never start.
func (s *simulator) runRound(ctx context.Context, t, nextRound, n float64, next int) (float64, error) {
	quiet := s.quiet(t)
	if quiet {
		s.skipped++
	} else if err := s.schedule(ctx); err != nil {
		return n, err
	}
	if t >= nextRound {
		n++
		if quiet {
			// The timed rounds up to the next event or arrival are
			// as quiet: skipped at once, not one by one.
			n = s.quietUntil(n, next)
		}
	}
	if len(s.active) == 0 && next < len(s.jobs) {
		// Idle: the next round is the first after the next arrival.
		n = max(n, s.roundAfter(s.jobs[next].spec.Submit))
	}
	if s.busy == 0 && len(s.active) > 0 && next == len(s.jobs) && len(s.events) == 0 {
		return n, s.stalled()
	}
	if s.cfg.Progress != nil && (s.rounds+s.skipped)%64 == 0 {
		s.cfg.Progress(s.finished, len(s.jobs), s.now)
	}
	return n, nil
}

// roundAfter is the number of the first timed round at or after second t.
func (s *simulator) roundAfter(t float64) float64 { return math.Ceil(t / s.round) }

// quiet says whether a round at t is skipped (Config.SkipQuietRounds):
// nothing has happened since the last round, and t is before the policy's
// steady time, a second early (the round that would see it change is
// planned).
func (s *simulator) quiet(t float64) bool {
	return s.cfg.SkipQuietRounds && !s.dirty && t+1 < s.until
}

// quietUntil is called after the quiet timed round n-1: it skips the
// timed rounds from number n on that are as quiet, those before the next
// event and the next arrival (job next) that quiet allows, and returns the
// number of the first it does not skip. Up to MaxSimSeconds, past which
// the loop ends.
func (s *simulator) quietUntil(n float64, next int) float64 {
	h := min(s.until-1, MaxSimSeconds)
	if len(s.events) > 0 {
		h = min(h, s.events[0].t)
	}
	if next < len(s.jobs) {
		h = min(h, s.jobs[next].spec.Submit)
	}
	skips := func(m float64) bool {
		t := m * s.round
		return t < h && s.quiet(t)
	}
	// The first round at or after h, corrected for the roundings of
	// h / round and m x round: the same rounds that skipping one by one
	// would skip.
	m := max(n, s.roundAfter(h))
	for m > n && !skips(m-1) {
		m--
	}
	for skips(m) {
		m++
	}
	s.skipped += int(m - n)
	return m
}

// stalled is the error of a run in which queued jobs can never start.
func (s *simulator) stalled() error {
	var ids []string
	for _, j := range s.active {
		if len(ids) == 10 {
			ids = append(ids, "…")
			break
		}
		ids = append(ids, fmt.Sprintf("%s (%d-%d GPUs)", j.spec.ID, j.spec.GPUs.Min, j.spec.GPUs.Max))
	}
	return fmt.Errorf("failed to simulate: stalled at %.0f s: %d job(s) queued, none running, none to come, and policy %s starts none: %s",
		s.now, len(s.active), s.policy.PluginInfo().Name, strings.Join(ids, ", "))
}

// advance brings job j's progress and attained service up to now.
func (s *simulator) advance(j *simJob) {
	if dt := s.now - j.t; dt > 0 && j.gpus > 0 {
		j.attained += float64(j.gpus) * dt
		if from := max(j.t, j.pause); s.now > from {
			j.done += j.rate * (s.now - from)
		}
	}
	j.t = s.now
}

// reach handles job j's event: it has reached the end of its rate (an epoch
// boundary) or of its work.
func (s *simulator) reach(j *simJob) {
	s.advance(j)
	j.done = min(j.until, j.work) // the event is exactly there
	if j.done >= j.work {
		s.complete(j)
		return
	}
	j.rate, j.until = s.rateOf(j)
	s.plan(j)
}

// plan pushes job j's next event.
func (s *simulator) plan(j *simJob) {
	j.seq++
	if j.gpus == 0 || j.rate <= 0 {
		return
	}
	target := min(j.until, j.work)
	from := max(s.now, j.pause)
	t := from + max(target-j.done, 0)/j.rate
	if j.whole && s.cfg.WholeSeconds {
		if r := math.RoundToEven(t); r >= from {
			if r < t {
				// After whatever else happens at r (a round).
				r = math.Nextafter(r, math.Inf(1))
			}
			t = r
		}
	}
	if !(t <= MaxSimSeconds) || math.IsInf(j.rate, 0) { // NaN too
		if s.err == nil {
			s.err = fmt.Errorf("failed to simulate: job %s: at rate %g from progress %g of %g, its next event (%g s) is not within %d s",
				j.spec.ID, j.rate, j.done, j.work, t, MaxSimSeconds)
		}
		return
	}
	heap.Push(&s.events, event{t: t, job: j.idx, seq: j.seq})
}

func (s *simulator) complete(j *simJob) {
	j.finished, j.end = true, s.now
	s.finished++
	s.ended[j.spec.ID] = true
	s.setAllocation(j, nil)
	j.seq++
}

// schedule runs one round of the planner (planner.Planner.Round): the
// jobs report their progress first, as each needs, and the plan's changes
// reach the models through the actuator (simActuator.Apply).
func (s *simulator) schedule(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("failed to simulate: %w", err)
	}
	s.dirty = false
	// One pass over the jobs (each a cache miss, thousands queued): the
	// finished ones leave the active list, the others step on and report.
	n := 0
	var err error
	for _, j := range s.active {
		if j.finished {
			continue
		}
		s.active[n] = j
		n++
		if err == nil {
			s.advance(j)
			err = s.report(ctx, j)
		}
	}
	clear(s.active[n:])
	s.active = s.active[:n]
	if n == 0 {
		return nil
	}
	s.rounds++
	if err != nil {
		return err
	}
	if err := s.planner.Round(ctx); err != nil {
		return fmt.Errorf("failed to simulate: round at %.0f s: %w", s.now, err)
	}
	for id := range s.ended { // the round has ended them, unless it failed to write
		if rec, err := s.planner.Store.GetJob(ctx, id); err == nil && rec.State.Terminal() {
			delete(s.ended, id)
		}
	}
	if s.steady != nil && s.cfg.SkipQuietRounds {
		s.until = math.Inf(-1) // it cannot tell: every round is planned
		if snap := s.planner.LastSnapshot(); snap != nil {
			if u, ok := s.steady.SteadyUntil(snap); ok {
				s.until = u.Sub(s.start).Seconds()
			}
		}
	}
	return nil
}

// ProgressMetric is the metric of the jobs with deadlines (their target's):
// the fraction of the work done, 1 when done.
const ProgressMetric = "progress"

// change carries out one job's change of allocation to a.
func (s *simulator) change(j *simJob, kind policy.ChangeKind, a policy.Allocation) {
	restart, inplace := s.cfg.RestartDelay.Seconds(), s.cfg.InPlaceDelay.Seconds()
	delay := restart
	switch kind {
	case policy.Start:
		if !j.started {
			j.started, j.firstStart = true, s.now
			if !j.spec.ChargeStart {
				delay = 0
			}
		} else {
			j.restarts++
		}
	case policy.Stop:
		j.preemptions++
	case policy.Grow, policy.Shrink:
		j.restarts++
		if s.cfg.Launcher == LauncherInPlace {
			delay = inplace
		}
	case policy.Move:
		j.restarts++
	}
	s.setAllocation(j, a)
	if delay == restart {
		delay = s.restartDelay(j)
	}
	if j.gpus > 0 {
		j.pause = s.now + delay
		j.rate, j.until = s.rateOf(j)
	}
	s.plan(j)
}

// restartDelay is what a (re)start costs job j: its own delay, else the
// configuration's.
func (s *simulator) restartDelay(j *simJob) float64 {
	if j.spec.RestartDelay > 0 {
		return j.spec.RestartDelay
	}
	return s.cfg.RestartDelay.Seconds()
}

// setAllocation gives job j allocation a (nil: none), keeping the GPU
// count, the placement, the utilisation and the Gantt chart up to date.
func (s *simulator) setAllocation(j *simJob, a policy.Allocation) {
	s.advance(j)
	s.tickQueues()
	counts := make([]int, len(s.nodes))
	for id, g := range a {
		counts[s.nodeIdx[id]] = g
	}
	if s.cfg.Gantt {
		old := make([]int, len(s.nodes))
		for id, g := range j.alloc {
			old[s.nodeIdx[id]] = g
		}
		for n := range s.nodes {
			if d := counts[n] - old[n]; d != 0 {
				s.gantt(j, n, d)
			}
		}
	}
	j.placement = j.placement[:0]
	total := 0
	for _, g := range counts {
		if g > 0 {
			j.placement = append(j.placement, g)
			total += g
		}
	}
	s.setGPUModel(j, counts)
	// Largest first, the order in which the Tiresias port of Pollux's
	// simulator hands GPUs out (the node with the most free first), which
	// its placement-specific step times depend on (App.Throughput).
	slices.SortFunc(j.placement, func(x, y int) int { return y - x })
	s.busy += total - j.gpus
	s.moveQueue(j, total)
	j.gpus = total
	j.alloc = a.Clone()
	if n := len(s.util); n > 0 && s.util[n-1].T == s.now {
		s.util[n-1].Busy = s.busy
	} else {
		s.util = append(s.util, UtilPoint{T: s.now, Busy: s.busy})
	}
}

// gantt moves d GPUs of node n to (d > 0) or from (d < 0) job j: it takes
// the lowest free GPUs and gives back its highest.
func (s *simulator) gantt(j *simJob, n, d int) {
	own, since := s.owner[n], s.since[n]
	for g := 0; g < len(own) && d > 0; g++ {
		if own[g] == -1 {
			own[g], since[g] = j.idx, s.now
			d--
		}
	}
	for g := len(own) - 1; g >= 0 && d < 0; g-- {
		if own[g] == j.idx {
			if s.now > since[g] {
				s.segments = append(s.segments, Segment{GPU: s.gpuBase[n] + int32(g), Job: j.idx, Start: since[g], End: s.now})
			}
			own[g] = -1
			d++
		}
	}
}
