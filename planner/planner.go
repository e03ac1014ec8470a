// Package planner is the Schedulearn planner: it keeps the queue of training
// jobs, and each round takes a snapshot of the cluster and the jobs, asks the
// active policy for a plan, and has the actuator carry the plan out in Nomad.
//
// A round, in order:
//  1. Jobs the actuator reports finished (the launcher exited) are recorded
//     as complete or failed and give their GPUs back; one whose run the
//     cluster ended is requeued from its checkpoint instead, up to Retries
//     times (recovery.go). Then nodes that left are taken from the jobs
//     holding them (departures.go), and the health watch, when on, judges
//     each running job and acts on those stalled or degraded (health.go).
//  2. The snapshot: the GPU nodes (Cluster), and every queued and running
//     job with the GPUs it holds (the store is the truth for that; it
//     lists them without the ended ones, Store.ListActiveJobs).
//  3. The active policy's plan (or the last good policy's, see PolicyHost).
//  4. The plan's changes, in the order that frees GPUs before taking them:
//     each is applied by the actuator and then recorded (state, GPUs, a
//     history entry with the policy's reason). A change the actuator fails
//     is not recorded, so the next round tries again from what is true.
package planner

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Cluster lists the GPU nodes that can take work (planner/cluster).
type Cluster interface {
	Nodes(ctx context.Context) ([]policy.Node, error)
}

// RecentNodes is implemented by a Cluster that keeps the nodes it read
// last (cluster.View).
type RecentNodes interface {
	// Recent returns the nodes read less than maxAge ago while every
	// dependency answered; ok is false otherwise.
	Recent(maxAge time.Duration) (nodes []policy.Node, ok bool)
}

// submitNodesAge is how old the read of the cluster a submission is
// checked against may be (see submitNodes).
const submitNodesAge = 5 * time.Second

// Departures is implemented by a Cluster that can tell which nodes have
// left (down, disconnected or draining): node ID -> what happened. The
// round takes their GPUs from the jobs holding them, in place (draining
// their workers first), records why, and re-plans.
type Departures interface {
	Departed(ctx context.Context) (map[string]string, error)
}

// Actuator carries out the planner's decisions in Nomad (planner/nomadjob)
// or in the simulator: it is not Nomad's executor, which runs a task's
// processes (the horovod driver has its own supervisor, driver/supervisor).
type Actuator interface {
	// Apply makes job hold the target allocation: it registers the job when
	// it holds nothing yet, resizes it in place when it runs, and stops it
	// when the target is empty. It must be idempotent. It may set job's
	// NomadJobID, and must change none of its maps and lists (they are
	// the stored record's). A start while a launcher of the job's previous
	// run still runs starts nothing and fails with ErrRunEnding.
	Apply(ctx context.Context, job *structs.Job, target policy.Allocation) error
	// Outcome reports whether a running job has ended, and how.
	Outcome(ctx context.Context, job *structs.Job) (Outcome, error)
}

// ErrRunEnding is a start of a job (Actuator.Apply) while a launcher of
// its previous run still runs: one stopped and committing its checkpoint
// (the launcher's kill timeout), or started again on a host that came back
// before the planner stopped it there. Nothing is started, so one job never
// has two launchers; the job stays queued and a later round starts it.
var ErrRunEnding = errors.New("a launcher of the job's previous run has not stopped yet")

// Deliverer delivers a job's models once its progress reaches a target
// tier (planner/delivery): the planner checks a jobspec with it and
// nudges it, and knows nothing of copies and webhooks.
type Deliverer interface {
	// CheckSpec refuses (an *api.InputError) a jobspec whose delivery
	// directory or webhook it would not serve.
	CheckSpec(spec *jobspec.Spec) error
	// Notify says that job id has delivery work; it must not block.
	Notify(id string)
}

