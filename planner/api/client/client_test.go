package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func TestNew_Address(t *testing.T) {
	cases := []struct {
		name, in, want, err string
	}{
		{name: "default", in: "", want: client.DefaultAddress},
		{name: "host:port", in: "10.0.0.1:4680", want: "http://10.0.0.1:4680"},
		{name: "https with path", in: "https://planner.example/api/", want: "https://planner.example/api"},
		{name: "bad scheme", in: "ftp://x", err: "invalid planner address"},
		{name: "no host", in: "http://", err: "invalid planner address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := client.New(client.Config{Address: tc.in})
			if tc.err != "" {
				must.ErrorContains(t, err, tc.err)
				return
			}
			must.NoError(t, err)
			must.Eq(t, tc.want, c.Address())
		})
	}
}

// The client round-trips every call and maps status codes to the api
// package's errors.
func TestClient_Calls(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	srv := apitest.NewServer(t, b)
	ctx := context.Background()
	c, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token, HTTPClient: srv.Client()})
	must.NoError(t, err)

	job, err := c.Submit(ctx, "training \"a\" {\n  command = \"x\"\n  gpus = 2\n}\n", "a.hcl", "")
	must.NoError(t, err)
	must.Eq(t, structs.JobQueued, job.State)

	got, err := c.Job(ctx, job.ID)
	must.NoError(t, err)
	must.Eq(t, job.ID, got.ID)

	stubs, err := c.Jobs(ctx)
	must.NoError(t, err)
	must.Len(t, 1, stubs)

	_, err = c.Job(ctx, "nope")
	must.True(t, errors.Is(err, api.ErrNotFound), must.Sprint(err))
	must.False(t, client.IsInput(err))

	_, err = c.Submit(ctx, "training \"a\" {\n", "b.hcl", "")
	must.True(t, client.IsInput(err))
	var ce *client.Error
	must.True(t, errors.As(err, &ce))
	must.Eq(t, 400, ce.StatusCode)
	must.Eq(t, "b.hcl", ce.Diagnostics[0].Filename)

	stopped, err := c.Stop(ctx, job.ID)
	must.NoError(t, err)
	must.Eq(t, structs.JobStopped, stopped.State)
	_, err = c.Stop(ctx, job.ID)
	must.True(t, errors.Is(err, api.ErrConflict), must.Sprint(err))

	ps, err := c.Policies(ctx)
	must.NoError(t, err)
	must.SliceNotEmpty(t, ps)
	st, err := c.SetPolicy(ctx, "round-robin", nil)
	must.NoError(t, err)
	must.Eq(t, "round-robin", st.Name)

	nodes, err := c.Nodes(ctx)
	must.NoError(t, err)
	must.Len(t, 1, nodes)

	status, err := c.Status(ctx)
	must.NoError(t, err)
	must.Eq(t, "round-robin", status.Policy.Name)

	anon, err := client.New(client.Config{Address: srv.URL, HTTPClient: srv.Client()})
	must.NoError(t, err)
	_, err = anon.SetPolicy(ctx, "fifo", nil)
	must.True(t, errors.As(err, &ce))
	must.Eq(t, 403, ce.StatusCode)
}

