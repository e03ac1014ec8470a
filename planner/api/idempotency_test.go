package api_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func withKey(key string) map[string]string {
	return map[string]string{api.TokenHeader: apitest.Token, api.IdempotencyHeader: key}
}

// Row 14 of issue 13: a retried submission made a second job. With an
// Idempotency-Key the retry gets the first job (201, Idempotent-Replayed);
// the key with another body is a 422 that says so; a bad key is a 400;
// no key, two jobs as before.
func TestServer_Idempotency(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend()
	srv := apitest.NewServer(t, b)
	body := submitBody(goodSpec, "train.hcl")

	code, h, raw := doHeader(t, srv, call{method: "POST", path: "/v1/jobs", body: body, header: withKey("0b9f6c7e-retry")})
	must.Eq(t, http.StatusCreated, code, must.Sprintf("body %s", raw))
	first := decodeAs[structs.Job](t, raw)
	must.Eq(t, "", h.Get("Idempotent-Replayed"))
	must.Eq(t, "0b9f6c7e-retry", first.Idempotency.Key)

	code, h, raw = doHeader(t, srv, call{method: "POST", path: "/v1/jobs", body: body, header: withKey("0b9f6c7e-retry")})
	must.Eq(t, http.StatusCreated, code)
	must.Eq(t, first.ID, decodeAs[structs.Job](t, raw).ID)
	must.Eq(t, "true", h.Get("Idempotent-Replayed"))
	must.Eq(t, "/v1/jobs/"+first.ID, h.Get("Location"))

	for _, other := range []string{submitBody(strings.Replace(goodSpec, "gpus = 4", "gpus = 2", 1), "train.hcl"), submitBody(goodSpec, "other.hcl")} {
		code, raw = do(t, srv, call{method: "POST", path: "/v1/jobs", body: other, header: withKey("0b9f6c7e-retry")})
		must.Eq(t, http.StatusUnprocessableEntity, code)
		msg := decodeAs[api.ErrorResponse](t, raw).Error
		must.StrContains(t, msg, `Idempotency-Key "0b9f6c7e-retry" was used for job `+first.ID)
		must.StrContains(t, msg, "use a new key for a new job")
	}

	for _, bad := range []string{strings.Repeat("k", api.MaxIdempotencyKeyLen+1), "has space", "new\u00e9"} {
		code, raw = do(t, srv, call{method: "POST", path: "/v1/jobs", body: body, header: withKey(bad)})
		must.Eq(t, http.StatusBadRequest, code, must.Sprint(bad))
		must.StrContains(t, decodeAs[api.ErrorResponse](t, raw).Error, "invalid Idempotency-Key")
	}

	for range 2 {
		code, _ = do(t, srv, call{method: "POST", path: "/v1/jobs", body: body, header: withToken})
		must.Eq(t, http.StatusCreated, code)
	}
	code, raw = do(t, srv, call{method: "GET", path: "/v1/jobs", header: withRead})
	must.Eq(t, http.StatusOK, code)
	must.Len(t, 3, decodeAs[[]api.JobStub](t, raw))
}
