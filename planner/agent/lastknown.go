package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// lastKnown answers the API's job reads (GET /v1/jobs, /v1/jobs/{id})
// when the store does not: each read is bounded (cluster.DefaultTimeout:
// a frozen Consul agent accepts the request and never answers), and a
// read that fails or times out is answered with the records of the last
// list the store gave, as the cluster's reads answer with the nodes read
// last. The first such answer of an outage logs a warning; the dependency
// watch says when Consul is down and back. Rounds never read it: they
// plan from the store or not at all.
type lastKnown struct {
	logger  hclog.Logger
	timeout time.Duration

	mu    sync.Mutex
	jobs  []*structs.Job // the last list, in the store's order
	at    time.Time      // when it was read
	stale bool           // answering from jobs since the last warning
}

func newLastKnown(logger hclog.Logger) *lastKnown {
	return &lastKnown{logger: logger, timeout: cluster.DefaultTimeout}
}

// list reads every job with read, or answers the last list read.
func (k *lastKnown) list(ctx context.Context, read func(context.Context) ([]*structs.Job, error)) ([]*structs.Job, error) {
	rctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	jobs, err := read(rctx)
	if err == nil {
		k.keep(jobs)
		return jobs, nil
	}
	if cached, ok := k.fallback(ctx, err); ok {
		return cached, nil
	}
	return nil, err
}

// job reads one job with read, or answers its record from the last list.
func (k *lastKnown) job(ctx context.Context, id string, read func(context.Context, string) (*structs.Job, error)) (*structs.Job, error) {
	rctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	j, err := read(rctx, id)
	if err == nil || errors.Is(err, structs.ErrNotFound) {
		return j, err
	}
	cached, ok := k.fallback(ctx, err)
	if !ok {
		return nil, err
	}
	for _, c := range cached {
		if c.ID == id {
			return c, nil
		}
	}
	return nil, err
}

// keep remembers a list the store gave.
func (k *lastKnown) keep(jobs []*structs.Job) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.jobs, k.at = jobs, time.Now()
	if k.stale {
		k.logger.Info("the store answers job reads again")
		k.stale = false
	}
}

// fallback is a copy of the last list, when there is one and the read
// failed for the store's sake (not the caller's, who gave up).
func (k *lastKnown) fallback(ctx context.Context, err error) ([]*structs.Job, bool) {
	if ctx.Err() != nil {
		return nil, false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.jobs == nil {
		return nil, false
	}
	if !k.stale {
		k.logger.Warn("the store does not answer; job reads answer the records read last", "as_of", k.at, "error", fmt.Sprint(err))
		k.stale = true
	}
	out := slices.Clone(k.jobs)
	for i, j := range out {
		out[i] = j.Clone()
	}
	return out, true
}
