package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

const goodSpec = "training \"resnet50\" {\n  command = \"python3\"\n  gpus = 4\n}\n"

// submitBody is a POST /v1/jobs body.
func submitBody(src, filename string) string {
	buf, _ := json.Marshal(api.SubmitRequest{Source: src, Filename: filename})
	return string(buf)
}

type call struct {
	method, path, body string
	header             map[string]string
}

// do sends c and returns the status and body.
func do(t *testing.T, srv *apitest.Server, c call) (int, []byte) {
	t.Helper()
	code, _, raw := doHeader(t, srv, c)
	return code, raw
}

// doHeader sends c and returns the status, headers and body.
func doHeader(t *testing.T, srv *apitest.Server, c call) (int, http.Header, []byte) {
	t.Helper()
	var body io.Reader
	if c.body != "" {
		body = strings.NewReader(c.body)
	}
	req, err := http.NewRequest(c.method, srv.URL+c.path, body)
	must.NoError(t, err)
	for k, v := range c.header {
		req.Header.Set(k, v)
	}
	resp, err := srv.Client().Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	if resp.StatusCode == http.StatusNoContent {
		must.SliceEmpty(t, raw)
	} else {
		must.Eq(t, "application/json", resp.Header.Get("Content-Type"), must.Sprintf("body %s", raw))
	}
	return resp.StatusCode, resp.Header, raw
}

var (
	withToken  = map[string]string{api.TokenHeader: apitest.Token}
	withBearer = map[string]string{"Authorization": "Bearer " + apitest.Token}
	withRead   = map[string]string{api.TokenHeader: apitest.ReadToken}
	wrongToken = map[string]string{api.TokenHeader: apitest.Token + "x"}
)

func decodeAs[T any](t *testing.T, raw []byte) T {
	t.Helper()
	var v T
	must.NoError(t, json.Unmarshal(raw, &v), must.Sprintf("body %s", raw))
	return v
}

// errorIs checks an ErrorResponse body's message.
func errorIs(sub string) func(*testing.T, []byte) {
	return func(t *testing.T, raw []byte) {
		t.Helper()
		must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, sub)
	}
}