// Progress reports go through with the planner's token or the job's report
// token, and the job's report token works for that job only.
func TestClient_ReportProgress(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	srv := apitest.NewServer(t, b)
	ctx := context.Background()
	admin, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token, HTTPClient: srv.Client()})
	must.NoError(t, err)
	a, err := admin.Submit(ctx, "training \"a\" {\n  command = \"x\"\n  gpus = 2\n}\n", "a.hcl", "")
	must.NoError(t, err)
	other, err := admin.Submit(ctx, "training \"b\" {\n  command = \"x\"\n  gpus = 2\n}\n", "b.hcl", "")
	must.NoError(t, err)

	rate := 512.0
	must.NoError(t, admin.ReportProgress(ctx, a.ID, []api.ProgressReport{{Step: 10, SamplesPerSec: &rate}}))

	job, err := client.New(client.Config{Address: srv.URL, Token: structs.ReportToken(apitest.Token, a.ID), HTTPClient: srv.Client()})
	must.NoError(t, err)
	must.NoError(t, job.ReportProgress(ctx, a.ID, []api.ProgressReport{{Step: 20, Metric: &structs.Metric{Name: "accuracy", Value: 0.5}}}))
	got, err := admin.Job(ctx, a.ID)
	must.NoError(t, err)
	must.Eq(t, int64(20), got.Progress.Step)
	must.Eq(t, rate, *got.Progress.SamplesPerSec)
	must.Eq(t, int64(2), got.Progress.Reports)

	var ce *client.Error
	err = job.ReportProgress(ctx, other.ID, []api.ProgressReport{{Step: 1}})
	must.True(t, errors.As(err, &ce), must.Sprint(err))
	must.Eq(t, 403, ce.StatusCode)
	_, err = job.Stop(ctx, a.ID)
	must.True(t, errors.As(err, &ce), must.Sprint(err))
	must.Eq(t, 403, ce.StatusCode)

	err = admin.ReportProgress(ctx, "nope", []api.ProgressReport{{Step: 1}})
	must.True(t, errors.Is(err, api.ErrNotFound), must.Sprint(err))
	err = admin.ReportProgress(ctx, a.ID, []api.ProgressReport{{Step: -1}})
	must.True(t, client.IsInput(err), must.Sprint(err))
}

// Row 14 of issue 13: a client that retried a submission after a time-out
// made two jobs. The client now sends an Idempotency-Key and retries with
// it when the answer is lost: here the planner stores the job and the
// connection drops before the answer; the retry gets that job back, and
// the planner holds one job, not two.
func TestClient_SubmitRetriesWithTheKey(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	planner := apitest.NewServer(t, b).API
	var posts atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && posts.Add(1) == 1 {
			planner.ServeHTTP(httptest.NewRecorder(), r) // the job is made...
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close() // ...and the answer lost
			}
			return
		}
		planner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token})
	must.NoError(t, err)
	client.SetRetryDelay(c, time.Millisecond)
	key, err := client.NewIdempotencyKey()
	must.NoError(t, err)
	ctx := context.Background()
	src := "training \"a\" {\n  command = \"x\"\n  gpus = 2\n}\n"
	job, err := c.Submit(ctx, src, "a.hcl", key)
	must.NoError(t, err)
	must.Eq(t, int32(2), posts.Load())
	jobs, err := c.Jobs(ctx)
	must.NoError(t, err)
	must.Len(t, 1, jobs)
	must.Eq(t, jobs[0].ID, job.ID)

	// The same key with another jobspec is refused, not a second job.
	_, err = c.Submit(ctx, strings.Replace(src, "gpus = 2", "gpus = 3", 1), "a.hcl", key)
	must.True(t, errors.Is(err, api.ErrIdempotencyMismatch), must.Sprint(err))
	must.Eq(t, int32(3), posts.Load(), must.Sprint("a 422 is not retried"))

	// Without a key nothing is retried.
	posts.Store(0)
	_, err = c.Submit(ctx, src, "a.hcl", "")
	must.Error(t, err)
	must.Eq(t, int32(1), posts.Load())
}

