package planner

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// nodeModels reads the GPU model of an allocation from a round's nodes: a
// job's GPUs are all of one model (policy.Validate's one-model rule), so
// the model of any one of its nodes is the job's. The index by node ID is
// built on the first look-up, and only where the nodes are of more than
// one model.
type nodeModels struct {
	nodes []policy.Node
	built bool
	one   string            // the model of every node, where there is one
	byID  map[string]string // node ID -> model, where there are several
}

// of returns the GPU model of allocation a's nodes, which must be the
// round's (a plan's are: Validate); "" for an empty allocation, or nodes
// that report no model.
func (m *nodeModels) of(a policy.Allocation) string {
	if !m.built {
		m.build()
	}
	for id, g := range a {
		if g <= 0 {
			continue
		}
		if m.byID == nil {
			return m.one // a plan's nodes are the round's (Validate)
		}
		return m.byID[id]
	}
	return ""
}

func (m *nodeModels) build() {
	m.built = true
	if len(m.nodes) == 0 {
		return
	}
	m.one = m.nodes[0].GPUModel
	for i := range m.nodes {
		if m.nodes[i].GPUModel != m.one {
			m.byID = make(map[string]string, len(m.nodes))
			for k := range m.nodes {
				m.byID[m.nodes[k].ID] = m.nodes[k].GPUModel
			}
			return
		}
	}
}

// EventModel is the type of the event that says a job moved from GPUs of
// one model to another's, and why.
const EventModel = "gpu-model"

// modelEvent is the event of job j (its record before the change) taking
// gpus GPUs of model where it last ran on another model: "moved from
// V100 to A100: <the policy's reason>". None for a first start, a change
// on the same model, or a model unknown.
func modelEvent(j *structs.Job, model string, gpus int, reason string, now time.Time) (structs.Event, bool) {
	last := j.LastModel()
	if gpus <= 0 || model == "" || last == "" || last == model {
		return structs.Event{}, false
	}
	if m := j.Moving; m != nil && m.To == model && m.Reason != "" {
		reason = m.Reason // why the policy moved it, not how it started
	}
	msg := fmt.Sprintf("moved from %s to %s", last, model)
	if reason != "" {
		msg += ": " + structs.Clip(reason, structs.MaxModelReason)
	}
	return structs.Event{Time: now, Type: EventModel, Message: msg}, true
}

// MoveHold bounds how long a job moving to another GPU model waits for
// its run on the old model to end (the launcher's kill timeout, in which
// the training commits its checkpoint, and Nomad's stop) before the
// planner offers it to the policy again anyway.
const MoveHold = 2 * time.Minute

// moveModel carries out change ch of job j (a copy of its record) from
// GPUs of model from to GPUs of model to, which the policy named called
// policyName planned for reason: it records the job queued and moving
// (Moving), then stops the run (SIGTERM: the training commits a
// checkpoint). The job starts again, from that checkpoint, on the GPUs the
// policy moved it to (held for it meanwhile: holdTargets) once the run has
// ended (holdMove, startMove). The record goes first: a run stopped while
// its record still said it ran would be taken, once ended, for the job's
// end (reap). A record that cannot be written leaves the run alone; a stop
// that fails puts the record back as it was, saying so.
func (p *Planner) moveModel(ctx context.Context, j *structs.Job, ch policy.Change, from, to, policyName, reason string, now time.Time) error {
	why := fmt.Sprintf("moving from %s to %s", from, to)
	if reason != "" {
		why += ": " + structs.Clip(reason, structs.MaxModelReason)
	}
	was := *j // the record before the move, to put back if the stop fails
	err := p.update(ctx, j, func(j *structs.Job) error {
		accrue(j, now)
		j.Allocation = nil
		j.State = structs.JobQueued
		j.Moving = &structs.Move{From: from, To: to, Since: now, Reason: structs.Clip(reason, structs.MaxModelReason),
			Target: maps.Clone(map[string]int(ch.To)), Policy: policyName}
		j.AddChange(structs.GPUChange{Time: now, GPUs: 0, Policy: policyName, Reason: why})
		j.AddEvents(structs.Event{Time: now, Type: string(policy.Stop), Message: fmt.Sprintf("stop: %d -> 0 GPUs (%s)", ch.From.Total(), policyName)},
			structs.Event{Time: now, Type: EventModel, Message: why + "; stopped with a checkpoint, it starts again from it once its run has ended"})
		return nil
	})
	if err != nil {
		return fmt.Errorf("failed to record the move of job %s from %s to %s (its run goes on): %w", j.ID, from, to, err)
	}
	if err := p.stopRun(ctx, j, true); err != nil {
		err = fmt.Errorf("failed to stop job %s to move it from %s to %s: %w", j.ID, from, to, err)
		// If this write fails too, the job is queued and moving while its
		// run goes on: holdMove waits for the run, MoveHold at most.
		p.unstop(ctx, j, &was, structs.Event{Time: now, Type: EventModel, Message: fmt.Sprintf("not moved from %s to %s: %v; it runs on as it was", from, to, err)})
		return err
	}
	p.Logger.Info("job moving between GPU models", "job", j.ID, "from", from, "to", to, "policy", policyName)
	return nil
}