func TestServer_Routes(t *testing.T) {
	cases := []struct {
		name  string
		setup func(b *apitest.Backend) // after one job, resnet50-00000001, is queued
		call  call
		code  int
		check func(t *testing.T, raw []byte)
	}{
		{
			name: "list jobs",
			call: call{method: "GET", path: "/v1/jobs"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				jobs := decodeAs[[]api.JobStub](t, raw)
				must.Len(t, 1, jobs)
				must.Eq(t, "resnet50-00000001", jobs[0].ID)
				must.Eq(t, structs.JobQueued, jobs[0].State)
				must.Eq(t, 4, jobs[0].MinGPUs)
				must.StrNotContains(t, string(raw), "source") // stubs only
			},
		},
		{
			name: "submit",
			call: call{method: "POST", path: "/v1/jobs", body: submitBody(goodSpec, "train.hcl"), header: withToken},
			code: 201,
			check: func(t *testing.T, raw []byte) {
				j := decodeAs[structs.Job](t, raw)
				must.Eq(t, "resnet50-00000002", j.ID)
				must.Eq(t, structs.JobQueued, j.State)
				must.Eq(t, goodSpec, j.Source)
				must.Eq(t, "train.hcl", j.Spec.Range.Filename)
			},
		},
		{
			name: "submit with bearer token",
			call: call{method: "POST", path: "/v1/jobs", body: submitBody(goodSpec, ""), header: withBearer},
			code: 201,
			check: func(t *testing.T, raw []byte) {
				must.Eq(t, api.DefaultFilename, decodeAs[structs.Job](t, raw).Spec.Range.Filename)
			},
		},
		{
			name:  "submit without token",
			call:  call{method: "POST", path: "/v1/jobs", body: submitBody(goodSpec, "train.hcl")},
			code:  403,
			check: errorIs("permission denied"),
		},
		{
			name:  "submit with wrong token",
			call:  call{method: "POST", path: "/v1/jobs", body: submitBody(goodSpec, "train.hcl"), header: wrongToken},
			code:  403,
			check: errorIs("permission denied"),
		},
		{
			name: "submit broken jobspec",
			call: call{method: "POST", path: "/v1/jobs", header: withToken,
				body: submitBody("training \"a\" {\n  command = \"x\"\n  gpus = 0\n}\n", "jobs/train.hcl")},
			code: 400,
			check: func(t *testing.T, raw []byte) {
				e := decodeAs[api.ErrorResponse](t, raw)
				must.StrContains(t, e.Error, "jobs/train.hcl:3:10: error: ")
				must.Len(t, 1, e.Diagnostics)
				d := e.Diagnostics[0]
				must.Eq(t, api.Diagnostic{Severity: "error", Summary: d.Summary, Detail: d.Detail, Filename: "jobs/train.hcl", Line: 3, Column: 10}, d)
				must.StrContains(t, d.Summary+d.Detail, "at least 1")
			},
		},
		{
			name: "submit syntax error",
			call: call{method: "POST", path: "/v1/jobs", header: withToken,
				body: submitBody("training \"a\" {\n  command = \n}\n", "t.hcl")},
			code: 400,
			check: func(t *testing.T, raw []byte) {
				e := decodeAs[api.ErrorResponse](t, raw)
				must.SliceNotEmpty(t, e.Diagnostics)
				must.Eq(t, 2, e.Diagnostics[0].Line)
				must.Eq(t, 13, e.Diagnostics[0].Column)
			},
		},
		{
			name: "submit more GPUs than any node has",
			call: call{method: "POST", path: "/v1/jobs", header: withToken,
				body: submitBody("training \"big\" {\n  command = \"x\"\n  gpus = 64\n}\n", "big.hcl")},
			code: 400,
			check: func(t *testing.T, raw []byte) {
				e := decodeAs[api.ErrorResponse](t, raw)
				must.StrContains(t, e.Error, "big.hcl:1:1: error: Not enough GPUs")
				must.Eq(t, "big.hcl", e.Diagnostics[0].Filename)
			},
		},
		{
			name:  "submit empty source",
			call:  call{method: "POST", path: "/v1/jobs", body: `{"source": "  "}`, header: withToken},
			code:  400,
			check: errorIs("source is empty"),
		},
		{
			name:  "submit unknown field",
			call:  call{method: "POST", path: "/v1/jobs", body: `{"src": "x"}`, header: withToken},
			code:  400,
			check: errorIs("unknown field"),
		},
		{
			name:  "submit not JSON",
			call:  call{method: "POST", path: "/v1/jobs", body: `training "a" {}`, header: withToken},
			code:  400,
			check: errorIs("invalid request body"),
		},
		{
			name:  "submit empty body",
			call:  call{method: "POST", path: "/v1/jobs", header: withToken},
			code:  400,
			check: errorIs("empty"),
		},
		{
			name:  "submit too large",
			call:  call{method: "POST", path: "/v1/jobs", body: submitBody(strings.Repeat("#", api.MaxBodyBytes), "x.hcl"), header: withToken},
			code:  413,
			check: errorIs("request body over"),
		},
		{
			name: "get job",
			call: call{method: "GET", path: "/v1/jobs/resnet50-00000001"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				j := decodeAs[structs.Job](t, raw)
				must.Eq(t, "resnet50", j.Spec.Name)
				must.Eq(t, goodSpec, j.Source)
			},
		},
		{
			name:  "get unknown job",
			call:  call{method: "GET", path: "/v1/jobs/nope"},
			code:  404,
			check: errorIs(`failed to read job "nope": job "nope": not found`),
		},
		{
			name: "stop job",
			call: call{method: "POST", path: "/v1/jobs/resnet50-00000001/stop", header: withToken},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				must.Eq(t, structs.JobStopped, decodeAs[structs.Job](t, raw).State)
			},
		},
		{
			name: "stop job by DELETE",
			call: call{method: "DELETE", path: "/v1/jobs/resnet50-00000001", header: withBearer},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				must.Eq(t, structs.JobStopped, decodeAs[structs.Job](t, raw).State)
			},
		},
		{
			name:  "stop without token",
			call:  call{method: "POST", path: "/v1/jobs/resnet50-00000001/stop"},
			code:  403,
			check: errorIs("permission denied"),
		},
		{
			name:  "DELETE without token",
			call:  call{method: "DELETE", path: "/v1/jobs/resnet50-00000001"},
			code:  403,
			check: errorIs("permission denied"),
		},
		{
			name:  "stop unknown job",
			call:  call{method: "POST", path: "/v1/jobs/nope/stop", header: withToken},
			code:  404,
			check: errorIs("not found"),
		},
		{
			name:  "stop ended job",
			setup: func(b *apitest.Backend) { b.Finish("resnet50-00000001", structs.JobComplete, "done") },
			call:  call{method: "POST", path: "/v1/jobs/resnet50-00000001/stop", header: withToken},
			code:  409,
			check: errorIs("already ended (complete)"),
		},
		{
			name: "list policies",
			call: call{method: "GET", path: "/v1/policies"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				ps := decodeAs[[]api.PolicyInfo](t, raw)
				must.SliceNotEmpty(t, ps)
				active := 0
				for _, p := range ps {
					must.Eq(t, api.PolicyBuiltin, p.Kind)
					if p.Active {
						active++
						must.Eq(t, "fifo", p.Name)
					}
				}
				must.Eq(t, 1, active)
			},
		},
		{
			name: "set policy",
			call: call{method: "PUT", path: "/v1/policy", body: `{"name": "elastic-fifo"}`, header: withToken},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				must.Eq(t, "elastic-fifo", decodeAs[structs.PolicyState](t, raw).Name)
			},
		},
		{
			name:  "set unknown policy",
			call:  call{method: "PUT", path: "/v1/policy", body: `{"name": "lottery"}`, header: withToken},
			code:  400,
			check: errorIs(`unknown policy "lottery"`),
		},
		{
			name:  "set policy with a config it rejects",
			call:  call{method: "PUT", path: "/v1/policy", body: `{"name": "fifo", "config": {"no_such_key": "1"}}`, header: withToken},
			code:  400,
			check: errorIs("no_such_key"),
		},
		{
			name:  "set policy without name",
			call:  call{method: "PUT", path: "/v1/policy", body: `{}`, header: withToken},
			code:  400,
			check: errorIs("name is empty"),
		},
		{
			name:  "set policy, plugin fails",
			setup: func(b *apitest.Backend) { b.SetPolicyErr = errors.New("plugin exited") },
			call:  call{method: "PUT", path: "/v1/policy", body: `{"name": "elastic-fifo"}`, header: withToken},
			code:  500,
			check: errorIs("plugin exited"),
		},
		{
			name:  "set policy without token",
			call:  call{method: "PUT", path: "/v1/policy", body: `{"name": "fifo"}`},
			code:  403,
			check: errorIs("permission denied"),
		},
		{
			name: "list nodes",
			setup: func(b *apitest.Backend) {
				b.Start("resnet50-00000001", map[string]int{"node-1": 4}, "start")
			},
			call: call{method: "GET", path: "/v1/nodes"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				nodes := decodeAs[[]api.NodeInfo](t, raw)
				must.Len(t, 2, nodes)
				must.Eq(t, 8, nodes[0].GPUsTotal)
				must.Eq(t, 4, nodes[0].GPUsUsed)
				must.Eq(t, 4, nodes[0].GPUsFree)
				must.Eq(t, map[string]int{"resnet50-00000001": 4}, nodes[0].Jobs)
				must.Eq(t, 0, nodes[1].GPUsUsed)
			},
		},
		{
			name: "status",
			call: call{method: "GET", path: "/v1/status"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				st := decodeAs[api.Status](t, raw)
				must.Eq(t, "fifo", st.Policy.Name)
				must.Eq(t, "0.1.0-test", st.Version)
				must.Eq(t, "127.0.0.1:4680", st.Leader)
			},
		},
		{
			name: "openapi",
			call: call{method: "GET", path: "/v1/openapi.json"},
			code: 200,
			check: func(t *testing.T, raw []byte) {
				must.Eq(t, string(api.OpenAPI), string(raw))
			},
		},
		{
			name:  "backend fails",
			setup: func(b *apitest.Backend) { b.Err = errors.New("store closed") },
			call:  call{method: "GET", path: "/v1/jobs"},
			code:  500,
			check: errorIs("failed to list jobs: store closed"),
		},
		{
			name:  "backend unavailable",
			setup: func(b *apitest.Backend) { b.Err = fmt.Errorf("not the leader: %w", api.ErrUnavailable) },
			call:  call{method: "GET", path: "/v1/nodes"},
			code:  503,
			check: errorIs("not the leader"),
		},
		{
			name:  "wrong method",
			call:  call{method: "PATCH", path: "/v1/jobs"},
			code:  405,
			check: errorIs("allowed: GET, HEAD, POST"),
		},
		{
			name:  "unknown route",
			call:  call{method: "GET", path: "/v2/jobs"},
			code:  404,
			check: errorIs("no such route: GET /v2/jobs"),
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8), apitest.Node("node-2", "gpu-2", 8))
			srv := apitest.NewServer(t, b)
			_, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
			must.NoError(t, err)
			if tc.setup != nil {
				tc.setup(b)
			}
			if tc.call.header == nil && tc.call.method == http.MethodGet {
				tc.call.header = withRead
			}
			code, raw := do(t, srv, tc.call)
			must.Eq(t, tc.code, code, must.Sprintf("body %s", raw))
			tc.check(t, raw)
		})
	}
}