// Outcome is the Nomad side of a job the planner started.
type Outcome struct {
	Done     bool
	ExitCode int
	Message  string
	// Unplaced, for a job still running, says why Nomad has not placed
	// all it was asked to run for the job ("": it has). The planner puts
	// it into the job's events once.
	Unplaced string
	// UnplacedGPUs, with Unplaced, is the GPUs on each node (by ID) whose
	// workers Nomad has not placed; UnplacedLauncher says the launcher is
	// not placed either. The health watch shrinks a job to what runs.
	UnplacedGPUs     map[string]int
	UnplacedLauncher bool
	// Infrastructure, for a job that has ended, says that its run ended
	// for a reason of the cluster, not of its training script (the
	// launcher's allocation lost, the launcher's driver failed, or the
	// launcher exited drain.ExitInfrastructure), and why: the planner
	// requeues the job from its last checkpoint, up to Planner.Retries
	// times, instead of ending it as failed.
	Infrastructure string
}

// Planner is the scheduling loop and the operations the API serves.
type Planner struct {
	Store    store.Store
	Cluster  Cluster
	Actuator Actuator
	Policies *PolicyHost
	Logger   hclog.Logger
	// Delivery delivers the models of jobs reaching their tier1 and goal
	// (planner/delivery); nil: none are delivered, and jobspecs are not
	// checked for it (a deliverer checks them again before it delivers).
	Delivery Deliverer
	// Events takes the stream's events (planner/events); nil: none.
	Events Publisher
	// Metrics records timings and counts (planner/metrics); nil: none.
	Metrics Metrics
	// CheckpointDirs are the directories (the config's checkpoint_dirs) a
	// restarted job may be told to resume from: a checkpoint it reported
	// elsewhere is not passed on, and it starts over (see resumePoint).
	CheckpointDirs []string
	// Retries bounds how often one job is requeued because the cluster,
	// not its script, ended or stalled its run (Outcome.Infrastructure,
	// and the health watch's requeues); past it the job fails, saying
	// so. 0: never (the agent's default is config.DefaultRetries).
	Retries int
	// ShrinksAtOnce is how many of a round's in-place shrinks the
	// actuator carries out at once (each drains its leaving workers
	// first: seconds, up to the actuator's bound); below 2, one after
	// another, as the simulator's actuator needs (startShrinks).
	ShrinksAtOnce int
	// Watch is the health watch (see health.go); nil: off, as in the
	// simulator, whose jobs report only when what the policies read
	// changes.
	Watch *HealthWatch

	// hooks are what the planner's host put in place of the planner's own
	// ways (With: the simulator's clock, job IDs and outlooks).
	hooks hooks

	obs observer

	kickOnce sync.Once
	kick     chan struct{}
	roundMu  sync.Mutex // one round at a time
	rounds   atomic.Uint64
	snaps    snapCache // the last round's snapshot (roundMu)
	// priors are what jobs of each application showed between GPU
	// models, for the estimates of jobs new to one (byModel).
	priors modelPriors
	// largest is the GPUs of the largest node seen last (for gpus =
	// "auto" jobs without a max, between rounds).
	largest atomic.Int64
	// queueTree is the queues (SetQueues); nil: quota.Default().
	queueTree atomic.Pointer[quota.Tree]
	// watching is when the health watch began: the first round of this
	// Run, this planner's term as the leader (roundMu).
	watching time.Time
}

// noteNodes remembers the largest node of nodes.
func (p *Planner) noteNodes(nodes []policy.Node) { p.largest.Store(int64(largestNode(nodes))) }

func (p *Planner) now() time.Time {
	if p.hooks.now != nil {
		return p.hooks.now()
	}
	return time.Now()
}

func (p *Planner) kicks() chan struct{} {
	p.kickOnce.Do(func() { p.kick = make(chan struct{}, 1) })
	return p.kick
}

// Kick asks for a round soon.
func (p *Planner) Kick() {
	select {
	case p.kicks() <- struct{}{}:
	default:
	}
}

// Run plans a round on every kick and every interval until ctx ends. The
// health watch begins again with its first round (a new leader's term).
// Before the first round, and every SweepEvery, it stops the runs of jobs
// that have ended (SweepRuns): the first round then plans none of their
// GPUs as free.
func (p *Planner) Run(ctx context.Context, interval time.Duration) {
	p.roundMu.Lock()
	p.watching = time.Time{}
	p.roundMu.Unlock()
	p.sweep(ctx)
	sweeps := time.NewTicker(SweepEvery)
	defer sweeps.Stop()
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-sweeps.C:
			p.sweep(ctx)
			continue
		case <-timer.C:
		case <-p.kicks():
		}
		if err := p.Round(ctx); err != nil && ctx.Err() == nil {
			p.Logger.Error("scheduling round failed", "error", err)
		}
		timer.Reset(interval)
	}
}

