package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A round, phase by phase (round): collect reads the active jobs, holds
// the moving ones and records the ended ones; settle releases the GPUs of
// departed nodes and requeues the jobs the health watch gives up on; nodes
// reads the cluster, holds the GPUs moving jobs go to and starts those
// whose old run has ended; the snapshot is taken; plan asks the policy
// (within the queues' quotas, checked by policy.Validate); apply carries
// out each change and records it.

// roundJobs is what a round works on: the live jobs (queued and running,
// in the queue's order) and what it knows of each.
type roundJobs struct {
	live   []*structs.Job
	ran    []bool // live's running jobs
	placed []bool // live's running jobs placed in full (see reap)
	named  bool   // a selector names jobs (for the snapshot)
	// unplaced is the health watch's: running jobs not placed in full.
	unplaced map[string]Outcome
	// holding are the moving jobs held this round (holdMove), and moved
	// those the round starts where they were moved (startMove): ID ->
	// whether their run on the old model has ended.
	holding []*structs.Job
	moved   map[string]bool
	// held is what the nodes reserve for holding's jobs (holdTargets):
	// their queues' use.
	held []quota.Held
}

// round is Round's work; it sets *planTime to the policy's planning time.
func (p *Planner) round(ctx context.Context, planTime *time.Duration) error {
	now := p.now()
	r, err := p.collect(ctx, now)
	if err != nil {
		return err
	}
	lossErrs := p.settle(ctx, r, now)
	nodes, err := p.nodes(ctx, r, now)
	if err != nil {
		return err
	}
	snap := p.snapshot(now, nodes, r.live, r.named)
	p.snaps.ran, p.snaps.placed = r.ran, r.placed // beside the records the snapshot keeps (snapCache.recs)
	planStart := time.Now()
	plan, waits, taken, perr := p.planQueues(ctx, snap, r.held)
	*planTime = time.Since(planStart)
	if perr != nil {
		p.Logger.Warn("policy", "error", perr)
		p.recordPolicyError(ctx, perr)
	}
	if plan == nil {
		return perr
	}
	p.noteWaits(snap, plan, waits)
	errs := p.apply(ctx, r.live, snap, plan, taken, nodes, now)
	return errors.Join(append(lossErrs, errs...)...)
}

// collect lists the round's jobs: a moving job whose run on the old model
// goes on is held (not live); a running job whose run has ended is
// recorded (reap) and left out; the others are live.
func (p *Planner) collect(ctx context.Context, now time.Time) (*roundJobs, error) {
	active, err := p.activeJobs(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	r := &roundJobs{
		live:   active[:0], // active is the round's own list: filtered in place
		ran:    make([]bool, 0, len(active)),
		placed: make([]bool, 0, len(active)),
	}
	if p.Watch != nil {
		r.unplaced = map[string]Outcome{}
	}
	// A record that was the last round's is not read again: its state is
	// known, and it names no jobs if none did then.
	w := p.snaps.walk()
	for _, j := range active {
		if waitsToMove(j) {
			// Moving to another GPU model: not offered to the policy
			// until its run on the old one has ended (its checkpoint);
			// the GPUs it moves to are held for it (holdTargets), and
			// it starts on them then (startMove).
			held, ended := p.holdMove(ctx, j, now)
			if held {
				r.holding = append(r.holding, j)
				continue
			}
			if r.moved == nil {
				r.moved = map[string]bool{}
			}
			r.moved[j.ID] = ended
		}
		running, whole, seen := w.known(j)
		if !seen {
			running, whole = j.State == structs.JobRunning, false
		}
		if running {
			var done bool
			var rerr error
			j, done, whole, rerr = p.reap(ctx, j, now, whole, r.unplaced)
			if rerr != nil {
				p.Logger.Warn("failed to read job outcome", "job", j.ID, "error", rerr)
			}
			if done {
				continue
			}
			running = j.State == structs.JobRunning // a requeued one is queued
		}
		r.live = append(r.live, j)
		r.ran = append(r.ran, running)
		r.placed = append(r.placed, running && whole)
		if !seen || w.named {
			r.named = r.named || namesJobs(j)
		}
	}
	return r, nil
}

// settle releases the GPUs that departed nodes held (Departures) and
// lets the health watch requeue or fail the jobs it gives up on; it
// returns what it failed to record.
func (p *Planner) settle(ctx context.Context, r *roundJobs, now time.Time) []error {
	// Departures before the nodes: a node that starts draining between
	// the two reads is then missing from the nodes (and released next
	// round) rather than released and offered again in the same round.
	var lossErrs []error
	if d, ok := p.Cluster.(Departures); ok {
		lossErrs = p.releaseDeparted(ctx, d, r.live, now)
		for i, j := range r.live {
			r.ran[i] = r.ran[i] && j.State == structs.JobRunning // some may have lost all their GPUs
			r.placed[i] = r.placed[i] && r.ran[i]                // a node lost is no placement event
		}
	}
	if p.Watch != nil {
		lossErrs = append(lossErrs, p.watchHealth(ctx, r.live, r.unplaced, now)...)
		r.live, r.ran, r.placed = dropEnded(r.live, r.ran, r.placed) // failed: retries spent
		for i, j := range r.live {
			r.ran[i] = r.ran[i] && j.State == structs.JobRunning // requeued by the watch
			r.placed[i] = r.placed[i] && r.ran[i]
		}
	}
	return lossErrs
}

// nodes reads the cluster for the round: the GPUs held moving jobs go to
// are reserved for them (holdTargets), and the moving jobs no longer held
// start on theirs (startMove).
func (p *Planner) nodes(ctx context.Context, r *roundJobs, now time.Time) ([]policy.Node, error) {
	nodes, err := p.Cluster.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read cluster: %w", err)
	}
	p.noteNodes(nodes)
	p.noteNodesSeen(nodes, now)
	nodes, r.held = holdTargets(nodes, r.holding, r.live)
	for i := 0; i < len(r.live) && len(r.moved) > 0; i++ {
		if ended, ok := r.moved[r.live[i].ID]; ok {
			delete(r.moved, r.live[i].ID)
			r.live[i], r.ran[i] = p.startMove(ctx, r.live[i], ended, nodes, r.live, now)
		}
	}
	return nodes, nil
}

