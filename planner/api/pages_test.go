package api_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// pagedBackend is a fake holding jobs j0..j(n-1), submitted a second
// apart: even ones named resnet50, odd ones bert; users alice, bob and
// carol in turn; every third one in queue vision, the others naming
// none (the default queue).
func pagedBackend(t *testing.T, n int) (*apitest.Backend, []string) {
	t.Helper()
	b := apitest.NewBackend()
	now := time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)
	b.Now = func() time.Time { now = now.Add(time.Second); return now }
	for i := range n {
		spec := &jobspec.Spec{Name: []string{"resnet50", "bert"}[i%2], User: []string{"alice", "bob", "carol"}[i%3],
			GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}
		if i%3 == 0 {
			spec.Queue = "vision"
		}
		_, _, err := b.Submit(context.Background(), spec, "", nil)
		must.NoError(t, err)
	}
	return b, b.IDs()
}

// page is one answer of a list route: its jobs' IDs, its total and its
// next token.
type page struct {
	ids   []string
	total int
	next  string
}

func getPage(t *testing.T, srv *apitest.Server, path string, q url.Values) page {
	t.Helper()
	code, h, raw := doHeader(t, srv, call{method: http.MethodGet, path: path + "?" + q.Encode(), header: withRead})
	must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
	var p page
	if path == "/v1/queue" {
		var entries []api.QueueEntry
		must.NoError(t, json.Unmarshal(raw, &entries))
		for _, e := range entries {
			p.ids = append(p.ids, e.Job.ID)
		}
	} else {
		var stubs []api.JobStub
		must.NoError(t, json.Unmarshal(raw, &stubs))
		for _, s := range stubs {
			p.ids = append(p.ids, s.ID)
		}
	}
	total, err := strconv.Atoi(h.Get(api.TotalHeader))
	must.NoError(t, err, must.Sprint("every page says how many jobs its filters select"))
	p.total, p.next = total, h.Get(api.NextTokenHeader)
	return p
}

// Issue 28 (job list read 40,013 lines, /v1/jobs 10.3 MB at 20,000 jobs):
// GET /v1/jobs answers a page, per_page jobs at most, with the count its
// filters select and, while more remain, where the next page starts; the
// pages, followed, hold every job once, in submission order.
func TestListJobs_Pages(t *testing.T) {
	b, ids := pagedBackend(t, 7)
	srv := apitest.NewServer(t, b)
	var got []string
	q := url.Values{"per_page": {"3"}}
	for n := 0; ; n++ {
		p := getPage(t, srv, "/v1/jobs", q)
		must.Eq(t, 7, p.total)
		got = append(got, p.ids...)
		if p.next == "" {
			must.Eq(t, 2, n, must.Sprint("7 jobs are 3 pages of 3"))
			break
		}
		must.Len(t, 3, p.ids)
		q.Set("next_token", p.next)
	}
	must.Eq(t, ids, got)
}

// A request without per_page gets DefaultPerPage jobs, not every job.
func TestListJobs_DefaultPageIsBounded(t *testing.T) {
	b, ids := pagedBackend(t, api.DefaultPerPage+1)
	srv := apitest.NewServer(t, b)
	p := getPage(t, srv, "/v1/jobs", nil)
	must.Eq(t, ids[:api.DefaultPerPage], p.ids)
	must.Eq(t, api.DefaultPerPage+1, p.total)
	must.NotEq(t, "", p.next)
	p = getPage(t, srv, "/v1/jobs", url.Values{"next_token": {p.next}})
	must.Eq(t, ids[api.DefaultPerPage:], p.ids)
	must.Eq(t, "", p.next)
}

// The next page starts where the last one ended however the jobs changed
// in between: one added (it goes last) or one that ended (it stays where
// it was in a list of every state, and leaves a list of queued jobs
// without moving the others) neither repeats nor skips a job.
func TestListJobs_CursorIsStable(t *testing.T) {
	for _, tc := range []struct {
		name  string
		state string
		end   int // the job that ends between the pages
		want2 func(ids []string, late string) []string
	}{
		{"every state", "", 3, func(ids []string, _ string) []string { return ids[3:] }},
		{"queued", "queued", 4, func(ids []string, late string) []string { return []string{ids[3], ids[5], late} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, ids := pagedBackend(t, 6)
			srv := apitest.NewServer(t, b)
			q := url.Values{"per_page": {"3"}, "state": {tc.state}}
			first := getPage(t, srv, "/v1/jobs", q)
			must.Eq(t, ids[:3], first.ids)
			b.Finish(ids[tc.end], structs.JobComplete, "done")
			late, _, err := b.Submit(context.Background(), &jobspec.Spec{Name: "late", GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}, "", nil)
			must.NoError(t, err)
			q.Set("next_token", first.next)
			must.Eq(t, tc.want2(ids, late.ID), getPage(t, srv, "/v1/jobs", q).ids)
		})
	}
}