// Row 5 of issue 13: reads were open (GET /v1/jobs/{id} showed env
// secrets and webhook credentials to anyone). Now, for every route: no
// token gets only the public routes (status, the OpenAPI document); the
// read token reads and cannot write; the write token does both.
func TestServer_Tokens(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.NewBackend())
	public := 0
	for _, rt := range srv.API.Routes() {
		path := strings.ReplaceAll(rt.Pattern, "{id}", "nope")
		name := must.Sprintf("%s %s", rt.Method, path)
		none, _ := do(t, srv, call{method: rt.Method, path: path})
		read, _ := do(t, srv, call{method: rt.Method, path: path, header: withRead})
		bearerRead, _ := do(t, srv, call{method: rt.Method, path: path, header: map[string]string{"Authorization": "Bearer " + apitest.ReadToken}})
		write, _ := do(t, srv, call{method: rt.Method, path: path, header: withToken})
		must.Eq(t, read, bearerRead, name)
		switch {
		case rt.Public:
			public++
			must.Eq(t, http.MethodGet, rt.Method, name)
			must.NotEq(t, http.StatusForbidden, none, name)
		case rt.Write:
			must.Eq(t, http.StatusForbidden, none, name)
			must.Eq(t, http.StatusForbidden, read, name)
			must.NotEq(t, http.StatusForbidden, write, name)
			must.True(t, rt.Method != http.MethodGet)
		default:
			must.Eq(t, http.MethodGet, rt.Method, name)
			must.Eq(t, http.StatusForbidden, none, name)
			must.NotEq(t, http.StatusForbidden, read, name)
			must.NotEq(t, http.StatusForbidden, write, name)
		}
	}
	must.Eq(t, 2, public)
	_, raw := do(t, srv, call{method: "GET", path: "/v1/jobs/x"})
	must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, "reads need a valid token, the read token or the write token")
	code, _ := do(t, srv, call{method: "GET", path: "/v1/jobs", header: map[string]string{api.TokenHeader: apitest.ReadToken + "x"}})
	must.Eq(t, http.StatusForbidden, code)
}