// apply carries out plan's changes of live's jobs (snap's) and records
// each; taken says who took the GPUs of a job the quotas' reclaim
// stopped. A change from GPUs of one model to another's is a move
// (moveModel). A change that was to free GPUs on a node and failed
// (applied or recorded) leaves them held: the round's later changes that
// add GPUs on that node wait for the next round, which plans from what
// is held (else the records would hold more than the node has, and the
// next snapshot be refused as overcommitted). It returns what it failed
// to do.
func (p *Planner) apply(ctx context.Context, live []*structs.Job, snap *policy.Snapshot, plan *policy.Plan, taken map[string]quota.Taken, nodes []policy.Node, now time.Time) []error {
	changes, at := plan.AllAt(snap)                  // snap.Jobs[i] is live[i]'s
	var moving []int                                 // live's jobs this round moved between GPU models (moveModel)
	done := make(map[int]*structs.Job, len(changes)) // live's index -> its record after its change
	models := nodeModels{nodes: nodes}
	var errs []error
	kept := map[string]int{} // GPUs by node that failed changes did not free
	order := changeOrder(live, changes, at, models)
	shrinks := p.startShrinks(ctx, live, changes, at, models)
	// unanswered is a change the actuator gave up on for want of an
	// answer (its backend frozen, say): the changes after it wait for
	// the next round, each of which would wait as long (a round of fifty
	// starts would take half an hour).
	var unanswered error
	for _, k := range order {
		ch := changes[k]
		fail := func(err error) {
			if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
				unanswered = err
			}
			errs = append(errs, err)
			for n, g := range ch.From {
				if d := g - ch.To[n]; d > 0 {
					kept[n] += d
				}
			}
		}
		if _, ran := shrinks[k]; unanswered != nil && !ran {
			errs = append(errs, fmt.Errorf("%s of job %s waits for the next round: a change before it got no answer in time", ch.Kind, ch.Job))
			continue
		}
		if n := keptNode(ch, kept); n != "" {
			errs = append(errs, fmt.Errorf("%s of job %s waits for the next round: a change that was to free GPUs on node %s failed (%d GPUs there are still held)", ch.Kind, ch.Job, n, kept[n]))
			continue
		}
		// A copy of the record (the store's own where shared) for the
		// fields the change sets before it is recorded (Resume, and the
		// actuator's NomadJobID); its maps and lists stay the record's,
		// which record copies before it changes them (update).
		rec := *live[at[k]]
		j := &rec
		if ch.From.Total() == 0 {
			// A start: a job that ran before resumes from its checkpoint.
			j.Resume = p.resumePoint(j)
		}
		// A change from GPUs of one model to another's is a move: the
		// run is stopped with a checkpoint, and started again on the new
		// model from it once it has ended (holdMove).
		reason := strings.Join(plan.Reasons[j.ID], "; ")
		if from, to, ok := modelMove(j, ch, models); ok {
			if err := p.moveModel(ctx, j, ch, from, to, plan.Policy, reason, now); err != nil {
				fail(err)
			} else {
				moving = append(moving, at[k])
				done[at[k]] = j
			}
			continue
		}
		var by *quota.Taken
		if t, ok := taken[j.ID]; ok && ch.To.Total() == 0 {
			by = &t
		}
		if ch.From.Total() > 0 && ch.To.Total() == 0 {
			if err := p.stopRecorded(ctx, j, ch, plan.Policy, reason, by, now); err != nil {
				fail(err)
			} else {
				done[at[k]] = j
			}
			continue
		}
		var res applied
		if s, ok := shrinks[k]; ok {
			res = <-s
			j = res.j
		} else {
			res = p.applyChange(ctx, j, ch, models)
		}
		err := res.err
		if errors.Is(err, ErrRunEnding) {
			// Not a failure: it starts once the old launcher is gone.
			live[at[k]] = p.noteRunEnding(ctx, live[at[k]], err, now)
			continue
		}
		p.metrics().Change(ch.Kind, res.took, err != nil)
		if err != nil {
			fail(fmt.Errorf("failed to %s job %s: %w", ch.Kind, j.ID, err))
			continue
		}
		if ch.To.Total() > ch.From.Total() {
			if miss := localityMiss(&j.Spec, ch.To, nodes); miss != "" {
				reason = strings.TrimPrefix(reason+"; "+miss, "; ")
			}
		}
		if err := p.record(ctx, j, ch, plan.Policy, reason, by, now); err != nil {
			fail(err) // a shrink's GPUs are free, but its record holds them
		} else {
			done[at[k]] = j
		}
	}
	// A moved job whose run has ended already (in the simulator, at once)
	// starts on its new model this round, on the GPUs the plan moved it
	// to where the changes carried out have left them free.
	if len(moving) > 0 {
		after := slices.Clone(live)
		for i, j := range done {
			after[i] = j
		}
		for _, i := range moving {
			if held, ended := p.holdMove(ctx, after[i], now); !held {
				after[i], _ = p.startMove(ctx, after[i], ended, nodes, after, now)
			}
		}
	}
	return errs
}

