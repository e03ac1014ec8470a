//go:build e2e

package e2e

import (
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 13 rows 5, 6 and 14 against the real planner process and CLI:
// reads need a token (the read token reads and cannot write), records show
// no env secret (job status -verbose neither), the API refuses a Host
// header it does not know, a job webhook to a host not allowed is refused
// at submission, and a submission retried with its Idempotency-Key makes
// one job.
func TestPlanner_ReadAccess(t *testing.T) {
	l, _, _ := gpuLab(t)
	dir := t.TempDir()
	p := startPlanner(t, l, filepath.Join(dir, "data"), `
policy {
  name = "fifo"
}
`)
	spec := filepath.Join(dir, "leaky.hcl")
	must.NoError(t, writeFile(spec, "training \"leaky\" {\n  command = \"python3\"\n  gpus    = 1\n  env = {\n    WANDB_API_KEY = \"wandb-s3cret\"\n  }\n}\n"))
	id := p.submit(spec)

	get := func(path, token, host string) (int, string) {
		t.Helper()
		req, err := http.NewRequest(http.MethodGet, p.addr+path, nil)
		must.NoError(t, err)
		if token != "" {
			req.Header.Set(api.TokenHeader, token)
		}
		if host != "" {
			req.Host = host
		}
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		must.NoError(t, err)
		return resp.StatusCode, string(b)
	}
	code, body := get("/v1/jobs/"+id, "", "")
	must.Eq(t, http.StatusForbidden, code, must.Sprint(body))
	must.StrNotContains(t, body, "s3cret")
	code, _ = get("/v1/jobs", "", "")
	must.Eq(t, http.StatusForbidden, code)
	code, _ = get("/v1/status", "", "")
	must.Eq(t, http.StatusOK, code, must.Sprint("the status stays open, for health checks"))
	for _, token := range []string{plannerReadToken, plannerToken} {
		code, body = get("/v1/jobs/"+id, token, "")
		must.Eq(t, http.StatusOK, code)
		must.StrNotContains(t, body, "s3cret")
		var j structs.Job
		must.NoError(t, json.Unmarshal([]byte(body), &j))
		must.Eq(t, map[string]string{"WANDB_API_KEY": api.Redacted}, j.Spec.Env)
	}
	code, body = get("/v1/jobs/"+id, plannerToken, "rebound.example:4680")
	must.Eq(t, http.StatusForbidden, code)
	must.StrContains(t, body, `does not answer to host \"rebound.example\"`)

	// A read-only user: status works, writes do not.
	out, code := p.cliAs(plannerReadToken, "job", "status", "-verbose", id)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, `WANDB_API_KEY = "<redacted>"`)
	must.StrNotContains(t, out, "s3cret")
	out, code = p.cliAs(plannerReadToken, "job", "stop", id)
	must.NotEq(t, 0, code)
	must.StrContains(t, out, "permission denied")
	out, code = p.cliAs("", "job", "list")
	must.NotEq(t, 0, code)
	must.StrContains(t, out, "reads need a valid token")

	// A job webhook to a host the config does not allow (none by default).
	hook := filepath.Join(dir, "hook.hcl")
	must.NoError(t, writeFile(hook, "training \"hook\" {\n  command = \"python3\"\n  gpus    = 1\n  target {\n    metric  = \"accuracy\"\n    goal    = 0.9\n    webhook = \"http://127.0.0.1:22/x\"\n  }\n}\n"))
	out, code = p.cli("job", "run", "-detach", hook)
	must.Eq(t, 2, code, must.Sprint(out))
	must.StrContains(t, out, "the planner's config allows no job webhooks")

	// The same submission twice with one Idempotency-Key: one job.
	post := func(key string) (int, string) {
		t.Helper()
		buf, err := json.Marshal(api.SubmitRequest{Source: "training \"once\" {\n  command = \"python3\"\n  gpus = 1\n}\n", Filename: "once.hcl"})
		must.NoError(t, err)
		req, err := http.NewRequest(http.MethodPost, p.addr+"/v1/jobs", strings.NewReader(string(buf)))
		must.NoError(t, err)
		req.Header.Set(api.TokenHeader, plannerToken)
		req.Header.Set(api.IdempotencyHeader, key)
		resp, err := http.DefaultClient.Do(req)
		must.NoError(t, err)
		defer resp.Body.Close()
		var j structs.Job
		must.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
		return resp.StatusCode, j.ID
	}
	c1, first := post("e2e-key-1")
	c2, again := post("e2e-key-1")
	must.Eq(t, http.StatusCreated, c1)
	must.Eq(t, http.StatusCreated, c2)
	must.Eq(t, first, again)
	must.Len(t, 2, p.jobs(), must.Sprint("leaky and once, nothing twice"))
}