// ListJobs reads one page, its total and the next page's token; AllJobs
// follows the tokens to the last page; from a planner that does not page
// (no headers), the answer is every job and the last page.
func TestClient_Pages(t *testing.T) {
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	srv := apitest.NewServer(t, b)
	ctx := context.Background()
	c, err := client.New(client.Config{Address: srv.URL, Token: apitest.Token, HTTPClient: srv.Client()})
	must.NoError(t, err)
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		_, err := c.Submit(ctx, "training \""+name+"\" {\n  command = \"x\"\n  gpus = 1\n}\n", name+".hcl", "")
		must.NoError(t, err)
	}
	ids := b.IDs()
	b.Start(ids[3], map[string]int{"node-1": 1}, "fifo")

	p, err := c.ListJobs(ctx, api.ListQuery{PerPage: 2, States: []structs.JobState{structs.JobQueued}})
	must.NoError(t, err)
	must.Eq(t, 4, p.Total)
	must.Eq(t, []string{ids[0], ids[1]}, stubIDs(p.Jobs))
	must.NotEq(t, "", p.NextToken)

	all, err := c.AllJobs(ctx, api.ListQuery{PerPage: 2, States: []structs.JobState{structs.JobQueued}})
	must.NoError(t, err)
	must.Eq(t, []string{ids[0], ids[1], ids[2], ids[4]}, stubIDs(all))
	all, err = c.Jobs(ctx)
	must.NoError(t, err)
	must.Eq(t, ids, stubIDs(all))
	must.True(t, p.StaleAsOf.IsZero(), must.Sprint("the store answered"))

	// A planner whose store does not answer says as of when its records
	// are, on each page and on every page read.
	asOf := time.Date(2026, 3, 1, 9, 0, 5, 0, time.UTC)
	b.Stale(asOf)
	p, err = c.ListJobs(ctx, api.ListQuery{PerPage: 2})
	must.NoError(t, err)
	must.Eq(t, asOf, p.StaleAsOf.UTC())
	every, err := c.AllJobsPage(ctx, api.ListQuery{PerPage: 2})
	must.NoError(t, err)
	must.Eq(t, ids, stubIDs(every.Jobs))
	must.Eq(t, len(ids), every.Total)
	must.Eq(t, asOf, every.StaleAsOf.UTC())
	b.Stale(time.Time{})

	old := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(`[{"id":"x-1","state":"queued"},{"id":"x-2","state":"running"}]`))
	}))
	t.Cleanup(old.Close)
	c, err = client.New(client.Config{Address: old.URL})
	must.NoError(t, err)
	p, err = c.ListJobs(ctx, api.ListQuery{PerPage: 1})
	must.NoError(t, err)
	must.Eq(t, 2, p.Total)
	must.Eq(t, "", p.NextToken)
	all, err = c.AllJobs(ctx, api.ListQuery{})
	must.NoError(t, err)
	must.Eq(t, []string{"x-1", "x-2"}, stubIDs(all))
}

func stubIDs(stubs []api.JobStub) []string {
	var out []string
	for _, s := range stubs {
		out = append(out, s.ID)
	}
	return out
}

// Every page read: the jobs are as of the oldest page's records, and a
// planner that sends a time that is not one is an error, not a fresh list.
func TestAllJobsPage_StaleAsOfTheOldestPage(t *testing.T) {
	older := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	newer := older.Add(time.Minute)
	var bad atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case bad.Load():
			w.Header().Set(api.StaleAsOfHeader, "yesterday")
			_, _ = w.Write([]byte(`[]`))
		case r.URL.Query().Get("next_token") == "":
			w.Header().Set(api.StaleAsOfHeader, newer.Format(time.RFC3339Nano))
			w.Header().Set(api.NextTokenHeader, "second")
			_, _ = w.Write([]byte(`[{"id":"x-1","state":"queued"}]`))
		default:
			w.Header().Set(api.StaleAsOfHeader, older.Format(time.RFC3339Nano))
			_, _ = w.Write([]byte(`[{"id":"x-2","state":"running"}]`))
		}
	}))
	t.Cleanup(srv.Close)
	c, err := client.New(client.Config{Address: srv.URL})
	must.NoError(t, err)
	p, err := c.AllJobsPage(context.Background(), api.ListQuery{})
	must.NoError(t, err)
	must.Eq(t, []string{"x-1", "x-2"}, stubIDs(p.Jobs))
	must.Eq(t, older, p.StaleAsOf.UTC())

	bad.Store(true)
	_, err = c.ListJobs(context.Background(), api.ListQuery{})
	must.ErrorContains(t, err, `X-Schedulearn-Stale-As-Of "yesterday", not a time`)
}