// The read token must be a token of its own.
func TestNewServer_ReadTokenIsNotTheToken(t *testing.T) {
	_, err := api.NewServer(api.Config{Backend: apitest.NewBackend(), Token: "t", ReadToken: "t"})
	must.ErrorContains(t, err, "the read token is the write token")
}

// Row 5 of issue 13: the API answered any Host header, so a web page whose
// DNS name an attacker points at 127.0.0.1 (DNS rebinding) could read it
// from a browser on the planner's machine. Now it answers localhost, IP
// addresses and the names it is configured with, and refuses others,
// token or not.
func TestServer_HostHeader(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend()
	for _, tc := range []struct {
		name    string
		allowed []string
		host    string
		ok      bool
	}{
		{"loopback address", nil, "127.0.0.1:4680", true},
		{"IPv6 loopback", nil, "[::1]:4680", true},
		{"another address", nil, "10.0.0.5:4680", true},
		{"localhost", nil, "localhost:4680", true},
		{"a .localhost name", nil, "planner.localhost", true},
		{"a rebound name", nil, "evil.example:4680", false},
		{"a rebound name, case", nil, "EVIL.example", false},
		{"a name ending in localhost", nil, "evillocalhost:4680", false},
		{"a configured name", []string{"planner.example"}, "Planner.Example.:4680", true},
		{"a configured name's lookalike", []string{"planner.example"}, "planner.example.evil:4680", false},
		{"any, when configured", []string{"*"}, "whatever.example", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := api.NewServer(api.Config{Backend: b, Token: "t", AllowedHosts: tc.allowed})
			must.NoError(t, err)
			for _, path := range []string{"/v1/jobs", "/v1/status", "/nope"} {
				req := httptest.NewRequest("GET", path, nil)
				req.Host = tc.host
				req.Header.Set(api.TokenHeader, "t")
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req)
				if tc.ok {
					must.NotEq(t, http.StatusForbidden, rec.Code, must.Sprint(path))
					continue
				}
				must.Eq(t, http.StatusForbidden, rec.Code, must.Sprint(path))
				must.StrContains(t, rec.Body.String(), "does not answer to host")
				must.StrContains(t, rec.Body.String(), "allowed_hosts")
			}
		})
	}
}

