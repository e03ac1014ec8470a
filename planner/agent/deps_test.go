package agent

import (
	"context"
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

	cfg := config.Default()
	cfg.DataDir = t.TempDir()
	cfg.Token, cfg.ReadToken = fuzzToken, fuzzReadToken
	cfg.Consul.Address = frozen.Addr()
	cfg.Nomad.Address = nomad.URL
	a, err := New(cfg, hclog.NewNullLogger())
	must.NoError(t, err)
	t.Cleanup(func() {
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
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