// changeOrder is the order in which apply carries out the changes
// (changes[k] of live[at[k]]): those that add GPUs on no node in the
// records (stops, shrinks, and moves between models, whose runs stop
// first) go first, in the plan's order, so that one that fails keeps its
// GPUs from the others (apply's kept).
func changeOrder(live []*structs.Job, changes []policy.Change, at []int, models nodeModels) []int {
	order := make([]int, 0, len(changes))
	for _, first := range []bool{true, false} {
		for k, ch := range changes {
			_, _, moves := modelMove(live[at[k]], ch, models)
			if (moves || addsNone(ch)) == first {
				order = append(order, k)
			}
		}
	}
	return order
}

// applied is what the actuator did of one change: j is the job's record
// copy it changed.
type applied struct {
	j    *structs.Job
	err  error
	took time.Duration
}

// applyChange has the actuator carry out change ch of job j (a copy of its
// record), pinned to the model of its new GPUs.
func (p *Planner) applyChange(ctx context.Context, j *structs.Job, ch policy.Change, models nodeModels) applied {
	j.GPUModel = models.of(ch.To)
	start := time.Now()
	err := p.Actuator.Apply(ctx, j, ch.To)
	return applied{j: j, err: err, took: time.Since(start)}
}

// startShrinks has the actuator carry out the plan's in-place shrinks
// (changes[k] of live[at[k]]: GPUs kept on some node, added on none, on
// the same model), ShrinksAtOnce of them at once, and returns where each
// one's result comes, by k. A shrink drains the workers that leave first,
// which can take up to the actuator's bound (a run that does not let
// them go): one after another, every other job's change, and the next
// round's reading of the jobs that ended, would wait behind it. The
// shrinks touch distinct jobs and free GPUs only, so no change of the
// round depends on another's running first; apply records their results
// in the plan's order. None when ShrinksAtOnce is below 2 (the simulator:
// its actuator is not safe for concurrent use).
func (p *Planner) startShrinks(ctx context.Context, live []*structs.Job, changes []policy.Change, at []int, models nodeModels) map[int]<-chan applied {
	if p.ShrinksAtOnce < 2 {
		return nil
	}
	out := map[int]<-chan applied{}
	slots := make(chan struct{}, p.ShrinksAtOnce)
	for k, ch := range changes {
		j := live[at[k]]
		if ch.From.Total() == 0 || ch.To.Total() == 0 || !addsNone(ch) {
			continue
		}
		if _, _, moves := modelMove(j, ch, models); moves {
			continue
		}
		rec := *j
		res := make(chan applied, 1)
		out[k] = res
		go func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			res <- p.applyChange(ctx, &rec, ch, models)
		}()
	}
	return out
}

// modelMove says whether change ch of job j (its record) moves it from
// GPUs of one model to another's, and which.
func modelMove(j *structs.Job, ch policy.Change, models nodeModels) (from, to string, ok bool) {
	if ch.From.Total() == 0 || ch.To.Total() == 0 {
		return "", "", false
	}
	from, to = cmp.Or(j.GPUModel, models.of(ch.From)), models.of(ch.To)
	return from, to, from != "" && to != "" && from != to
}

