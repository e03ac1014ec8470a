package agent

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A store that stops answering (the chaos run froze the Consul server:
// GET /v1/jobs hung, then answered 500) no longer fails the API's job
// reads once it has answered a list: they are bounded, and answer the
// records read last; a job the store says does not exist stays not
// found, and with nothing read before, the error comes through.
func TestLastKnown_AnswersTheLastListWhileTheStoreDoesNot(t *testing.T) {
	down := errors.New("Unexpected response code: 500 (No known Consul servers)")
	fail := func(context.Context) ([]*structs.Job, error) { return nil, down }
	hang := func(ctx context.Context) ([]*structs.Job, error) { <-ctx.Done(); return nil, ctx.Err() }
	getFail := func(context.Context, string) (*structs.Job, error) { return nil, down }

	tests := []struct {
		name string
		run  func(t *testing.T, k *lastKnown)
	}{
		{"nothing read before: the error", func(t *testing.T, k *lastKnown) {
			_, err := k.list(context.Background(), fail)
			must.ErrorIs(t, err, down)
			_, err = k.job(context.Background(), "a", getFail)
			must.ErrorIs(t, err, down)
		}},
		{"a failing store: the last list", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a", State: structs.JobRunning}, {ID: "b"}}, time.Now())
			jobs, err := k.list(context.Background(), fail)
			must.NoError(t, err)
			must.Len(t, 2, jobs)
			jobs[0].State = structs.JobFailed // a copy
			j, err := k.job(context.Background(), "a", getFail)
			must.NoError(t, err)
			must.Eq(t, structs.JobRunning, j.State)
			_, err = k.job(context.Background(), "c", getFail)
			must.ErrorIs(t, err, down, must.Sprint("a job the last list does not hold"))
			listed := k.listAt
			j, asOf, err := k.jobAsOf(context.Background(), "a", getFail)
			must.NoError(t, err)
			must.Eq(t, "a", j.ID)
			must.Eq(t, listed, asOf, must.Sprint("a record kept says as of when"))
			_, asOf, err = k.jobAsOf(context.Background(), "a", func(context.Context, string) (*structs.Job, error) {
				return &structs.Job{ID: "a"}, nil
			})
			must.NoError(t, err)
			must.True(t, asOf.IsZero(), must.Sprint("the store's answer is not marked"))
		}},
		{"a store that never answers: bounded", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}}, time.Now())
			start := time.Now()
			jobs, err := k.list(context.Background(), hang)
			must.NoError(t, err)
			must.Len(t, 1, jobs)
			must.Less(t, time.Second, time.Since(start))
		}},
		{"not found stays not found", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}}, time.Now())
			_, err := k.job(context.Background(), "a", func(context.Context, string) (*structs.Job, error) {
				return nil, structs.ErrNotFound
			})
			must.ErrorIs(t, err, structs.ErrNotFound)
		}},
		{"a caller that gave up: its error", func(t *testing.T, k *lastKnown) {
			k.keep([]*structs.Job{{ID: "a"}}, time.Now())
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := k.list(ctx, hang)
			must.ErrorIs(t, err, context.Canceled)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			k := newLastKnown(hclog.NewNullLogger())
			k.timeout = 50 * time.Millisecond
			tc.run(t, k)
		})
	}
}

