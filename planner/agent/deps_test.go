package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/depwatch"
)

// The agent watches the Consul and Nomad it is configured with: a frozen
// Consul gives one dependency-down event on the planner's stream and
// schedulearn_dependency_up{dependency="consul"} 0, while Nomad, which
// answers with a leader, stays up.
func TestAgent_WatchesConfiguredDependencies(t *testing.T) {
	frozen := fakeagent.Frozen(t)
	nomad := fakeagent.New(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, `"10.0.0.1:4647"`)
	}))

	a := newDepsAgent(t, frozen.Addr(), func(cfg *config.Config) { cfg.Nomad.Address = nomad.URL })
	a.watch.Timeout = 100 * time.Millisecond
	for range depwatch.DefaultThreshold {
		a.watch.Check(context.Background())
	}

	evs, _, _, _ := a.events.Since(0, 10)
	must.Len(t, 1, evs)
	must.Eq(t, depwatch.StreamDependencyDown, evs[0].Type)
	must.StrHasPrefix(t, "consul is down since", evs[0].Message)

	srv := httptest.NewServer(a.server.Handler)
	t.Cleanup(srv.Close)
	req, err := http.NewRequest(http.MethodGet, srv.URL+"/v1/metrics", nil)
	must.NoError(t, err)
	req.Header.Set(api.TokenHeader, fuzzReadToken)
	resp, err := srv.Client().Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.StrContains(t, string(body), `schedulearn_dependency_up{dependency="consul"} 0`)
	must.StrContains(t, string(body), `schedulearn_dependency_up{dependency="nomad"} 1`)
}

// On the Consul store, a planner whose Consul agent is frozen still
// answers GET /v1/status (the health check, the lab proxy's 1 s probe)
// within its bound, from what it holds: the chaos run saw it hang with
// the agent, and the proxy find no planner that answers.
func TestAgent_StatusAnswersWhileConsulIsFrozen(t *testing.T) {
	// Consul has no key (404) until the planner runs, then freezes.
	frozen := fakeagent.New(t, http.NotFoundHandler())
	a := newDepsAgent(t, frozen.Addr(), func(cfg *config.Config) { cfg.Store.Backend = config.StoreConsul })
	frozen.Set(fakeagent.Freeze)
	srv := httptest.NewServer(a.server.Handler)
	t.Cleanup(srv.Close)
	client := srv.Client()
	client.Timeout = 2 * time.Second
	start := time.Now()
	resp, err := client.Get(srv.URL + "/v1/status")
	must.NoError(t, err)
	defer resp.Body.Close()
	must.Eq(t, http.StatusOK, resp.StatusCode)
	must.Less(t, 1500*time.Millisecond, time.Since(start))
	var st api.Status
	must.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	must.False(t, st.IsLeader)
	must.Eq(t, "", st.Leader)
}

// newDepsAgent is an agent on Consul at consulAddr, its config changed by
// edit, closed when the test ends.
func newDepsAgent(t *testing.T, consulAddr string, edit func(*config.Config)) *Agent {
	t.Helper()
	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Token, cfg.ReadToken = fuzzToken, fuzzReadToken
	cfg.Consul.Address = consulAddr
	edit(cfg)
	a, err := New(cfg, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() {
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
	return a
}

// On the Consul store, a submission while the Consul agent is frozen is
// answered 503 within the agent's bound, saying which store did not
// answer and that the same Idempotency-Key may be sent again (the client
// does), rather than held until the client gives up: the chaos run's
// submissions timed out while node1's Consul was frozen.
func TestAgent_SubmitAnswersUnavailableWhileConsulIsFrozen(t *testing.T) {
	frozen := fakeagent.New(t, http.NotFoundHandler())
	a := newDepsAgent(t, frozen.Addr(), func(cfg *config.Config) { cfg.Store.Backend = config.StoreConsul })
	a.submitTimeout = 300 * time.Millisecond
	frozen.Set(fakeagent.Freeze)
	srv := httptest.NewServer(a.server.Handler)
	t.Cleanup(srv.Close)
	body, err := json.Marshal(api.SubmitRequest{Source: "training \"e\" {\n  command = \"x\"\n  gpus = 1\n}\n"})
	must.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/jobs", bytes.NewReader(body))
	must.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+fuzzToken)
	req.Header.Set(api.IdempotencyHeader, "key-1")
	client := srv.Client()
	client.Timeout = 5 * time.Second
	start := time.Now()
	resp, err := client.Do(req)
	must.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	must.NoError(t, err)
	must.Eq(t, http.StatusServiceUnavailable, resp.StatusCode, must.Sprintf("body %s", raw))
	must.Less(t, 2*time.Second, time.Since(start))
	must.StrContains(t, string(raw), "the consul store or the cluster did not answer within 300ms")
	must.StrContains(t, string(raw), "submitting it again with the same Idempotency-Key is safe")
}
