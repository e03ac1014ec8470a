package agent

// Fuzz targets for every request body of the API, sent through the real
// server (httptest) to the real daemon backend, planner and embedded
// store; only the cluster is a fixed list of nodes (no Nomad). Each
// checks what users rely on: no answer is a 5xx, every refusal is a JSON
// error that says something, a job the API accepted can be read back
// (redacted), and a refused request changes nothing.

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

const (
	fuzzToken     = "fuzz-token"
	fuzzReadToken = "fuzz-read-token"
)

// fixedNodes is the cluster the fuzzed planner sees.
type fixedNodes []policy.Node

func (n fixedNodes) Nodes(context.Context) ([]policy.Node, error) { return slices.Clone(n), nil }

// newTestAgent is an agent on an embedded store in a temp dir, seeing two
// nodes of 8 GPUs; it is not running.
func newTestAgent(t testing.TB) *Agent {
	t.Helper()
	return newTestAgentIn(t, t.TempDir())
}

// newTestAgentIn is newTestAgent with its data (the store) in dir.
func newTestAgentIn(t testing.TB, dir string) *Agent {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = dir
	cfg.Token, cfg.ReadToken = fuzzToken, fuzzReadToken
	cfg.CheckpointDirs = []string{cfg.DataDir}
	if diags := cfg.Validate(); diags.HasErrors() {
		t.Fatal(diags.Error())
	}
	a, err := New(cfg, hclog.NewNullLogger())
	if err != nil {
		t.Fatal(err)
	}
	a.planner.Cluster = fixedNodes{
		{ID: "n1", Name: "gpu-1", GPUModel: "NVIDIA A100-SXM4-40GB", GPUMemoryMiB: 40960, GPUs: 8},
		{ID: "n2", Name: "gpu-2", GPUModel: "NVIDIA A100-SXM4-40GB", GPUMemoryMiB: 40960, GPUs: 8},
	}
	return a
}

// fuzzAPI is the daemon's API on an embedded store in a temp dir.
type fuzzAPI struct {
	t   testing.TB
	srv *httptest.Server
	a   *Agent
}

