package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
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
		{"resume point of an unknown job", http.MethodGet, "/v1/jobs/nope-1a2b3c4d/resume", nil, nil, http.StatusNotFound},
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

// Issue 27: GET /v1/jobs/{id}/resume answers, to the job's own report
// token, the planner's resume point for the job (Planner.ResumePoint):
// none before a checkpoint, the last one reported under checkpoint_dirs,
// none again once the last one reported lies elsewhere.
func TestBackend_Resume(t *testing.T) {
	f := newFuzzAPI(t)
	body, err := json.Marshal(api.SubmitRequest{Source: "training \"e\" {\n  command = \"x\"\n  gpus = 1\n}\n"})
	must.NoError(t, err)
	j := f.submitted(body, nil)
	must.NotNil(t, j)
	tok := structs.ReportToken(fuzzToken, j.ID)
	resume := func() structs.Resume {
		t.Helper()
		code, raw := f.do(http.MethodGet, "/v1/jobs/"+j.ID+"/resume", tok, nil, nil)
		must.Eq(t, http.StatusOK, code, must.Sprintf("body %s", raw))
		var r structs.Resume
		must.NoError(t, json.Unmarshal(raw, &r))
		return r
	}
	report := func(step int64, checkpoint string) {
		t.Helper()
		b, err := json.Marshal([]api.ProgressReport{{Step: step, Checkpoint: checkpoint}})
		must.NoError(t, err)
		code, raw := f.do(http.MethodPost, "/v1/jobs/"+j.ID+"/progress", tok, b, nil)
		must.Eq(t, http.StatusNoContent, code, must.Sprintf("body %s", raw))
	}

	must.Eq(t, structs.Resume{}, resume())
	ckpt := filepath.Join(f.a.planner.CheckpointDirs[0], j.ID, "model-step00000040.pt")
	report(40, ckpt)
	report(43, "")
	must.Eq(t, structs.Resume{Checkpoint: ckpt, Step: 40}, resume())
	report(50, "/elsewhere/model-step00000050.pt")
	must.Eq(t, structs.Resume{}, resume())

	code, _ := f.do(http.MethodGet, "/v1/jobs/"+j.ID+"/resume", structs.ReportToken(fuzzToken, "other-1a2b3c4d"), nil, nil)
	must.Eq(t, http.StatusForbidden, code)
}

// downStore is a store whose reads fail, as a Consul store cut off does.
type downStore struct{ store.Store }

func (downStore) GetJob(context.Context, string) (*structs.Job, error) {
	return nil, errors.New("Unexpected response code: 500 (No known Consul servers)")
}

func (downStore) ListJobs(context.Context) ([]*structs.Job, error) {
	return nil, errors.New("Unexpected response code: 500 (No known Consul servers)")
}

// A job's resume point answered from the record read last, while the store
// does not answer, says so (X-Schedulearn-Stale-As-Of): a worker's start
// may take it, but a script that keeps the checkpoint it names while it
// deletes the others must not (the SDK's planner_resume_point refuses it),
// as the store may hold a later one (chaos seed 57's partition: the
// record read last held step 40).
func TestBackend_ResumeIsTheStoresWord(t *testing.T) {
	f := newFuzzAPI(t)
	body, err := json.Marshal(api.SubmitRequest{Source: "training \"e\" {\n  command = \"x\"\n  gpus = 1\n}\n"})
	must.NoError(t, err)
	j := f.submitted(body, nil)
	must.NotNil(t, j)
	code, raw := f.do(http.MethodGet, "/v1/jobs", fuzzToken, nil, nil) // a list to answer from
	must.Eq(t, http.StatusOK, code, must.Sprintf("body %s", raw))

	f.a.store = downStore{f.a.store}
	code, raw = f.do(http.MethodGet, "/v1/jobs/"+j.ID, fuzzToken, nil, nil)
	must.Eq(t, http.StatusOK, code, must.Sprintf("the record read last: %s", raw))
	req, err := http.NewRequest(http.MethodGet, f.srv.URL+"/v1/jobs/"+j.ID+"/resume", nil)
	must.NoError(t, err)
	req.Header.Set(api.TokenHeader, structs.ReportToken(fuzzToken, j.ID))
	resp, err := f.srv.Client().Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	raw, err = io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.Eq(t, http.StatusOK, resp.StatusCode, must.Sprintf("body %s", raw))
	asOf, err := time.Parse(time.RFC3339Nano, resp.Header.Get(api.StaleAsOfHeader))
	must.NoError(t, err, must.Sprint("a resume point the store did not give is marked"))
	must.False(t, asOf.IsZero())
}
