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
// last. A page of jobs is answered with the last page the store gave for
// the same query, else with that page of the last list; a job with its
// record in either. A page so answered says so (JobPage.StaleAsOf: when
// the read that gave its records began, so every write acknowledged
// before then is in it, and one acknowledged after may not be). The first
// such answer of an outage logs a warning; the dependency watch says when
// Consul is down and back. Rounds never read it: they plan from the store
// or not at all.
type lastKnown struct {
	logger  hclog.Logger
	timeout time.Duration

	mu     sync.Mutex
	jobs   []*structs.Job // the last list, in the store's order
	listAt time.Time      // when the read that gave it began
	at     time.Time      // when the store last answered a read
	stale  bool           // answering from jobs since the last warning
	// pages are the last page read of each query, by queryKey; queries
	// its least recently read first. They are maxKnownPages at most and
	// hold maxKnownPageJobs records at most (kept counts them): the
	// least recently read go first.
	pages   map[string]knownPage
	queries []string
	kept    int
}

// Bounds of the pages lastKnown keeps: the records (twenty pages of
// api.DefaultPerPage), and the queries (each job status <prefix> is one).
const (
	maxKnownPageJobs = 10_000
	maxKnownPages    = 256
)

// knownPage is a page the store gave, and when the read that gave it
// began.
type knownPage struct {
	page *structs.JobPage
	at   time.Time
}

func newLastKnown(logger hclog.Logger) *lastKnown {
	return &lastKnown{logger: logger, timeout: cluster.DefaultTimeout}
}

// list reads every job with read, or answers the last list read.
func (k *lastKnown) list(ctx context.Context, read func(context.Context) ([]*structs.Job, error)) ([]*structs.Job, error) {
	rctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	began := time.Now()
	jobs, err := read(rctx)
	if err == nil {
		k.keep(jobs, began)
		return jobs, nil
	}
	if !k.failing(ctx, err) {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.jobs == nil {
		return nil, err
	}
	return clones(k.jobs), nil
}

// page reads the page of jobs q selects with read, or answers the last
// such page read, or that page of the last list where that is newer, with
// its StaleAsOf.
func (k *lastKnown) page(ctx context.Context, q structs.JobQuery, read func(context.Context, structs.JobQuery) (*structs.JobPage, error)) (*structs.JobPage, error) {
	rctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	began := time.Now()
	p, err := read(rctx, q)
	if err == nil {
		k.keepPage(q, p, began)
		return p, nil
	}
	if !k.failing(ctx, err) {
		return nil, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if kept, ok := k.pages[queryKey(&q)]; ok && (k.jobs == nil || !k.listAt.After(kept.at)) {
		c := *kept.page
		c.Jobs = clones(kept.page.Jobs)
		c.StaleAsOf = kept.at
		return &c, nil
	}
	if k.jobs == nil {
		return nil, err
	}
	sums := make([]structs.JobSummary, len(k.jobs))
	for i, j := range k.jobs {
		sums[i] = structs.SummaryOf(j)
	}
	pg := structs.PageOf(len(sums), func(i int) *structs.JobSummary { return &sums[i] }, &q)
	out := &structs.JobPage{Total: pg.Total, Before: pg.Before, Next: pg.Next, StaleAsOf: k.listAt}
	for _, i := range pg.Index {
		out.Jobs = append(out.Jobs, k.jobs[i].Clone())
	}
	return out, nil
}

// keepPage remembers the page the store gave for q to a read that began
// at began (unless one that began later gave it already), forgetting the
// least recently read pages beyond maxKnownPageJobs records.
func (k *lastKnown) keepPage(q structs.JobQuery, p *structs.JobPage, began time.Time) {
	key := queryKey(&q)
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fresh()
	old, ok := k.pages[key]
	if ok && began.Before(old.at) {
		return // a read that began after this one gave it already
	}
	if ok {
		k.kept -= len(old.page.Jobs)
		k.queries = slices.DeleteFunc(k.queries, func(s string) bool { return s == key })
	}
	if k.pages == nil {
		k.pages = map[string]knownPage{}
	}
	k.pages[key], k.kept = knownPage{page: p, at: began}, k.kept+len(p.Jobs)
	k.queries = append(k.queries, key)
	for (k.kept > maxKnownPageJobs || len(k.queries) > maxKnownPages) && len(k.queries) > 1 {
		k.kept -= len(k.pages[k.queries[0]].page.Jobs)
		delete(k.pages, k.queries[0])
		k.queries = k.queries[1:]
	}
}

// queryKey tells queries apart: two with the same key select the same
// page.
func queryKey(q *structs.JobQuery) string {
	var from structs.JobKey
	if q.From != nil {
		from = *q.From
	}
	return fmt.Sprintf("%q|%q|%q|%q|%s|%t|%s|%q|%t|%d", q.States, q.Queues, q.User, q.Prefix, q.HeldSince.Format(time.RFC3339Nano),
		q.From != nil, from.Submitted.Format(time.RFC3339Nano), from.ID, q.Reverse, q.Limit)
}

// job reads one job with read, or answers its record from the last list
// or a page kept.
func (k *lastKnown) job(ctx context.Context, id string, read func(context.Context, string) (*structs.Job, error)) (*structs.Job, error) {
	j, _, err := k.jobAsOf(ctx, id, read)
	return j, err
}

// jobAsOf is job, and when the read that gave a record kept began (zero for
// the store's answer).
func (k *lastKnown) jobAsOf(ctx context.Context, id string, read func(context.Context, string) (*structs.Job, error)) (*structs.Job, time.Time, error) {
	rctx, cancel := context.WithTimeout(ctx, k.timeout)
	defer cancel()
	j, err := read(rctx, id)
	if err == nil || errors.Is(err, structs.ErrNotFound) {
		return j, time.Time{}, err
	}
	if !k.failing(ctx, err) {
		return nil, time.Time{}, err
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, c := range k.jobs {
		if c.ID == id {
			return c.Clone(), k.listAt, nil
		}
	}
	for _, p := range k.pages {
		for _, c := range p.page.Jobs {
			if c.ID == id {
				return c.Clone(), p.at, nil
			}
		}
	}
	return nil, time.Time{}, err
}

// keep remembers a list the store gave to a read that began at began,
// unless one that began later gave one already.
func (k *lastKnown) keep(jobs []*structs.Job, began time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.fresh()
	if k.jobs != nil && began.Before(k.listAt) {
		return // a read that began after this one gave it already
	}
	k.jobs, k.listAt = jobs, began
}

// fresh notes a read the store answered; k.mu is held.
func (k *lastKnown) fresh() {
	k.at = time.Now()
	if k.stale {
		k.logger.Info("the store answers job reads again")
		k.stale = false
	}
}

// failing reports whether a read failed for the store's sake (not the
// caller's, who gave up) with something read before to answer from,
// and warns of the first such answer of an outage.
func (k *lastKnown) failing(ctx context.Context, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.jobs == nil && len(k.pages) == 0 {
		return false
	}
	if !k.stale {
		k.logger.Warn("the store does not answer; job reads answer the records read last", "as_of", k.at, "error", fmt.Sprint(err))
		k.stale = true
	}
	return true
}

// clones are copies of jobs.
func clones(jobs []*structs.Job) []*structs.Job {
	out := make([]*structs.Job, len(jobs))
	for i, j := range jobs {
		out[i] = j.Clone()
	}
	return out
}