// Filters: one state or several, a queue (default: the jobs that name
// none), a user, a prefix of the name or the ID; together they all hold.
// reverse lists the newest first.
func TestListJobs_Filters(t *testing.T) {
	b, ids := pagedBackend(t, 7)
	b.Start(ids[2], map[string]int{"n1": 1}, "fifo")
	b.Finish(ids[5], structs.JobFailed, "oom")
	srv := apitest.NewServer(t, b)
	for _, tc := range []struct {
		name string
		q    url.Values
		want []string
	}{
		{"one state", url.Values{"state": {"running"}}, []string{ids[2]}},
		{"states", url.Values{"state": {"running,failed"}}, []string{ids[2], ids[5]}},
		{"queued", url.Values{"state": {"queued"}}, []string{ids[0], ids[1], ids[3], ids[4], ids[6]}},
		{"a queue", url.Values{"queue": {"vision"}}, []string{ids[0], ids[3], ids[6]}},
		{"the default queue", url.Values{"queue": {"default"}}, []string{ids[1], ids[2], ids[4], ids[5]}},
		{"a user", url.Values{"user": {"bob"}}, []string{ids[1], ids[4]}},
		{"a name prefix", url.Values{"prefix": {"be"}}, []string{ids[1], ids[3], ids[5]}},
		{"an ID prefix", url.Values{"prefix": {ids[4]}}, []string{ids[4]}},
		{"together", url.Values{"state": {"queued"}, "user": {"alice"}, "queue": {"vision"}}, []string{ids[0], ids[3], ids[6]}},
		{"none", url.Values{"user": {"dave"}}, nil},
		{"newest first", url.Values{"reverse": {"true"}, "per_page": {"2"}}, []string{ids[6], ids[5]}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := getPage(t, srv, "/v1/jobs", tc.q)
			must.Eq(t, tc.want, p.ids)
			if tc.q.Get("per_page") == "" {
				must.Eq(t, len(tc.want), p.total)
			}
		})
	}
}

// What a list route cannot use is a 400 that names it: an unknown state,
// a per_page out of bounds, a token the planner did not make.
func TestListJobs_BadQueries(t *testing.T) {
	b, _ := pagedBackend(t, 1)
	srv := apitest.NewServer(t, b)
	for _, tc := range []struct {
		path, query, want string
	}{
		{"/v1/jobs", "state=queued,sleeping", `unknown state "sleeping": the states are queued, running, complete, failed, stopped`},
		{"/v1/jobs", "per_page=0", `invalid per_page "0": a number from 1 to 5000`},
		{"/v1/jobs", "per_page=5001", `invalid per_page "5001"`},
		{"/v1/jobs", "per_page=ten", `invalid per_page "ten"`},
		{"/v1/jobs", "next_token=bm90IGEgdG9rZW4", `invalid next_token "bm90IGEgdG9rZW4"`},
		{"/v1/jobs", "next_token=%25%25", `invalid next_token "%%"`},
		{"/v1/jobs", "reverse=maybe", `invalid reverse "maybe"`},
		{"/v1/queue", "state=running", "the queue lists queued jobs only"},
		{"/v1/queue", "per_page=-1", `invalid per_page "-1"`},
	} {
		t.Run(tc.query, func(t *testing.T) {
			code, raw := do(t, srv, call{method: http.MethodGet, path: tc.path + "?" + tc.query, header: withRead})
			must.Eq(t, http.StatusBadRequest, code)
			must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, tc.want)
		})
	}
}

