package agent

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
)

// The daemon's backend passes the store's and the planner's errors through
// unchanged, and the API answers each with its status: one set of errors
// from the store to the HTTP answer (issue 15).
func TestBackend_ErrorStatuses(t *testing.T) {
	f := newFuzzAPI(t)
	body, err := json.Marshal(api.SubmitRequest{Source: "training \"e\" {\n  command = \"x\"\n  gpus = 1\n}\n"})
	must.NoError(t, err)
	other, err := json.Marshal(api.SubmitRequest{Source: "training \"f\" {\n  command = \"y\"\n  gpus = 1\n}\n"})
	must.NoError(t, err)
	j := f.submitted(body, map[string]string{api.IdempotencyHeader: "key-1"})
	must.NotNil(t, j)

	for _, c := range []struct {
		name   string
		method string
		path   string
		body   []byte
		header map[string]string
		want   int
	}{
		{"unknown job", http.MethodGet, "/v1/jobs/nope-1a2b3c4d", nil, nil, http.StatusNotFound},
		{"invalid job ID", http.MethodGet, "/v1/jobs/a%2Fb", nil, nil, http.StatusNotFound},
		{"stop of an unknown job", http.MethodPost, "/v1/jobs/nope-1a2b3c4d/stop", nil, nil, http.StatusNotFound},
		{"progress of an unknown job", http.MethodPost, "/v1/jobs/nope-1a2b3c4d/progress", []byte(`[{"step":1}]`), nil, http.StatusNotFound},
		{"key reused with another jobspec", http.MethodPost, "/v1/jobs", other, map[string]string{api.IdempotencyHeader: "key-1"}, http.StatusUnprocessableEntity},
		{"stop", http.MethodPost, "/v1/jobs/" + j.ID + "/stop", nil, nil, http.StatusOK},
		{"stop of a stopped job", http.MethodPost, "/v1/jobs/" + j.ID + "/stop", nil, nil, http.StatusConflict},
		{"delete of a stopped job", http.MethodDelete, "/v1/jobs/" + j.ID, nil, nil, http.StatusConflict},
	} {
		t.Run(c.name, func(t *testing.T) {
			code, raw := f.do(c.method, c.path, fuzzToken, c.body, c.header)
			must.Eq(t, c.want, code, must.Sprintf("body %s", raw))
		})
	}
}