func newFuzzAPI(t testing.TB) *fuzzAPI {
	t.Helper()
	a := newTestAgent(t)
	a.setLeading(true, store.Fence{}) // stops and policy switches are the leader's
	srv := httptest.NewServer(a.server.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
	return &fuzzAPI{t: t, srv: srv, a: a}
}

// do sends a request with token and extra headers and returns the status
// and body; it fails the test on a 5xx, and on a refusal that is not a
// JSON error with a message.
func (f *fuzzAPI) do(method, path, token string, body []byte, header map[string]string) (int, []byte) {
	f.t.Helper()
	req, err := http.NewRequest(method, f.srv.URL+path, strings.NewReader(string(body)))
	if err != nil || strings.ContainsFunc(req.URL.RequestURI(), func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		// A path net/http cannot send, or sends as a broken request line
		// (a space or control byte in the query) that net/http's server
		// answers itself: nothing of ours to test.
		return 0, nil
	}
	req.Header.Set(api.TokenHeader, token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := f.srv.Client().Do(req)
	if err != nil {
		f.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		f.t.Fatalf("%s %s: reading the answer: %v", method, path, err)
	}
	if resp.StatusCode >= 500 {
		f.t.Fatalf("%s %s answered %d: %s\nbody sent: %q", method, path, resp.StatusCode, raw, body)
	}
	if resp.StatusCode >= 400 {
		var e api.ErrorResponse
		if err := json.Unmarshal(raw, &e); err != nil || e.Error == "" {
			f.t.Fatalf("%s %s answered %d without a JSON error: %q", method, path, resp.StatusCode, raw)
		}
	}
	return resp.StatusCode, raw
}

// job reads a job back with the read token.
func (f *fuzzAPI) job(id string) *structs.Job {
	f.t.Helper()
	code, raw := f.do(http.MethodGet, "/v1/jobs/"+id, fuzzReadToken, nil, nil)
	if code != http.StatusOK {
		f.t.Fatalf("job %s cannot be read back: %d %s", id, code, raw)
	}
	var j structs.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		f.t.Fatalf("job %s: %v", id, err)
	}
	return &j
}

// submitted posts a submission and, when it is accepted, checks that the
// job reads back, with every env value redacted; it returns the job (nil
// when refused).
func (f *fuzzAPI) submitted(body []byte, header map[string]string) *structs.Job {
	f.t.Helper()
	code, raw := f.do(http.MethodPost, "/v1/jobs", fuzzToken, body, header)
	if code != http.StatusCreated {
		return nil
	}
	var j structs.Job
	if err := json.Unmarshal(raw, &j); err != nil || j.ID == "" {
		f.t.Fatalf("201 without a job: %q", raw)
	}
	got := f.job(j.ID)
	if got.ID != j.ID || got.Spec.Name != j.Spec.Name {
		f.t.Fatalf("read back %+v, submitted %+v", got, j)
	}
	for k, v := range got.Spec.Env {
		if v != api.Redacted {
			f.t.Fatalf("env %s shown as %q", k, v)
		}
	}
	return &j
}

// exampleSources are the repo's jobspecs, the fuzzers' seeds.
func exampleSources(f *testing.F) []string {
	f.Helper()
	paths, _ := filepath.Glob("../../jobspecs/examples/*.hcl")
	var out []string
	for _, p := range paths {
		if strings.HasSuffix(p, ".nomad.hcl") {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, string(b))
	}
	return append(out,
		"training \"resnet50\" {\n  command = \"python3\"\n  gpus = 4\n  env = { K = \"v\" }\n}\n",
		"training \"t\" {\n  command = \"python3\"\n  gpus {\n    min = 1\n    max = 4\n  }\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    tier1 = 0.5\n    deadline = \"1h\"\n  }\n}\n",
		"training \"a\" {\n  command = \"x\"\n  gpus = \"auto\"\n  artifact {\n    source = \"https://example.com/d.tgz\"\n  }\n}\n",
	)
}

// POST /v1/jobs, the body as raw bytes (seeded with the examples as
// valid bodies), with or without an idempotency key: an accepted job reads
// back with its ID, its spec's name and every env value redacted, and a
// replay of the same request returns the same job.
func FuzzSubmitJob(f *testing.F) {
	for _, src := range exampleSources(f) {
		body, _ := json.Marshal(api.SubmitRequest{Source: src, Filename: "/home/alice/train.hcl"})
		f.Add(body, "")
		f.Add(body, "retry-1")
	}
	f.Add([]byte(`{"source": ""}`), "")
	f.Add([]byte(`{"source": "training \"x\" {", "filename": "a\nb"}`), "k")
	f.Add([]byte(`[]`), "")
	fa := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, body []byte, key string) {
		fa.t = t
		if strings.ContainsFunc(key, func(r rune) bool { return r < 0x20 && r != '\t' || r == 0x7f }) {
			return // a control character: no client sends it
		}
		header := map[string]string{}
		if key != "" {
			header["Idempotency-Key"] = key
		}
		j := fa.submitted(body, header)
		if j == nil || key == "" {
			return
		}
		code, raw := fa.do(http.MethodPost, "/v1/jobs", fuzzToken, body, header)
		var again structs.Job
		if code != http.StatusCreated || json.Unmarshal(raw, &again) != nil || again.ID != j.ID {
			t.Fatalf("a replay with key %q answered %d %q, not job %s", key, code, raw, j.ID)
		}
	})
}

// POST /v1/jobs with the jobspec itself mutated (FuzzSubmitJob's raw
// bodies seldom get past the JSON): the same properties.
func FuzzSubmitJobspec(f *testing.F) {
	for _, src := range exampleSources(f) {
		f.Add(src, "train.hcl")
	}
	fa := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, source, filename string) {
		fa.t = t
		body, err := json.Marshal(api.SubmitRequest{Source: source, Filename: filename})
		if err != nil {
			return
		}
		fa.submitted(body, nil)
	})
}

