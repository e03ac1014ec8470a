package api_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/jobspec"
)

func postJob(t *testing.T, s *api.Server, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "http://127.0.0.1/v1/jobs", strings.NewReader(body))
	req.Header.Set(api.TokenHeader, apitest.Token)
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, req)
	return rec
}

// Issue #13 row 3: a 300,000-deep args in POST /v1/jobs killed the planner
// (fatal stack overflow). It is a 400 naming the file, line and column.
func TestServer_Row3_DeepJobspecIs400(t *testing.T) {
	s, err := api.NewServer(api.Config{Backend: apitest.NewBackend(), Token: apitest.Token})
	must.NoError(t, err)
	for _, n := range []int{300_000, 100_000} {
		src := "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  args = " + strings.Repeat("[", n) + strings.Repeat("]", n) + "\n}\n"
		rec := postJob(t, s, submitBody(src, "deep.hcl"))
		must.Eq(t, http.StatusBadRequest, rec.Code, must.Sprint(rec.Body.String()[:min(300, rec.Body.Len())]))
		must.StrContains(t, rec.Body.String(), "deep.hcl:")
	}
}

// Issue #13 (parses at once): with every parse slot taken, a submission
// waits the gate's time and gets 503 with Retry-After; once a slot is
// free it is accepted.
func TestServer_ParseGateFullIs503(t *testing.T) {
	gate := jobspec.NewGate(1, 20*time.Millisecond)
	s, err := api.NewServer(api.Config{Backend: apitest.NewBackend(), Token: apitest.Token, Parses: gate})
	must.NoError(t, err)
	release, err := gate.Hold(context.Background())
	must.NoError(t, err)

	rec := postJob(t, s, submitBody(goodSpec, "train.hcl"))
	must.Eq(t, http.StatusServiceUnavailable, rec.Code)
	must.Eq(t, "1", rec.Header().Get("Retry-After"))
	must.StrContains(t, rec.Body.String(), "too many jobspecs are being parsed at once")

	release()
	rec = postJob(t, s, submitBody(goodSpec, "train.hcl"))
	must.Eq(t, http.StatusCreated, rec.Code, must.Sprint(rec.Body.String()))
}
