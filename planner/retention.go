package planner

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Retention bounds the finished jobs (complete, failed, stopped) the
// store keeps, so that their records do not grow without bound: the
// config's retention block. Queued and running jobs are never deleted.
type Retention struct {
	// MaxFinished keeps at most this many finished jobs, those that
	// ended last; 0: no bound by count.
	MaxFinished int
	// MaxAge deletes a finished job this long after it ended; 0: no bound
	// by age.
	MaxAge time.Duration
	// Every is how often the leader collects (RunRetention); 0:
	// DefaultRetentionEvery.
	Every time.Duration
}

// DefaultRetentionEvery is how often the leader collects finished jobs:
// each collection lists every record.
const DefaultRetentionEvery = 10 * time.Minute

// Off reports whether r bounds nothing (every record is kept).
func (r Retention) Off() bool { return r.MaxFinished <= 0 && r.MaxAge <= 0 }

// CollectFinished deletes the finished jobs r keeps no longer: those that
// ended more than MaxAge ago, and those beyond the MaxFinished that ended
// last. A job with delivery work left (a copy, or a webhook to tell) is
// kept until it is done; a job written since it was listed is left to the
// next collection (the store deletes a record only at the version read,
// and never a queued or running one). It returns how many it deleted.
func (p *Planner) CollectFinished(ctx context.Context, r Retention) (int, error) {
	if r.Off() {
		return 0, nil
	}
	jobs, err := p.Store.ListJobs(ctx)
	if err != nil {
		return 0, fmt.Errorf("failed to list jobs: %w", err)
	}
	jobs = slices.DeleteFunc(jobs, func(j *structs.Job) bool { return !j.State.Terminal() })
	slices.SortStableFunc(jobs, func(a, b *structs.Job) int { return endOf(b).Compare(endOf(a)) }) // newest first
	now := p.now()
	deleted := 0
	for i, j := range jobs {
		expired := r.MaxAge > 0 && now.Sub(endOf(j)) > r.MaxAge
		over := r.MaxFinished > 0 && i >= r.MaxFinished
		if !expired && !over || deliveryWorkLeft(j) {
			continue
		}
		err := p.Store.DeleteJob(ctx, j.ID, j.Version)
		switch {
		case err == nil:
			deleted++
		case errors.Is(err, structs.ErrConflict), errors.Is(err, structs.ErrNotFound):
			// Written or deleted since it was listed: the next collection
			// judges it again.
		default:
			return deleted, fmt.Errorf("failed to delete finished job %s: %w", j.ID, err)
		}
	}
	return deleted, nil
}

// RunRetention collects finished jobs (CollectFinished) at once and every
// r.Every until ctx ends; it returns at once when r is Off.
func (p *Planner) RunRetention(ctx context.Context, r Retention) {
	if r.Off() {
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-timer.C:
		}
		n, err := p.CollectFinished(ctx, r)
		switch {
		case err != nil && ctx.Err() == nil:
			p.Logger.Warn("failed to collect finished jobs; trying again later", "error", err)
		case n > 0:
			p.Logger.Info("deleted finished jobs past their retention", "jobs", n,
				"max_finished", r.MaxFinished, "max_age", r.MaxAge.String())
		}
		timer.Reset(cmp.Or(r.Every, DefaultRetentionEvery))
	}
}

// endOf is when job j ended (its submission, for a record without an
// end time).
func endOf(j *structs.Job) time.Time {
	if j.Finished.IsZero() {
		return j.Submitted
	}
	return j.Finished
}

// deliveryWorkLeft reports whether a delivery of j is still to be copied
// or told to a webhook.
func deliveryWorkLeft(j *structs.Job) bool {
	return slices.ContainsFunc(j.Deliveries, func(d structs.Delivery) bool {
		return d.State == structs.DeliveryPending || d.Webhook == structs.WebhookPending
	})
}