// Submit queues a job. It refuses a job no node of the cluster could ever
// hold, or whose target's delivery the Deliverer would not make
// (CheckSpec), or, with a deadline, that cannot meet it beside the jobs
// already admitted where its queue's deadline_admission is "reject" (see
// admit), and answers at once with the stored record. With
// idem, the job that already holds the key is the answer (replayed), or
// structs.ErrIdempotencyMismatch when it was submitted with another request.
func (p *Planner) Submit(ctx context.Context, spec *jobspec.Spec, source string, idem *structs.Idempotency) (*structs.Job, bool, error) {
	if idem != nil {
		// A retry: the job that holds the key, whatever the cluster now.
		j, err := p.Store.JobByIdempotencyKey(ctx, idem.Key)
		switch {
		case err == nil:
			j, err = structs.Replay(j, idem)
			return j, err == nil, err
		case !errors.Is(err, store.ErrNotFound):
			return nil, false, fmt.Errorf("failed to look up the idempotency key: %w", err)
		}
	}
	if p.Delivery != nil {
		if err := p.Delivery.CheckSpec(spec); err != nil {
			return nil, false, err
		}
	}
	nodes, err := p.submitNodes(ctx, spec)
	if err != nil {
		return nil, false, err
	}
	p.noteNodes(nodes)
	now := p.now()
	j := &structs.Job{
		ID:          p.newJobID(spec),
		Spec:        *spec,
		Source:      source,
		State:       structs.JobQueued,
		Submitted:   now,
		Events:      []structs.Event{{Time: now, Type: "submitted", Message: "queued"}},
		Idempotency: idem,
	}
	if err := p.admit(ctx, j, nodes); err != nil {
		return nil, false, err
	}
	if spec.Priority != jobspec.DefaultPriority && p.Policies != nil {
		if name, _ := p.Policies.Active(); p.Policies.IgnoresPriority(name) {
			j.WarnOnce(now, structs.PriorityIgnored(name, spec.Priority))
		}
	}
	err = p.Store.CreateJob(ctx, j)
	for try := 1; errors.Is(err, store.ErrExists) && try < idAttempts; try++ {
		// Another job has the ID: a random suffix of 32 bits meets one of
		// 100,000 jobs once in 43,000 submissions.
		j.ID = p.newJobID(spec)
		err = p.Store.CreateJob(ctx, j)
	}
	if err != nil {
		if errors.Is(err, store.ErrKeyExists) {
			// A retry that raced the first request: the first one won.
			first, gerr := p.Store.JobByIdempotencyKey(ctx, idem.Key)
			if gerr != nil {
				return nil, false, fmt.Errorf("failed to read the job of the idempotency key: %w", gerr)
			}
			first, err = structs.Replay(first, idem)
			return first, err == nil, err
		}
		return nil, false, fmt.Errorf("failed to store job: %w", err)
	}
	p.publishJob(j, 0)
	p.Logger.Info("job queued", "job", j.ID, "gpus_min", spec.GPUs.Min, "gpus_max", spec.GPUs.Max)
	p.Kick()
	return j, false, nil
}

// submitNodes returns the nodes a submission of spec is checked against,
// or why no node or queue could ever take it (fits, checkQueue): the
// cluster as read within submitNodesAge (by a round or another
// submission) where that read takes the job, else a read now. A
// burst of submissions then does not list Nomad's allocations once each
// (eight at a time against the lab's Nomad agent, at 1,300 jobs, timed
// out and failed submissions), and a job is refused only on a read made
// for it (a node that came since the last read may take it).
func (p *Planner) submitNodes(ctx context.Context, spec *jobspec.Spec) ([]policy.Node, error) {
	check := func(nodes []policy.Node) error {
		if err := fits(spec, nodes); err != nil {
			return err
		}
		return p.checkQueue(spec, nodes)
	}
	if r, ok := p.Cluster.(RecentNodes); ok {
		if nodes, ok := r.Recent(submitNodesAge); ok && check(nodes) == nil {
			return nodes, nil
		}
	}
	nodes, err := p.Cluster.Nodes(ctx)
	if err != nil {
		return nil, err
	}
	return nodes, check(nodes)
}

