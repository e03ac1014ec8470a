package discover

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"syscall"
	"testing"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/shoenig/test/must"
)

// Consul lists the workers whose checks pass, and those whose checks have
// not passed (yet) whose agent answers a probe: a new worker joins as soon
// as its agent listens, not at its check's first run.
func TestConsul_ListsPassingAndAnsweringWorkers(t *testing.T) {
	entry := func(alloc, port int, status string) *consulapi.ServiceEntry {
		return &consulapi.ServiceEntry{
			Node:    &consulapi.Node{Address: "10.0.0.1"},
			Service: &consulapi.AgentService{Service: "w", Port: port, Meta: map[string]string{"alloc_id": []string{a1, a2, a3}[alloc]}},
			Checks:  consulapi.HealthChecks{{Status: status}},
		}
	}
	entries := []*consulapi.ServiceEntry{
		entry(0, 3001, consulapi.HealthPassing),
		entry(1, 3002, consulapi.HealthCritical), // its check has not run yet; the agent answers
		entry(2, 3003, consulapi.HealthCritical), // its agent is gone
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		must.Eq(t, "/v1/health/service/w", r.URL.Path)
		must.Eq(t, "", r.URL.Query().Get("passing"))
		_ = json.NewEncoder(w).Encode(entries)
	}))
	t.Cleanup(srv.Close)
	client, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String()})
	must.NoError(t, err)
	var mu sync.Mutex
	var probed []string
	c := &Consul{Client: client, Probe: func(_ context.Context, addr string) error {
		mu.Lock()
		defer mu.Unlock()
		probed = append(probed, addr)
		if addr == "10.0.0.1:3002" {
			return nil
		}
		return errors.New("connection refused")
	}}
	workers, err := c.Workers(context.Background(), "w")
	must.NoError(t, err)
	must.Eq(t, []Worker{{AllocID: a1, Address: "10.0.0.1:3001"}, {AllocID: a2, Address: "10.0.0.1:3002"}}, workers)
	must.SliceContainsAll(t, []string{"10.0.0.1:3002", "10.0.0.1:3003"}, probed, must.Sprint("only the workers whose checks do not pass are probed"))
}

// A passing worker on a node that failed since it was registered (a host
// back from a partition, whose agent has not synced yet) is probed: left
// out when nothing listens at its address (fenced while cut off), kept
// when its agent answers or is only slow. A passing worker on a node that
// never failed is not probed.
func TestConsul_PassingWorkerOnNodeBackFromFailure(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	cases := []struct {
		name   string
		failed bool // the node's serfHealth changed after the service's registration
		probe  error
		listed bool
		probed bool
	}{
		{"node never failed", false, refused, true, false},
		{"back, worker gone", true, refused, false, true},
		{"back, worker answers", true, nil, true, true},
		{"back, worker slow", true, context.DeadlineExceeded, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			serf := uint64(5)
			if tc.failed {
				serf = 20
			}
			entries := []*consulapi.ServiceEntry{{
				Node:    &consulapi.Node{Address: "10.0.0.1"},
				Service: &consulapi.AgentService{Service: "w", Port: 3001, Meta: map[string]string{"alloc_id": a1}, ModifyIndex: 10},
				Checks: consulapi.HealthChecks{
					{CheckID: "serfHealth", Status: consulapi.HealthPassing, ModifyIndex: serf},
					{CheckID: "service:w", ServiceID: "w", Status: consulapi.HealthPassing, ModifyIndex: 10},
				},
			}}
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_ = json.NewEncoder(w).Encode(entries)
			}))
			t.Cleanup(srv.Close)
			client, err := consulapi.NewClient(&consulapi.Config{Address: srv.Listener.Addr().String()})
			must.NoError(t, err)
			probed := false
			c := &Consul{Client: client, Probe: func(context.Context, string) error {
				probed = true
				return tc.probe
			}}
			workers, err := c.Workers(context.Background(), "w")
			must.NoError(t, err)
			must.Eq(t, tc.listed, len(workers) == 1)
			must.Eq(t, tc.probed, probed)
		})
	}
}
