package api_test

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/apitest"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// N9: the open GET /v1/status showed the active policy's configuration.
// Without a token it now answers what a health check needs (the leader,
// whether this planner leads, the version) and the policy's name; the
// policy's config, last error and time of change take the read token (or
// the token).
func TestN9_OpenStatusShowsNoPolicyConfig(t *testing.T) {
	t.Parallel()
	b := apitest.NewBackend(apitest.Node("node-1", "gpu-1", 8))
	srv := apitest.NewServer(t, b)
	_, err := b.SetPolicy(context.Background(), "elastic-fifo", map[string]string{"resize_cooldown": "90s"})
	must.NoError(t, err)

	code, raw := do(t, srv, call{method: "GET", path: "/v1/status"})
	must.Eq(t, 200, code)
	must.StrNotContains(t, string(raw), "resize_cooldown")
	must.Eq(t, api.Status{Leader: "127.0.0.1:4680", IsLeader: true, Version: "0.1.0-test", Policy: structs.PolicyState{Name: "elastic-fifo"}},
		decodeAs[api.Status](t, raw))
	_, raw = do(t, srv, call{method: "GET", path: "/v1/status", header: wrongToken})
	must.StrNotContains(t, string(raw), "resize_cooldown", must.Sprint("a wrong token is no token"))
	for _, h := range []map[string]string{withRead, withToken, withBearer} {
		code, raw := do(t, srv, call{method: "GET", path: "/v1/status", header: h})
		must.Eq(t, 200, code)
		st := decodeAs[api.Status](t, raw)
		must.Eq(t, map[string]string{"resize_cooldown": "90s"}, st.Policy.Config)
		must.False(t, st.Policy.Changed.IsZero())
	}
}