// A server without a token takes no writes at all, not even ones with an
// empty token.
func TestServer_NoTokenRefusesWrites(t *testing.T) {
	t.Parallel()
	s, err := api.NewServer(api.Config{Backend: apitest.NewBackend()})
	must.NoError(t, err)
	for _, h := range []map[string]string{nil, {api.TokenHeader: ""}, {"Authorization": "Bearer "}} {
		req, _ := http.NewRequest("PUT", "/v1/policy", strings.NewReader(`{"name":"fifo"}`))
		for k, v := range h {
			req.Header.Set(k, v)
		}
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		must.Eq(t, http.StatusForbidden, rec.Code)
		must.StrContains(t, rec.Body.String(), "no token configured")
	}
}

func TestNewServer_NeedsBackend(t *testing.T) {
	_, err := api.NewServer(api.Config{})
	must.ErrorContains(t, err, "no backend")
}

func mustSpec(t *testing.T) *jobspec.Spec {
	t.Helper()
	spec, diags := jobspec.Parse([]byte(goodSpec), "train.hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	return spec
}

// A submission answers 201 with the job's URL.
func TestServer_SubmitLocation(t *testing.T) {
	t.Parallel()
	srv := apitest.NewServer(t, apitest.NewBackend())
	code, h, raw := doHeader(t, srv, call{method: "POST", path: "/v1/jobs", body: submitBody(goodSpec, "train.hcl"), header: withToken})
	must.Eq(t, http.StatusCreated, code)
	must.Eq(t, "/v1/jobs/resnet50-00000001", h.Get("Location"))
	code, raw2 := do(t, srv, call{method: "GET", path: h.Get("Location"), header: withRead})
	must.Eq(t, http.StatusOK, code)
	must.Eq(t, decodeAs[structs.Job](t, raw).ID, decodeAs[structs.Job](t, raw2).ID)
}

// A read of a running job counts its GPU time up to the read: a job on
// the GPUs it started with 50 s ago has 50 GPU-seconds per GPU, not the
// 0 its record holds until its GPUs change or it ends (issue 28).
func TestServer_JobAttainedUpToTheRead(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	started := time.Now().Add(-50 * time.Second)
	b.Now = func() time.Time { return started }
	srv := apitest.NewServer(t, b)
	j, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
	must.NoError(t, err)
	b.Start(j.ID, map[string]int{"node-1": 2}, "enough free GPUs")
	code, raw := do(t, srv, call{method: "GET", path: "/v1/jobs/" + j.ID, header: withRead})
	must.Eq(t, http.StatusOK, code)
	must.Between(t, 100.0, decodeAs[structs.Job](t, raw).AttainedGPUSeconds, 110.0)

	// An ended job's figure is its record's: it holds no GPUs.
	b.Update(j.ID, func(j *structs.Job) { j.AttainedGPUSeconds = 96 })
	b.Finish(j.ID, structs.JobComplete, "done")
	_, raw = do(t, srv, call{method: "GET", path: "/v1/jobs/" + j.ID, header: withRead})
	must.Eq(t, 96.0, decodeAs[structs.Job](t, raw).AttainedGPUSeconds)
}

// POST /v1/jobs/{id}/progress: a batch of reports with the planner's token
// or the job's own report token (for that job only), 204; bad reports 400;
// an unknown job 404; a metric that is not the target's is kept, with one
// warning event.
func TestServer_Progress(t *testing.T) {
	t.Parallel()
	const targetSpec = "training \"resnet50\" {\n  command = \"python3\"\n  gpus = 4\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n  }\n}\n"
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	// The planner's clock, a minute before the report that gives its time.
	b.Now = func() time.Time { return time.Date(2026, 11, 22, 9, 59, 0, 0, time.UTC) }
	srv := apitest.NewServer(t, b)
	spec, diags := jobspec.Parse([]byte(targetSpec), "train.hcl", time.Now())
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	job, _, err := b.Submit(context.Background(), spec, targetSpec, nil)
	must.NoError(t, err)
	other, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
	must.NoError(t, err)
	path := "/v1/jobs/" + job.ID + "/progress"
	jobToken := map[string]string{api.TokenHeader: structs.ReportToken(apitest.Token, job.ID)}

	for _, tc := range []struct {
		name   string
		path   string
		body   string
		header map[string]string
		code   int
		errSub string
	}{
		{name: "planner token", body: `[{"step": 1, "samples_per_sec": 100, "loss": 2.5}]`, header: withToken, code: 204},
		{name: "job token", body: `[{"time": "2026-11-22T10:00:00Z", "step": 2, "metric": {"name": "top5", "value": 0.4}, "world_size": 2},
			{"step": 3, "metric": {"name": "top5", "value": 0.5}, "checkpoint": "/ckpt/3.pt"}]`, header: jobToken, code: 204},
		{name: "job token as bearer", body: `[{"step": 4}]`, header: map[string]string{"Authorization": "Bearer " + jobToken[api.TokenHeader]}, code: 204},
		{name: "job token of another job", path: "/v1/jobs/" + other.ID + "/progress", body: `[{"step": 1}]`, header: jobToken, code: 403, errSub: "permission denied"},
		{name: "no token", body: `[{"step": 1}]`, code: 403, errSub: "permission denied"},
		{name: "wrong token", body: `[{"step": 1}]`, header: wrongToken, code: 403, errSub: "permission denied"},
		{name: "unknown job", path: "/v1/jobs/nope/progress", body: `[{"step": 1}]`, header: withToken, code: 404, errSub: "not found"},
		{name: "negative step", body: `[{"step": 5}, {"step": -1}]`, header: jobToken, code: 400, errSub: "progress report 1: negative step -1"},
		{name: "negative throughput", body: `[{"step": 5, "samples_per_sec": -2}]`, header: jobToken, code: 400, errSub: "samples_per_sec"},
		{name: "unnamed metric", body: `[{"step": 5, "metric": {"value": 1}}]`, header: jobToken, code: 400, errSub: "metric without a name"},
		{name: "unknown field", body: `[{"step": 5, "acc": 1}]`, header: jobToken, code: 400, errSub: "unknown field"},
		{name: "empty batch", body: `[]`, header: jobToken, code: 400, errSub: "no progress reports"},
		{name: "an object, not an array", body: `{"step": 5}`, header: jobToken, code: 400, errSub: "invalid request body"},
		{name: "negative batch", body: `[{"step": 5, "batch_size": -1}]`, header: jobToken, code: 400, errSub: "batch_size must be from 1 to 16777216"},
		{name: "batch too large", body: `[{"step": 5, "batch_size": 16777217}]`, header: jobToken, code: 400, errSub: "batch_size"},
		{name: "negative noise scale", body: `[{"step": 5, "noise_scale": -3}]`, header: jobToken, code: 400, errSub: "noise_scale must be a finite number"},
		{name: "noise scale too large", body: `[{"step": 5, "noise_scale": 1e13}]`, header: jobToken, code: 400, errSub: "noise_scale"},
	} {
		p := path
		if tc.path != "" {
			p = tc.path
		}
		code, raw := do(t, srv, call{method: "POST", path: p, body: tc.body, header: tc.header})
		must.Eq(t, tc.code, code, must.Sprintf("%s: body %s", tc.name, raw))
		if tc.errSub != "" {
			errorIs(tc.errSub)(t, raw)
		}
	}
	// The job token is no token for anything else.
	code, _ := do(t, srv, call{method: "POST", path: "/v1/jobs/" + job.ID + "/stop", header: jobToken})
	must.Eq(t, http.StatusForbidden, code)

	// Nor for reads.
	code, _ = do(t, srv, call{method: "GET", path: "/v1/jobs/" + job.ID, header: jobToken})
	must.Eq(t, http.StatusForbidden, code)

	code, raw := do(t, srv, call{method: "GET", path: "/v1/jobs/" + job.ID, header: withRead})
	must.Eq(t, http.StatusOK, code)
	got := decodeAs[structs.Job](t, raw)
	pr := got.Progress
	must.NotNil(t, pr)
	must.Eq(t, int64(4), pr.Step)
	must.Eq(t, int64(4), pr.Reports, must.Sprint("the refused batches recorded nothing"))
	must.Eq(t, 100.0, *pr.SamplesPerSec)
	must.Eq(t, 2.5, *pr.Loss)
	must.Eq(t, structs.Metric{Name: "top5", Value: 0.5}, *pr.Metric)
	must.Eq(t, map[string]float64{"top5": 0.5}, pr.Metrics)
	must.Eq(t, 2, pr.WorldSize)
	must.Eq(t, "/ckpt/3.pt", pr.Checkpoint)
	must.Len(t, 4, pr.History)
	must.Eq(t, time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC), pr.History[1].Time.UTC())
	must.False(t, pr.History[0].Time.IsZero(), must.Sprint("a report without a time gets the arrival time"))
	var warnings []string
	for _, e := range got.Events {
		if e.Type == structs.EventWarning {
			warnings = append(warnings, e.Message)
		}
	}
	must.Eq(t, []string{`target metric "accuracy" was never reported; got "top5"`}, warnings)
	// The job's stub and the other job are untouched.
	code, raw = do(t, srv, call{method: "GET", path: "/v1/jobs/" + other.ID, header: withRead})
	must.Eq(t, http.StatusOK, code)
	must.Nil(t, decodeAs[structs.Job](t, raw).Progress)
}