// fits says why no node or pool could ever run the job, if none could: the
// GPUs are counted per pool and model, as the job's constraints allow. A
// pool, or a GPU model, that no node has is an error at the jobspec's
// attribute that names the ones the nodes have (a model's name is
// Nomad's device name, "NVIDIA A100-SXM4-40GB", which "A100" is not).
// The nodes are those the planner may use (ready, eligible, with healthy
// GPUs), as node list shows them: a pool whose nodes all drain has none.
func fits(spec *jobspec.Spec, nodes []policy.Node) error {
	req := requestOf(spec)
	cons := constraintsOf(spec)
	total, best := 0, 0
	inPool := func(n *policy.Node) bool { return spec.Pool == "" || n.Pool == spec.Pool }
	hasPool, hasModel := spec.Pool == "", spec.GPUs.Model == "" // some node has the job's (or it names none)
	for _, n := range nodes {
		hasPool = hasPool || inPool(&n)
		hasModel = hasModel || (inPool(&n) && n.GPUModel == spec.GPUs.Model)
		if !cons.Allows(&n) {
			continue
		}
		usable := n.GPUs - n.GPUs%req.PerWorker
		total += usable
		best = max(best, usable)
	}
	if !hasPool {
		pools := gpusBy(nodes, func(n *policy.Node) (string, bool) { return n.Pool, true })
		return noSuch(spec, spec.PoolRange, "No ready node is in this pool", "pool", spec.Pool, "the ready nodes' pools", pools)
	}
	if !hasModel {
		in := "the ready nodes' GPU models"
		if spec.Pool != "" {
			in = fmt.Sprintf("the GPU models of pool %q's ready nodes", spec.Pool)
		}
		models := gpusBy(nodes, func(n *policy.Node) (string, bool) { return n.GPUModel, inPool(n) })
		return noSuch(spec, spec.ModelRange, "No ready node has this GPU model", "GPU model", spec.GPUs.Model, in, models)
	}
	if total < req.Min {
		where := "the cluster"
		if spec.Pool != "" {
			where = fmt.Sprintf("pool %q", spec.Pool)
		}
		if spec.GPUs.Model != "" || spec.GPUs.MinMemoryMiB > 0 {
			where += " (with the job's GPU model/memory constraints)"
		}
		return structs.Inputf("job %s needs at least %s but %s has %d that it could use", spec.Name, policy.GPUs(req.Min), where, total)
	}
	return nil
}

// gpusBy sums the GPUs of nodes by key (a pool, a GPU model), of the nodes
// key takes (ok); a node with an empty key counts under none.
func gpusBy(nodes []policy.Node, key func(*policy.Node) (string, bool)) map[string]int {
	out := map[string]int{}
	for i := range nodes {
		if k, ok := key(&nodes[i]); ok && k != "" {
			out[k] += nodes[i].GPUs
		}
	}
	return out
}

// noSuch is fits' error for a pool or GPU model (what, named name) that
// no node has, at r in the jobspec: it names those the cluster has (in,
// with their GPUs), at most maxNamed of them.
func noSuch(spec *jobspec.Spec, r hcl.Range, summary, what, name, in string, have map[string]int) error {
	var named []string
	for _, k := range slices.Sorted(maps.Keys(have)) {
		if len(named) == maxNamed {
			named = append(named, fmt.Sprintf("and %d more", len(have)-maxNamed))
			break
		}
		named = append(named, fmt.Sprintf("%q (%s)", k, policy.GPUs(have[k])))
	}
	detail := fmt.Sprintf("%q; %s: %s.", name, in, strings.Join(named, ", "))
	if len(named) == 0 {
		detail = fmt.Sprintf("%q; no ready node has any %s.", name, what)
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail}
	if r.Filename != "" {
		d.Subject = r.Ptr()
	}
	return &structs.InputError{Msg: fmt.Sprintf("failed to queue job %s", spec.Name), Diags: hcl.Diagnostics{d}}
}

