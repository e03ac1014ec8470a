package planner

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// maxRequeueReason bounds why a job was requeued, in its records.
const maxRequeueReason = 500

// requeue records that job j's run, now stopped in Nomad, was ended by
// the cluster (kind, and why): the job goes back to the queue, gives its
// GPUs back, and starts again from its last checkpoint when the policy
// next starts it (the round's start path, resumePoint). Past
// Planner.Retries such requeues, it fails instead, saying that its
// retries are spent (code is the exit code it ends with). It returns the
// record as stored.
func (p *Planner) requeue(ctx context.Context, j *structs.Job, kind, why string, code int, now time.Time) (*structs.Job, error) {
	why = structs.Clip(why, maxRequeueReason) // Nomad's words, in an event and the history
	next := j.Clone()                         // the store's own where shared
	spent := false
	err := p.update(ctx, next, func(j *structs.Job) error {
		accrue(j, now)
		j.Allocation = nil
		j.Health = nil
		spent = j.Retries >= p.Retries
		if spent {
			j.State = structs.JobFailed
			j.ExitCode = &code
			j.Finished = now
			j.AddChange(structs.GPUChange{Time: now, GPUs: 0, Reason: "job ended"})
			j.AddEvents(structs.Event{Time: now, Type: string(structs.JobFailed), Message: fmt.Sprintf(
				"failed (%s): %s; the planner's %d retries of it are spent", kind, why, p.Retries)})
			return nil
		}
		j.Retries++
		j.State = structs.JobQueued
		msg := fmt.Sprintf("requeued (%s, try %d of %d): %s", kind, j.Retries+1, p.Retries+1, why)
		j.AddChange(structs.GPUChange{Time: now, GPUs: 0, Reason: msg})
		j.AddEvents(structs.Event{Time: now, Type: structs.EventRequeued, Message: msg})
		return nil
	})
	if err != nil {
		return j, fmt.Errorf("failed to record the requeue of job %s: %w", j.ID, err)
	}
	if spent {
		p.Logger.Warn("job failed: its retries are spent", "job", j.ID, "kind", kind, "reason", why, "retries", p.Retries)
		return next, nil
	}
	p.metrics().Requeue(kind)
	p.Logger.Warn("job requeued", "job", j.ID, "kind", kind, "reason", why, "retry", next.Retries, "of", p.Retries)
	return next, nil
}

// requeuedLast reports whether job j's last start or requeue was a
// requeue: a start now is a restart that resumes from its checkpoint.
func requeuedLast(j *structs.Job) bool {
	for _, e := range slices.Backward(j.Events) {
		switch e.Type {
		case structs.EventRequeued:
			return true
		case string(policy.Start):
			return false
		}
	}
	return false
}