// With batch advice for the job, the reply to its reports is 200 with the
// advice (what the SDK trains at next); without, 204.
func TestServer_ProgressReplyAdvisesBatch(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	srv := apitest.NewServer(t, b)
	job, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
	must.NoError(t, err)
	path := "/v1/jobs/" + job.ID + "/progress"
	jobToken := map[string]string{api.TokenHeader: structs.ReportToken(apitest.Token, job.ID)}
	body := `[{"step": 1, "samples_per_sec": 100, "world_size": 4, "batch_size": 256, "noise_scale": 900}]`

	code, raw := do(t, srv, call{method: "POST", path: path, body: body, header: jobToken})
	must.Eq(t, http.StatusNoContent, code, must.Sprint(string(raw)))

	advice := structs.BatchAdvice{Size: 1024, PerGPU: 128, Accumulation: 2, GPUs: 4, Efficiency: 0.6, NoiseScale: 900, GoodputGain: 1.4}
	b.Update(job.ID, func(j *structs.Job) { j.Batch = &advice })
	code, raw = do(t, srv, call{method: "POST", path: path, body: body, header: jobToken})
	must.Eq(t, http.StatusOK, code, must.Sprint(string(raw)))
	must.Eq(t, api.ProgressReply{Batch: &advice}, decodeAs[api.ProgressReply](t, raw))

	code, raw = do(t, srv, call{method: "GET", path: "/v1/jobs/" + job.ID, header: withRead})
	must.Eq(t, http.StatusOK, code)
	got := decodeAs[structs.Job](t, raw)
	must.Eq(t, 256, got.Progress.BatchSize)
	must.Eq(t, 900.0, got.Progress.NoiseScale)
	must.Eq(t, &advice, got.Batch)
}