// A page of jobs (GET /v1/jobs?...) the store does not answer is the last
// page it gave for the same query, else that page of the last list read
// whole, else the store's error; a job on a page kept is answered too;
// pages kept hold maxKnownPageJobs records at most, the least recently
// read going first.
func TestLastKnown_AnswersPages(t *testing.T) {
	down := errors.New("Unexpected response code: 500 (No known Consul servers)")
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	job := func(i int, state structs.JobState) *structs.Job {
		return &structs.Job{ID: fmt.Sprintf("j%d", i), State: state, Submitted: t0.Add(time.Duration(i) * time.Second)}
	}
	answer := func(p *structs.JobPage) func(context.Context, structs.JobQuery) (*structs.JobPage, error) {
		return func(context.Context, structs.JobQuery) (*structs.JobPage, error) { return p, nil }
	}
	failPage := func(context.Context, structs.JobQuery) (*structs.JobPage, error) { return nil, down }
	getFail := func(context.Context, string) (*structs.Job, error) { return nil, down }
	queued := structs.JobQuery{States: []structs.JobState{structs.JobQueued}, Limit: 2}
	ids := func(p *structs.JobPage) []string {
		var out []string
		for _, j := range p.Jobs {
			out = append(out, j.ID)
		}
		return out
	}

	k := newLastKnown(hclog.NewNullLogger())
	_, err := k.page(context.Background(), queued, failPage)
	must.ErrorIs(t, err, down, must.Sprint("nothing read before"))

	kept := &structs.JobPage{Jobs: []*structs.Job{job(7, structs.JobQueued)}, Total: 9}
	var readBegan, readEnded time.Time
	slow := func(context.Context, structs.JobQuery) (*structs.JobPage, error) {
		readBegan = time.Now()
		time.Sleep(20 * time.Millisecond) // a write acknowledged meanwhile may be missing
		defer func() { readEnded = time.Now() }()
		return kept, nil
	}
	fresh, err := k.page(context.Background(), queued, slow)
	must.NoError(t, err)
	must.Eq(t, time.Time{}, fresh.StaleAsOf, must.Sprint("the store answered: not stale"))
	p, err := k.page(context.Background(), queued, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"j7"}, ids(p))
	must.Eq(t, 9, p.Total)
	// Stale as of when the read began, not when it ended: a job
	// acknowledged while it was under way may not be in it.
	must.False(t, p.StaleAsOf.IsZero())
	must.False(t, p.StaleAsOf.After(readBegan), must.Sprint("as of when the read began"))
	must.True(t, p.StaleAsOf.Before(readEnded))
	p.Jobs[0].State = structs.JobFailed // a copy
	j, err := k.job(context.Background(), "j7", getFail)
	must.NoError(t, err)
	must.Eq(t, structs.JobQueued, j.State)

	other := queued
	other.Reverse = true
	_, err = k.page(context.Background(), other, failPage)
	must.ErrorIs(t, err, down, must.Sprint("another query, and no list read whole"))
	listed := time.Now()
	k.keep([]*structs.Job{job(0, structs.JobRunning), job(1, structs.JobQueued), job(2, structs.JobQueued), job(3, structs.JobQueued)}, listed)
	p, err = k.page(context.Background(), other, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"j3", "j2"}, ids(p), must.Sprint("that page of the last list"))
	must.Eq(t, 3, p.Total)
	must.Eq(t, "j1", p.Next.ID)
	must.Eq(t, listed, p.StaleAsOf, must.Sprint("as of the last list"))

	big := &structs.JobPage{}
	for i := range maxKnownPageJobs {
		big.Jobs = append(big.Jobs, job(100+i, structs.JobQueued))
	}
	_, err = k.page(context.Background(), structs.JobQuery{User: "many"}, answer(big))
	must.NoError(t, err)
	p, err = k.page(context.Background(), queued, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"j1", "j2"}, ids(p), must.Sprint("the page kept first was forgotten: the last list's"))
	p, err = k.page(context.Background(), structs.JobQuery{User: "many"}, failPage)
	must.NoError(t, err)
	must.Len(t, maxKnownPageJobs, p.Jobs)

	// Pages of few jobs (or none: a prefix nothing has) are bounded too.
	for i := range maxKnownPages + 10 {
		_, err = k.page(context.Background(), structs.JobQuery{Prefix: fmt.Sprint("x", i)}, answer(&structs.JobPage{}))
		must.NoError(t, err)
	}
	must.MapLen(t, maxKnownPages, k.pages)
	must.Len(t, maxKnownPages, k.queries)
}

// Reads that end out of order leave the records of the one that began
// last, and a page the store does not answer comes from the newer of the
// page kept for its query and the last list: the answer is never older
// than what the planner read.
func TestLastKnown_AnswersTheNewestRecords(t *testing.T) {
	down := errors.New("Unexpected response code: 500 (No known Consul servers)")
	failPage := func(context.Context, structs.JobQuery) (*structs.JobPage, error) { return nil, down }
	fail := func(context.Context) ([]*structs.Job, error) { return nil, down }
	t0 := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	q := structs.JobQuery{Limit: 10}
	ids := func(jobs []*structs.Job) []string {
		var out []string
		for _, j := range jobs {
			out = append(out, j.ID)
		}
		return out
	}
	jobs := func(ids ...string) []*structs.Job {
		var out []*structs.Job
		for i, id := range ids {
			out = append(out, &structs.Job{ID: id, Submitted: t0.Add(time.Duration(i) * time.Second)})
		}
		return out
	}

	k := newLastKnown(hclog.NewNullLogger())
	k.keepPage(q, &structs.JobPage{Jobs: jobs("a", "b"), Total: 2}, t0.Add(2*time.Second))
	k.keepPage(q, &structs.JobPage{Jobs: jobs("a"), Total: 1}, t0.Add(time.Second)) // began first, ended last
	p, err := k.page(context.Background(), q, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"a", "b"}, ids(p.Jobs))
	must.Eq(t, t0.Add(2*time.Second), p.StaleAsOf)

	k.keep(jobs("a", "b", "c"), t0.Add(4*time.Second))
	k.keep(jobs("a"), t0.Add(3*time.Second)) // began first, ended last
	all, err := k.list(context.Background(), fail)
	must.NoError(t, err)
	must.Eq(t, []string{"a", "b", "c"}, ids(all))
	p, err = k.page(context.Background(), q, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"a", "b", "c"}, ids(p.Jobs), must.Sprint("the last list is newer than the page kept"))
	must.Eq(t, t0.Add(4*time.Second), p.StaleAsOf)

	k.keepPage(q, &structs.JobPage{Jobs: jobs("a", "b", "c", "d"), Total: 4}, t0.Add(5*time.Second))
	p, err = k.page(context.Background(), q, failPage)
	must.NoError(t, err)
	must.Eq(t, []string{"a", "b", "c", "d"}, ids(p.Jobs), must.Sprint("the page kept is newer than the last list"))
	must.Eq(t, t0.Add(5*time.Second), p.StaleAsOf)
}