// GET /v1/queue pages the queued jobs the same way; each entry's position
// is its place among the jobs selected, oldest first, on every page and
// either way.
func TestQueue_Pages(t *testing.T) {
	b, ids := pagedBackend(t, 6)
	b.Start(ids[1], map[string]int{"n1": 1}, "fifo")
	srv := apitest.NewServer(t, b)
	positions := func(q url.Values) ([]int, []string, http.Header) {
		t.Helper()
		code, h, raw := doHeader(t, srv, call{method: http.MethodGet, path: "/v1/queue?" + q.Encode(), header: withRead})
		must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
		var pos []int
		var got []string
		for _, e := range decodeAs[[]api.QueueEntry](t, raw) {
			pos, got = append(pos, e.Position), append(got, e.Job.ID)
		}
		return pos, got, h
	}
	pos, got, h := positions(url.Values{"per_page": {"2"}})
	must.Eq(t, []int{1, 2}, pos)
	must.Eq(t, []string{ids[0], ids[2]}, got)
	must.Eq(t, "5", h.Get(api.TotalHeader))
	pos, got, _ = positions(url.Values{"per_page": {"2"}, "next_token": {h.Get(api.NextTokenHeader)}})
	must.Eq(t, []int{3, 4}, pos)
	must.Eq(t, []string{ids[3], ids[4]}, got)
	pos, got, _ = positions(url.Values{"per_page": {"2"}, "reverse": {"true"}})
	must.Eq(t, []int{5, 4}, pos)
	must.Eq(t, []string{ids[5], ids[4]}, got)
	p := getPage(t, srv, "/v1/queue", url.Values{"user": {"alice"}})
	must.Eq(t, []string{ids[0], ids[3]}, p.ids)
	must.Eq(t, 2, p.total)
}

// ListQuery is the query string a list route reads; what is not set is
// left out.
func TestListQuery_Values(t *testing.T) {
	q := api.ListQuery{States: []structs.JobState{structs.JobQueued, structs.JobRunning}, Queues: []string{"a", "b"},
		User: "u", Prefix: "p", PerPage: 10, NextToken: "tok", Reverse: true}
	must.Eq(t, "next_token=tok&per_page=10&prefix=p&queue=a%2Cb&reverse=true&state=queued%2Crunning&user=u", q.Values().Encode())
	must.Eq(t, "", api.ListQuery{}.Values().Encode())
}

// GET /v1/nodes pages as the job lists do (a cluster of thousands of
// nodes): per_page, the total, and the next page's token; a token that
// is not a node page's is a 400.
func TestListNodes_Pages(t *testing.T) {
	var nodes []api.NodeInfo
	for i := range 5 {
		nodes = append(nodes, apitest.Node(fmt.Sprintf("n%d", i), fmt.Sprintf("gpu-%d", i), 8))
	}
	srv := apitest.NewServer(t, apitest.NewBackend(nodes...))
	var got []string
	q := url.Values{"per_page": {"2"}}
	for {
		code, h, raw := doHeader(t, srv, call{method: http.MethodGet, path: "/v1/nodes?" + q.Encode(), header: withRead})
		must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
		must.Eq(t, "5", h.Get(api.TotalHeader))
		page := decodeAs[[]api.NodeInfo](t, raw)
		must.LessEq(t, 2, len(page))
		for _, n := range page {
			got = append(got, n.ID)
		}
		if h.Get(api.NextTokenHeader) == "" {
			break
		}
		q.Set("next_token", h.Get(api.NextTokenHeader))
	}
	must.Eq(t, []string{"n0", "n1", "n2", "n3", "n4"}, got)

	for _, bad := range []string{"next_token=bm9kZSA", "next_token=!!", "per_page=0"} {
		code, raw := do(t, srv, call{method: http.MethodGet, path: "/v1/nodes?" + bad, header: withRead})
		must.Eq(t, http.StatusBadRequest, code, must.Sprintf("%s: %s", bad, raw))
	}
}

// A page the planner answered from the records it read last (its store
// does not answer) says as of when, on both job lists; a page the store
// gave says nothing.
func TestPages_SayWhenStale(t *testing.T) {
	b, _ := pagedBackend(t, 3)
	srv := apitest.NewServer(t, b)
	for _, path := range []string{"/v1/jobs", "/v1/queue"} {
		code, h, raw := doHeader(t, srv, call{method: http.MethodGet, path: path, header: withRead})
		must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
		must.Eq(t, "", h.Get(api.StaleAsOfHeader), must.Sprint(path, ": the store answered"))
	}
	b.Stale(time.Date(2026, 3, 1, 9, 0, 5, 250_000_000, time.FixedZone("CET", 3600)))
	for _, path := range []string{"/v1/jobs", "/v1/queue"} {
		code, h, raw := doHeader(t, srv, call{method: http.MethodGet, path: path, header: withRead})
		must.Eq(t, http.StatusOK, code, must.Sprintf("%s", raw))
		must.Eq(t, "2026-03-01T08:00:05.25Z", h.Get(api.StaleAsOfHeader), must.Sprint(path))
	}
}