// POST /v1/jobs/{id}/progress on a job with a target: a batch taken (204)
// is counted in the job's progress; a batch refused changes nothing.
func FuzzReportProgress(f *testing.F) {
	for _, s := range []string{
		`[{"step": 10, "samples_per_sec": 512.5, "loss": 0.4, "metric": {"name": "accuracy", "value": 0.91}, "world_size": 4, "checkpoint": "/tmp/m.pt"}]`,
		`[{"step": 1}, {"step": 2, "time": "2026-11-22T10:00:00Z"}]`,
		`[{"step": -1}]`,
		`[{"step": 1, "metric": {"name": "", "value": 1}}]`,
		`{"step": 1}`,
		`[]`,
	} {
		f.Add([]byte(s))
	}
	fa := newFuzzAPI(f)
	src, _ := json.Marshal(api.SubmitRequest{Source: "training \"p\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.95\n    tier1 = 0.5\n  }\n}\n"})
	code, raw := fa.do(http.MethodPost, "/v1/jobs", fuzzToken, src, nil)
	if code != http.StatusCreated {
		f.Fatalf("submit: %d %s", code, raw)
	}
	var j structs.Job
	if err := json.Unmarshal(raw, &j); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fa.t = t
		before := reports(fa.job(j.ID))
		code, _ := fa.do(http.MethodPost, "/v1/jobs/"+j.ID+"/progress", structs.ReportToken(fuzzToken, j.ID), body, nil)
		after := reports(fa.job(j.ID))
		switch {
		case code == http.StatusNoContent && after <= before:
			t.Fatalf("a batch taken, but the job's reports went from %d to %d", before, after)
		case code != http.StatusNoContent && after != before:
			t.Fatalf("a batch refused (%d), but the job's reports went from %d to %d", code, before, after)
		}
	})
}

func reports(j *structs.Job) int64 {
	if j.Progress == nil {
		return 0
	}
	return j.Progress.Reports
}

// PUT /v1/policy: a switch taken (200) is the active policy in the
// status; one refused leaves the active policy as it was.
func FuzzSetPolicy(f *testing.F) {
	for _, s := range []string{
		`{"name": "fifo"}`,
		`{"name": "elastic-fifo", "config": {"resize_cooldown": "30s"}}`,
		`{"name": "qoe", "config": {"headroom": "0.1"}}`,
		`{"name": "goodput", "config": {"stickiness": "NaN"}}`,
		`{"name": "no-such-policy"}`,
		`{"name": ""}`,
	} {
		f.Add([]byte(s))
	}
	fa := newFuzzAPI(f)
	active := func(t *testing.T) string {
		code, raw := fa.do(http.MethodGet, "/v1/status", "", nil, nil)
		var st api.Status
		if code != http.StatusOK || json.Unmarshal(raw, &st) != nil {
			t.Fatalf("status: %d %s", code, raw)
		}
		return st.Policy.Name
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fa.t = t
		before := active(t)
		code, raw := fa.do(http.MethodPut, "/v1/policy", fuzzToken, body, nil)
		after := active(t)
		if code == http.StatusOK {
			var st structs.PolicyState
			if err := json.Unmarshal(raw, &st); err != nil || st.Name != after {
				t.Fatalf("switched to %q (%v), but %q is active", st.Name, err, after)
			}
			return
		}
		if after != before {
			t.Fatalf("a switch refused (%d), but the policy went from %q to %q", code, before, after)
		}
	})
}

// Every route with an arbitrary job ID in its path, with no token, the
// read token and the token: no 5xx, and no read or write without the
// token the route needs.
func FuzzJobPaths(f *testing.F) {
	for _, s := range []string{"resnet50-3f2a9c1b", "", "..", "a/b", "%2F", "x%00y", strings.Repeat("j", 300)} {
		f.Add(s)
	}
	fa := newFuzzAPI(f)
	f.Fuzz(func(t *testing.T, id string) {
		fa.t = t
		for _, rt := range []struct{ method, suffix string }{
			{http.MethodGet, ""}, {http.MethodPost, "/stop"}, {http.MethodDelete, ""}, {http.MethodPost, "/progress"},
		} {
			path := "/v1/jobs/" + id + rt.suffix
			if code, _ := fa.do(rt.method, path, "", []byte(`[{"step": 1}]`), nil); code == http.StatusOK || code == http.StatusNoContent {
				t.Fatalf("%s %s without a token answered %d", rt.method, path, code)
			}
			if rt.method != http.MethodGet {
				if code, _ := fa.do(rt.method, path, fuzzReadToken, []byte(`[{"step": 1}]`), nil); code == http.StatusOK || code == http.StatusNoContent {
					t.Fatalf("%s %s with the read token answered %d", rt.method, path, code)
				}
			}
			fa.do(rt.method, path, fuzzToken, []byte(`[{"step": 1}]`), nil)
		}
	})
}
