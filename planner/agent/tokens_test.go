package agent

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/nomadjob"
)

// A token Nomad or Consul refuses fails the start with an error naming the
// agent and the config key; an agent without ACLs (or without a token
// configured) is no error. The e2e TestACL_PlannerLeastPrivilege does the
// same against real agents.
func TestCheckTokens(t *testing.T) {
	answer := func(code int, body string) *httptest.Server {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(code)
			_, _ = w.Write([]byte(body))
		}))
		t.Cleanup(srv.Close)
		return srv
	}
	denied, disabled := answer(http.StatusForbidden, "Permission denied"), answer(http.StatusBadRequest, "ACL support disabled")
	cases := []struct {
		name                    string
		nomad, consul           *httptest.Server
		nomadToken, consulToken string
		want                    string
	}{
		{"nomad refuses", denied, disabled, "t", "t", "failed to authenticate to nomad"},
		{"consul refuses", disabled, denied, "t", "t", "failed to authenticate to consul"},
		{"no ACLs", disabled, disabled, "t", "t", ""},
		{"no tokens", denied, denied, "", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := &config.Config{Nomad: &config.Nomad{Address: c.nomad.URL, Token: c.nomadToken}, Consul: &config.Consul{Address: c.consul.Listener.Addr().String(), Token: c.consulToken}}
			nomad, err := nomadapi.NewClient(&nomadapi.Config{Address: c.nomad.URL, SecretID: c.nomadToken})
			must.NoError(t, err)
			consul, err := consulapi.NewClient(&consulapi.Config{Address: cfg.Consul.Address, Token: c.consulToken})
			must.NoError(t, err)
			a := &Agent{cfg: cfg, logger: hclog.NewNullLogger(), consul: consul, exec: &nomadjob.Nomad{Client: nomad}}
			err = a.checkTokens(context.Background())
			if c.want == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, ErrTokenRefused)
			must.ErrorContains(t, err, c.want)
		})
	}
}