// waitsToMove reports whether job j is queued, moving to another GPU model,
// with the GPUs it moves to held for it (the move not Stopped): the round
// asks holdMove whether to go on holding it.
func waitsToMove(j *structs.Job) bool {
	m := j.Moving
	return m != nil && !m.Stopped && j.State == structs.JobQueued
}

// holdMove reports whether job j, queued and moving to another GPU model
// (Moving), is still held: its run on the old model has not ended (the
// actuator's Outcome) and MoveHold has not passed since it was stopped.
// Once the run has ended, or MoveHold has passed, the job is no longer
// held: the round starts it on the GPUs it was moved to (startMove).
// ended says whether the run has ended.
func (p *Planner) holdMove(ctx context.Context, j *structs.Job, now time.Time) (held, ended bool) {
	out, err := p.Actuator.Outcome(ctx, j)
	if err != nil {
		p.Logger.Warn("failed to read the outcome of a moving job", "job", j.ID, "error", err)
	}
	ended = err == nil && out.Done
	return !ended && now.Sub(j.Moving.Since) < MoveHold, ended
}

// startMove starts job j, queued and moving to another GPU model, whose
// run on the old model has ended (ended) or who waited MoveHold for it (holdMove),
// on the GPUs it was moved to (Move.Target), from its checkpoint, where
// those are still free on nodes (the round's, less what live's jobs hold):
// the plan that moved it is carried out, and the policy does not place it
// again, elsewhere. Where they are not (a node left, or the move's record
// holds no target), or the start fails, it records the move's stop as over
// (Move.Stopped) and the job waits in the queue like any other. It returns
// the job's record as stored and whether it runs.
func (p *Planner) startMove(ctx context.Context, j *structs.Job, ended bool, nodes []policy.Node, live []*structs.Job, now time.Time) (*structs.Job, bool) {
	m := j.Moving
	why := fmt.Sprintf("its run on %s has ended", m.From)
	if !ended {
		why = fmt.Sprintf("its run on %s has not ended within %s", m.From, MoveHold)
	}
	target := policy.Allocation(maps.Clone(m.Target))
	if miss := targetMiss(target, m.To, nodes, live); miss != "" {
		return p.releaseMove(ctx, j, fmt.Sprintf("%s, but %s: it waits to be placed again", why, miss), now), false
	}
	rec := *j // the store's own where shared: record copies before it changes it
	next := &rec
	next.Resume = p.resumePoint(next)
	next.GPUModel = m.To
	applyStart := time.Now()
	err := p.Actuator.Apply(ctx, next, target)
	if errors.Is(err, ErrRunEnding) {
		// Not a failed change (as in the round): nothing was started.
		return p.releaseMove(ctx, j, fmt.Sprintf("%s, but %v: it waits to be placed again", why, err), now), false
	}
	p.metrics().Change(policy.Start, time.Since(applyStart), err != nil)
	if err != nil {
		p.Logger.Warn("failed to start a moved job on its new GPUs", "job", j.ID, "to", m.To, "error", err)
		return p.releaseMove(ctx, j, fmt.Sprintf("%s, but its start on %s failed: it waits to be placed again", why, m.To), now), false
	}
	ch := policy.Change{Job: j.ID, Kind: policy.Start, To: target}
	reason := "" // the move's own reason says why (modelEvent)
	if !ended {
		reason = why
	}
	if err := p.record(ctx, next, ch, m.Policy, reason, nil, now); err != nil {
		p.Logger.Warn("failed to record the start of a moved job", "job", j.ID, "error", err)
		return next, next.State == structs.JobRunning
	}
	return next, true
}