// maxNamed bounds the pools or GPU models an error names.
const maxNamed = 16

// Round runs one scheduling round.
func (p *Planner) Round(ctx context.Context) error {
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	start := time.Now()
	// Numbered, so that a log tells which round did what.
	p.Logger.Debug("round started", "round", p.rounds.Add(1))
	var planTime time.Duration
	err := p.round(ctx, &planTime)
	p.metrics().Round(time.Since(start), planTime, err != nil)
	return err
}

// snapshot is the round's snapshot of jobs (see snapshot), copied in
// part from the last round's where the store shares its records; named
// says whether a selector of one of jobs names jobs (namesJobs).
func (p *Planner) snapshot(now time.Time, nodes []policy.Node, jobs []*structs.Job, named bool) *policy.Snapshot {
	if _, ok := p.Store.(store.SharedLister); ok {
		return p.snaps.snapshot(now, nodes, jobs, named, p.unread, p.priors.ratios())
	}
	return (*snapCache)(nil).snapshot(now, nodes, jobs, named, nil, p.priors.ratios())
}

// activeJobs lists the round's jobs, without copies where the store can
// (store.SharedLister): the round clones a record before it changes it.
func (p *Planner) activeJobs(ctx context.Context) ([]*structs.Job, error) {
	if s, ok := p.Store.(store.SharedLister); ok {
		return s.ListActiveJobsShared(ctx)
	}
	return p.Store.ListActiveJobs(ctx)
}

// reap records a running job that has ended; it reports whether it did.
// One whose run the cluster ended (Outcome.Infrastructure) is requeued
// instead (requeue), and returned as queued, not done, unless its
// retries are spent. Of one that runs on, it records when Nomad has not
// placed all of it and when it has again (noteUnplaced; its outcome into
// unplaced, by ID, when that is not nil), and returns its record as
// stored, and whether that says Nomad has placed all of it; whole says
// the record j does (known from the last round: its events are not read
// again).
func (p *Planner) reap(ctx context.Context, j *structs.Job, now time.Time, whole bool, unplaced map[string]Outcome) (*structs.Job, bool, bool, error) {
	out, err := p.Actuator.Outcome(ctx, j)
	if err != nil {
		return j, false, whole, err
	}
	if !out.Done && out.Unplaced != "" && unplaced != nil {
		unplaced[j.ID] = out
	}
	if !out.Done {
		if whole && out.Unplaced == "" {
			return j, false, true, nil
		}
		j, err := p.noteUnplaced(ctx, j, out.Unplaced, now)
		return j, false, err == nil && out.Unplaced == "", err
	}
	if out.Infrastructure != "" {
		next, err := p.requeue(ctx, j, structs.RequeueInfrastructure, out.Infrastructure, out.ExitCode, now)
		return next, next.State.Terminal(), false, err
	}
	ended := j.Clone() // the store's own where shared
	code := out.ExitCode
	err = p.update(ctx, ended, func(j *structs.Job) error {
		j.ExitCode = &code
		j.State = structs.JobComplete
		if code != 0 {
			j.State = structs.JobFailed
		}
		j.Finished = now
		accrue(j, now)
		j.Allocation = nil
		j.AddChange(structs.GPUChange{Time: now, GPUs: 0, Reason: "job ended"})
		j.AddEvents(structs.Event{Time: now, Type: string(j.State), Message: out.Message})
		return nil
	})
	if err != nil {
		return j, false, whole, fmt.Errorf("failed to record end of job %s: %w", j.ID, err)
	}
	p.Logger.Info("job ended", "job", j.ID, "state", ended.State, "exit_code", code)
	return ended, true, false, nil
}

// Event types of a running job whose allocations Nomad has not all placed,
// and of the time it has again.
const (
	EventUnplaced = "unplaced"
	EventPlaced   = "placed"
)