// addsNone says whether change ch adds GPUs on no node.
func addsNone(ch policy.Change) bool {
	for n, g := range ch.To {
		if g > ch.From[n] {
			return false
		}
	}
	return true
}

// keptNode names a node on which change ch adds GPUs that failed changes
// of the round left held (kept), "" when none.
func keptNode(ch policy.Change, kept map[string]int) string {
	for n, g := range ch.To {
		if g > ch.From[n] && kept[n] > 0 {
			return n
		}
	}
	return ""
}

// stopRecorded carries out change ch, a stop of running job j (a copy of
// its record) that policyName planned for reason (by: who took its GPUs,
// for a reclaim): it records the job queued (record), then stops the run.
// The record goes first, as for a move between models (moveModel): a run
// stopped while its record still said it ran would be taken, once ended,
// for the job's end (reap). A record that cannot be written leaves the run
// alone; a stop that fails puts the record back as it was, saying so.
func (p *Planner) stopRecorded(ctx context.Context, j *structs.Job, ch policy.Change, policyName, reason string, by *quota.Taken, now time.Time) error {
	was := *j
	j.GPUModel = "" // no GPUs, of no model
	if err := p.record(ctx, j, ch, policyName, reason, by, now); err != nil {
		return fmt.Errorf("%w (its run goes on)", err)
	}
	if err := p.stopRun(ctx, j, true); err != nil {
		err = fmt.Errorf("failed to stop job %s: %w", j.ID, err)
		// If this write fails too, the job is queued while its run goes
		// on: a start of it then finds its Nomad job registered, and
		// resizes it (Apply).
		p.unstop(ctx, j, &was, structs.Event{Time: now, Type: string(policy.Stop), Message: fmt.Sprintf("not stopped: %v; it runs on as it was", err)})
		return err
	}
	return nil
}

// stopRun stops job j's run (Apply with no GPUs), and tries once more if
// that fails: a stop that took effect though its answer was lost then
// succeeds (the Nomad job is stopped already), so that only a stop that
// did not happen is put back (unstop), and its run not taken for the
// job's end. A planned stop (a preemption, a move) counts among the
// metrics' changes; a user's does not.
func (p *Planner) stopRun(ctx context.Context, j *structs.Job, planned bool) error {
	var err error
	for range 2 {
		start := time.Now()
		err = p.Actuator.Apply(ctx, j, nil)
		if planned {
			p.metrics().Change(policy.Stop, time.Since(start), err != nil)
		}
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	return err
}

// unstop puts job j's record back as it was (was) before a stop that was
// recorded but failed, adding event e: it runs, where it ran, and its
// history, model runs, preemptions, health and end (a user's stop sets
// one) are as they were.
func (p *Planner) unstop(ctx context.Context, j, was *structs.Job, e structs.Event) {
	err := p.update(ctx, j, func(j *structs.Job) error {
		j.State, j.Allocation, j.Moving, j.Health = was.State, was.Allocation, was.Moving, was.Health
		j.AttainedGPUSeconds, j.History, j.Models, j.GPUModel = was.AttainedGPUSeconds, was.History, was.Models, was.GPUModel
		j.Preemptions, j.Finished = was.Preemptions, was.Finished
		j.Dropped.History, j.Dropped.Models, j.Dropped.Preemptions = was.Dropped.History, was.Dropped.Models, was.Dropped.Preemptions
		j.AddEvents(e) // the events stay, the stop's among them
		return nil
	})
	if err != nil {
		p.Logger.Warn("failed to record that a stop failed", "job", j.ID, "error", err)
	}
}

// EventWaiting is the event of a job the plan started that the planner
// did not start yet, saying what it waits for.
const EventWaiting = "waiting"

// noteRunEnding says in queued job j's events (once per launcher waited
// for) that its start waits for a launcher of its previous run to stop
// (ErrRunEnding, err), and returns j's record after.
func (p *Planner) noteRunEnding(ctx context.Context, j *structs.Job, err error, now time.Time) *structs.Job {
	msg := "not started yet: " + err.Error()
	p.Logger.Info("a start waits for the previous run's launcher to stop", "job", j.ID, "error", err)
	if ev := j.Events; len(ev) > 0 && ev[len(ev)-1].Type == EventWaiting && ev[len(ev)-1].Message == msg {
		return j
	}
	next := j.Clone() // the store's own where shared
	if uerr := p.update(ctx, next, func(j *structs.Job) error {
		j.AddEvents(structs.Event{Time: now, Type: EventWaiting, Message: msg})
		return nil
	}); uerr != nil {
		p.Logger.Warn("failed to record a waiting start", "job", j.ID, "error", uerr)
		return j
	}
	return next
}