// targetMiss says why GPUs a, of model, are not all free on nodes less
// what live's jobs hold; "" when they are.
func targetMiss(a policy.Allocation, model string, nodes []policy.Node, live []*structs.Job) string {
	if a.Total() == 0 {
		return "it was moved to no GPUs"
	}
	used := usedOn(live, a)
	for id, g := range a {
		i := slices.IndexFunc(nodes, func(n policy.Node) bool { return n.ID == id })
		if i < 0 {
			return fmt.Sprintf("node %s is gone", id)
		}
		if nodes[i].GPUModel != model {
			return fmt.Sprintf("node %s's GPUs are no longer %s", id, model)
		}
		if free := nodes[i].GPUs - nodes[i].Reserved - used[id]; free < g {
			return fmt.Sprintf("node %s has %d of the %d GPUs it was moved to free", id, max(0, free), g)
		}
	}
	return ""
}

// usedOn returns the GPUs live's jobs hold on each node that on names.
func usedOn[M ~map[string]int](live []*structs.Job, on M) map[string]int {
	used := make(map[string]int, len(on))
	for _, j := range live {
		for n, g := range j.Allocation {
			if _, ok := on[n]; ok && g > 0 {
				used[n] += g
			}
		}
	}
	return used
}

// releaseMove records that moving job j is no longer held (Move.Stopped),
// saying msg, and returns its record as stored: the policy places it.
func (p *Planner) releaseMove(ctx context.Context, j *structs.Job, msg string, now time.Time) *structs.Job {
	next := j.Clone() // the store's own where shared
	err := p.update(ctx, next, func(j *structs.Job) error {
		if j.Moving == nil || j.State != structs.JobQueued {
			return nil
		}
		m := *j.Moving
		m.Stopped, m.Target = true, nil // its GPUs are no longer held
		j.Moving = &m
		j.AddEvents(structs.Event{Time: now, Type: EventModel, Message: msg})
		return nil
	})
	if err != nil {
		p.Logger.Warn("failed to record the end of a moving job's hold", "job", j.ID, "error", err)
		return j
	}
	return next
}

// holdTargets returns nodes with the GPUs that held moving jobs (holding)
// were moved to reserved for them (policy.Node.Reserved), so that no
// other job is given them while each waits for its run on the old model
// to end: a copy of nodes where there is any, else nodes itself; and
// what it reserved for each job, for the queues (quota.Held: they count
// as the job's queue's). A node's reservation is capped at its GPUs free
// of live's allocations and of what it reserves already, so the snapshot
// stays consistent (a node that shrank, or work from outside the
// planner, may have taken some): the jobs of holding take what is left
// in turn.
func holdTargets(nodes []policy.Node, holding, live []*structs.Job) ([]policy.Node, []quota.Held) {
	want := map[string]int{}
	for _, j := range holding {
		for n, g := range j.Moving.Target {
			if g > 0 {
				want[n] += g
			}
		}
	}
	if len(want) == 0 {
		return nodes, nil
	}
	used := usedOn(live, want)
	out := slices.Clone(nodes)
	at := make(map[string]int, len(want)) // node ID -> index in out, of the nodes wanted
	for i := range out {
		if _, ok := want[out[i].ID]; ok {
			at[out[i].ID] = i
		}
	}
	var held []quota.Held
	for _, j := range holding {
		h := quota.Held{Queue: queueOf(&j.Spec)}
		for _, id := range slices.Sorted(maps.Keys(j.Moving.Target)) {
			i, ok := at[id]
			if !ok {
				continue
			}
			n := &out[i]
			take := max(0, min(j.Moving.Target[id], n.GPUs-n.Reserved-used[id]))
			if take == 0 {
				continue
			}
			n.Reserved += take
			if h.GPUs == nil {
				h.GPUs = policy.Allocation{}
			}
			h.GPUs[id] = take
		}
		if len(h.GPUs) > 0 {
			held = append(held, h)
		}
	}
	return out, held
}