// noteUnplaced records in job j's events that Nomad has not placed all of
// it, saying why (msg), once per reason, and that it has, once msg is "",
// and returns its record as stored. A job whose workers Nomad cannot place
// trains at fewer than the planner gave it, and this says why.
func (p *Planner) noteUnplaced(ctx context.Context, j *structs.Job, msg string, now time.Time) (*structs.Job, error) {
	if lastUnplaced(j) == msg {
		return j, nil
	}
	next := j.Clone() // the store's own where shared
	err := p.update(ctx, next, func(j *structs.Job) error {
		switch {
		case lastUnplaced(j) == msg: // said since j was read
		case msg == "":
			j.AddEvents(structs.Event{Time: now, Type: EventPlaced, Message: "Nomad has placed all of the job"})
		default:
			j.AddEvents(structs.Event{Time: now, Type: EventUnplaced, Message: msg})
		}
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("failed to record the placement of job %s: %w", j.ID, err)
	}
	if msg != "" {
		p.Logger.Warn("job not placed in full", "job", j.ID, "nomad", msg)
	} else {
		p.Logger.Info("job placed in full", "job", j.ID)
	}
	return next, nil
}

// lastUnplaced is the message of job j's last unplaced event, "" when it
// has none or a placed event came after it.
func lastUnplaced(j *structs.Job) string {
	msg, _ := lastUnplacedAt(j)
	return msg
}

// lastUnplacedAt is lastUnplaced, and the time of the event.
func lastUnplacedAt(j *structs.Job) (string, time.Time) {
	for _, e := range slices.Backward(j.Events) {
		switch e.Type {
		case EventUnplaced:
			return e.Message, e.Time
		case EventPlaced:
			return "", time.Time{}
		}
	}
	return "", time.Time{}
}

// record writes an applied change into the job's record. by is who took
// the GPUs of a job that reclaim stopped.
func (p *Planner) record(ctx context.Context, j *structs.Job, ch policy.Change, policyName, reason string, by *quota.Taken, now time.Time) error {
	carry := actuated(j)
	resume := j.Resume  // what the start was told (round), not yet stored
	model := j.GPUModel // the round's, of ch.To's nodes
	err := p.update(ctx, j, func(j *structs.Job) error {
		carry(j)
		accrue(j, now)
		j.Allocation = maps.Clone(map[string]int(ch.To))
		events := []structs.Event{{Time: now, Type: string(ch.Kind),
			Message: fmt.Sprintf("%s: %d -> %s (%s)", ch.Kind, ch.From.Total(), policy.GPUs(ch.To.Total()), policyName)}}
		changeReason := reason
		if e, ok := modelEvent(j, model, ch.To.Total(), reason, now); ok {
			events = append(events, e)
			if m := j.Moving; m != nil && m.To == model {
				// The start of a move: its history says why it moved.
				changeReason = strings.TrimPrefix(reason+"; "+e.Message, "; ")
			}
		}
		switch {
		case ch.To.Total() == 0:
			j.State = structs.JobQueued // preempted: back in the queue
			if by != nil {
				j.Preemptions = append(j.Preemptions, preemption(j, by, now))
				events = append(events, preemptionEvent(j.Preemptions[len(j.Preemptions)-1]))
			}
		case j.State == structs.JobQueued:
			j.State = structs.JobRunning
			j.Moving = nil // moved (or started elsewhere)
			if j.Started.IsZero() {
				j.Started = now
			}
			j.Resume = resume
			if n := len(j.Preemptions); n > 0 && j.Preemptions[n-1].Resumed.IsZero() {
				j.Preemptions[n-1].Resumed = now
				if resume != nil {
					j.Preemptions[n-1].ResumedStep = resume.Step
				}
				events = append(events, resumeEvent(now, resume))
			} else if requeuedLast(j) {
				events = append(events, resumeEvent(now, resume))
			}
		}
		j.AddChange(structs.GPUChange{Time: now, GPUs: ch.To.Total(), Nodes: j.Allocation, Model: model, Policy: policyName, Reason: changeReason})
		j.AddEvents(events...)
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to record %s of job %s: %w", ch.Kind, j.ID, err)
	}
	p.Logger.Info("job resized", "job", j.ID, "change", ch.Kind, "gpus", ch.To.Total(), "policy", policyName)
	return nil
}

// actuated returns what the actuator set in job j and the store does not
// have yet (NomadJobID; at a start, NomadRunIndex), to be set again in
// the record that update reads afresh after a conflict.
func actuated(j *structs.Job) func(*structs.Job) {
	id, runIndex := j.NomadJobID, j.NomadRunIndex
	return func(r *structs.Job) { r.NomadJobID, r.NomadRunIndex = id, runIndex }
}

// updateAttempts bounds how often a write is retried after losing a race
// (store.ErrConflict) with another writer of the same record.
const updateAttempts = 5

// Update is update, for the planner's other writers of a record
// (planner/delivery).
func (p *Planner) Update(ctx context.Context, j *structs.Job, mutate func(*structs.Job) error) error {
	return p.update(ctx, j, mutate)
}

// update applies mutate to a copy of j and stores it. The round, Stop and
// progress reports write the same records: when the stored record has
// moved on since j was read (store.ErrConflict), update reads it again,
// applies mutate to that, and tries again, a few times. mutate must
// therefore derive everything from the record it is given; an error from
// it is returned as is, and nothing is written. On success j is the
// record as stored.
func (p *Planner) update(ctx context.Context, j *structs.Job, mutate func(*structs.Job) error) error {
	base := j
	for attempt := 1; ; attempt++ {
		next := base.Clone()
		if err := mutate(next); err != nil {
			return err
		}
		if next.State != structs.JobRunning {
			next.Health = nil // judged of running jobs only
		}
		next.Bound()
		err := p.Store.UpdateJob(ctx, next)
		if err == nil {
			p.publishJob(next, base.AllEvents())
			*j = *next
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt == updateAttempts {
			return err
		}
		if base, err = p.Store.GetJob(ctx, j.ID); err != nil {
			return err
		}
	}
}

// ReportProgress records a batch of the job's progress reports (already
// checked by the API's ValidateProgress), in any state. It is no leader's work:
// any planner sharing the store takes it. A batch the record refuses (too
// many metric names) is an *structs.InputError. A report that takes the
// target metric to tier1 or goal records a delivery, which the Deliverer
// does later: this nudges it (Notify) and never waits for it.
func (p *Planner) ReportProgress(ctx context.Context, id string, reports []structs.ProgressReport) error {
	_, err := p.ReportProgressAdvice(ctx, id, reports)
	return err
}

// ReportProgressAdvice is ReportProgress, returning the batch the planner
// now advises the job (jobspec batch block; nil when none), which the
// API hands back to the reporting script.
func (p *Planner) ReportProgressAdvice(ctx context.Context, id string, reports []structs.ProgressReport) (*structs.BatchAdvice, error) {
	j, err := p.Store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	now := p.now()
	var advice *structs.BatchAdvice
	err = p.update(ctx, j, func(j *structs.Job) error {
		if err := j.AddProgress(reports, now); err != nil {
			return structs.Inputf("%v", err)
		}
		renewOutlook(j, now, int(p.largest.Load()), !(p.hooks.amendsTargets && p.hooks.amendOutlook != nil))
		if p.hooks.amendOutlook != nil {
			p.hooks.amendOutlook(j)
		}
		advice = j.Batch
		return nil
	})
	if err == nil && j.Outlook != nil {
		p.priors.observe(j.Spec.Name, j.ID, j.Outlook.Rates)
	}
	if err == nil {
		p.metrics().ProgressReports(len(reports))
	}
	if err == nil && p.Delivery != nil && j.HasDeliveryWork() {
		p.Delivery.Notify(j.ID)
	}
	if err != nil || advice == nil {
		return nil, err
	}
	a := *advice
	return &a, nil
}

func (p *Planner) recordPolicyError(ctx context.Context, perr error) {
	name, config := p.Policies.Active()
	state := &structs.PolicyState{Name: name, Config: config, Changed: p.now(), LastError: perr.Error()}
	if old, err := p.Store.GetPolicy(ctx); err == nil {
		state.Changed = old.Changed
	}
	if err := p.Store.PutPolicy(ctx, state); err != nil {
		p.Logger.Warn("failed to record policy error", "error", err)
	}
}

// SetPolicy makes the named policy active and stores the choice, so a
// restarted planner keeps it. A policy that fails to open leaves the
// current one active.
func (p *Planner) SetPolicy(ctx context.Context, name string, config map[string]string) (*structs.PolicyState, error) {
	if _, err := p.Policies.Set(name, config); err != nil {
		return nil, err
	}
	state := &structs.PolicyState{Name: name, Config: config, Changed: p.now()}
	if err := p.Store.PutPolicy(ctx, state); err != nil {
		return nil, fmt.Errorf("failed to store policy: %w", err)
	}
	if p.Events != nil {
		p.Events.Publish(structs.StreamEvent{Time: state.Changed, Type: structs.StreamPolicySwitched, Policy: name,
			Message: fmt.Sprintf("policy %s is active", name)})
	}
	p.Kick()
	return state, nil
}

// Stop stops a job: a running one in Nomad, a queued one in the queue. A
// job that has already ended is structs.ErrConflict; an unknown one
// structs.ErrNotFound.
func (p *Planner) Stop(ctx context.Context, id string) (*structs.Job, error) {
	p.roundMu.Lock()
	defer p.roundMu.Unlock()
	j, err := p.Store.GetJob(ctx, id)
	if err != nil {
		return nil, err
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("job %s has already ended (%s): %w", id, j.State, structs.ErrConflict)
	}
	now := p.now()
	// Recorded first, as the round's stops are (stopRecorded): a stop
	// whose record then failed would leave the record running on a run
	// that is not, and the next round take its end for the job's.
	var was structs.Job // the record before the stop, to put back if it fails
	var ended error     // the job ended since it was read (a departure)
	running := false
	carry := actuated(j)
	err = p.update(ctx, j, func(j *structs.Job) error {
		running = false
		if j.State.Terminal() {
			ended = fmt.Errorf("job %s has already ended (%s): %w", id, j.State, structs.ErrConflict)
			return ended
		}
		carry(j)
		was, running = *j, j.State == structs.JobRunning
		if running {
			accrue(j, now)
			j.AddChange(structs.GPUChange{Time: now, GPUs: 0, Reason: "stopped by user"})
		}
		j.State = structs.JobStopped
		j.Allocation = nil
		j.Moving = nil // a job stopped while it moved between models moves no more
		j.Finished = now
		j.AddEvents(structs.Event{Time: now, Type: "stopped", Message: "stopped by user"})
		return nil
	})
	switch {
	case ended != nil: // update returns mutate's error as it is
		return nil, ended
	case err != nil && running:
		return nil, fmt.Errorf("failed to record stop of job %s (its run goes on): %w", id, err)
	case err != nil:
		return nil, fmt.Errorf("failed to record stop of job %s: %w", id, err)
	}
	if running {
		// Recorded, the stop is carried out, or the record put back, even
		// where the request gives up meanwhile (its client's timeout).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), StopTimeout)
		defer cancel()
		if err := p.stopRun(sctx, j, false); err != nil {
			err = fmt.Errorf("failed to stop job %s: %w", id, err)
			p.unstop(sctx, j, &was, structs.Event{Time: now, Type: EventNotStopped, Message: fmt.Sprintf("not stopped: %v; it runs on as it was", err)})
			return nil, err
		}
	}
	p.Kick()
	return j, nil
}

// EventNotStopped is the event of a job whose user's stop was recorded but
// failed: the record is put back, and the job runs on.
const EventNotStopped = "not-stopped"

// StopTimeout bounds a stop the planner has recorded (a user's, a swept
// run's): the stop, tried twice, and putting the record back if it fails.
const StopTimeout = time.Minute

// idAttempts is how many IDs Submit tries for a job before it gives up:
// an ID taken twice running means the IDs are not random.
const idAttempts = 3

// newJobID names a job at submission: WithJobIDs's, else its name and a
// random suffix.
func (p *Planner) newJobID(spec *jobspec.Spec) string {
	if p.hooks.newJobID != nil {
		return p.hooks.newJobID(spec)
	}
	return spec.Name + "-" + randomSuffix()
}

func randomSuffix() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