// Issue 27: GET /v1/jobs/{id}/resume answers the newest checkpoint the
// planner holds for the job under its checkpoint_dirs, or an empty one,
// to the planner's tokens and to the job's own report token (for that job
// only): what a worker that a launcher which lived starts again asks.
func TestServer_Resume(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	b.CheckpointDirs = []string{"/ckpt"}
	srv := apitest.NewServer(t, b)
	job, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
	must.NoError(t, err)
	other, _, err := b.Submit(context.Background(), mustSpec(t), goodSpec, nil)
	must.NoError(t, err)
	jobToken := map[string]string{api.TokenHeader: structs.ReportToken(apitest.Token, job.ID)}
	progress := func(checkpoint string, step int64) func(j *structs.Job) {
		return func(j *structs.Job) {
			j.Progress = &structs.Progress{Step: step + 3, Checkpoint: checkpoint, CheckpointStep: step}
		}
	}

	for _, tc := range []struct {
		name   string
		update func(j *structs.Job) // of job, before the call
		path   string
		header map[string]string
		code   int
		want   structs.Resume
		errSub string
	}{
		{name: "none reported", header: jobToken, code: 200},
		{name: "checkpoint under checkpoint_dirs", update: progress("/ckpt/"+job.ID+"/model-step00000040.pt", 40), header: jobToken, code: 200,
			want: structs.Resume{Checkpoint: "/ckpt/" + job.ID + "/model-step00000040.pt", Step: 40}},
		{name: "job token as bearer", header: map[string]string{"Authorization": "Bearer " + jobToken[api.TokenHeader]}, code: 200,
			want: structs.Resume{Checkpoint: "/ckpt/" + job.ID + "/model-step00000040.pt", Step: 40}},
		{name: "read token", header: withRead, code: 200,
			want: structs.Resume{Checkpoint: "/ckpt/" + job.ID + "/model-step00000040.pt", Step: 40}},
		{name: "planner token", header: withToken, code: 200,
			want: structs.Resume{Checkpoint: "/ckpt/" + job.ID + "/model-step00000040.pt", Step: 40}},
		{name: "checkpoint outside checkpoint_dirs", update: progress("/etc/"+job.ID+"/model-step00000050.pt", 50), header: jobToken, code: 200},
		{name: "path escaping checkpoint_dirs", update: progress("/ckpt/../etc/model.pt", 60), header: jobToken, code: 200},
		{name: "job token of another job", path: "/v1/jobs/" + other.ID + "/resume", header: jobToken, code: 403, errSub: "permission denied"},
		{name: "no token", code: 403, errSub: "permission denied"},
		{name: "wrong token", header: wrongToken, code: 403, errSub: "permission denied"},
		{name: "unknown job", path: "/v1/jobs/nope/resume", header: withToken, code: 404, errSub: "not found"},
		{name: "unknown job, its own token", path: "/v1/jobs/nope/resume",
			header: map[string]string{api.TokenHeader: structs.ReportToken(apitest.Token, "nope")}, code: 404, errSub: "not found"},
	} {
		if tc.update != nil {
			b.Update(job.ID, tc.update)
		}
		p := "/v1/jobs/" + job.ID + "/resume"
		if tc.path != "" {
			p = tc.path
		}
		code, raw := do(t, srv, call{method: "GET", path: p, header: tc.header})
		must.Eq(t, tc.code, code, must.Sprintf("%s: body %s", tc.name, raw))
		if tc.errSub != "" {
			errorIs(tc.errSub)(t, raw)
			continue
		}
		must.Eq(t, tc.want, decodeAs[structs.Resume](t, raw), must.Sprint(tc.name))
		must.StrContains(t, string(raw), `"checkpoint":`, must.Sprint(tc.name, ": the fields are there when empty"))
	}
	// The job token reads nothing else of the job.
	code, _ := do(t, srv, call{method: "GET", path: "/v1/jobs/" + job.ID, header: jobToken})
	must.Eq(t, http.StatusForbidden, code)
}
