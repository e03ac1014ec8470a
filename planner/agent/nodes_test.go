package agent

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// oneNodeNomad is Nomad's HTTP API with one GPU node.
func oneNodeNomad(t *testing.T) (*nomadapi.Client, *fakeagent.Server) {
	srv := fakeagent.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/v1/nodes":
			_ = json.NewEncoder(w).Encode([]*nomadapi.NodeListStub{{ID: "n1", Name: "gpu-1", Status: nomadapi.NodeStatusReady,
				SchedulingEligibility: nomadapi.NodeSchedulingEligible, NodeResources: &nomadapi.NodeResources{Devices: []*nomadapi.NodeDeviceResource{{
					Vendor: cluster.GPUVendor, Type: cluster.GPUType, Name: "A100", Instances: []*nomadapi.NodeDevice{{ID: "g0", Healthy: true}}}}}}})
		case "/v1/allocations":
			_, _ = w.Write([]byte("[]"))
		default:
			_ = json.NewEncoder(w).Encode(&nomadapi.Node{ID: "n1"})
		}
	}))
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	return c, srv
}

// GET /v1/nodes with Nomad frozen answers, within the view's timeout and
// never with a 500, the nodes the planner read last, each saying since
// when reads fail and what it knew as of when.
func TestNodes_FrozenNomadAnswersLastKnownWithStaleness(t *testing.T) {
	a := newTestAgent(t)
	nomad, agent := oneNodeNomad(t)
	a.planner.Cluster = &cluster.View{Nomad: nomad, Timeout: 200 * time.Millisecond}
	srv := httptest.NewServer(a.server.Handler)
	t.Cleanup(func() {
		srv.Close()
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
	cl, err := client.New(client.Config{Address: srv.URL, Token: fuzzReadToken})
	must.NoError(t, err)
	ctx := context.Background()

	fresh, err := cl.Nodes(ctx)
	must.NoError(t, err)
	must.Len(t, 1, fresh)
	must.False(t, fresh[0].AsOf.IsZero())
	must.True(t, fresh[0].StaleSince.IsZero())

	agent.Set(fakeagent.Freeze)
	start := time.Now()
	stale, err := cl.Nodes(ctx)
	must.NoError(t, err)
	must.Less(t, 3*time.Second, time.Since(start))
	must.Len(t, 1, stale)
	must.Eq(t, fresh[0].AsOf, stale[0].AsOf)
	must.False(t, stale[0].StaleSince.IsZero())
	must.StrContains(t, stale[0].Stale, "failed to list nomad nodes")

	agent.Set(fakeagent.Answer)
	again, err := cl.Nodes(ctx)
	must.NoError(t, err)
	must.True(t, again[0].StaleSince.IsZero())
}

// A planner that never read the cluster answers 503 (try again), not 500,
// within the view's timeout.
func TestNodes_NeverReadAnswersUnavailable(t *testing.T) {
	a := newTestAgent(t)
	nomad, agent := oneNodeNomad(t)
	agent.Set(fakeagent.Freeze)
	a.planner.Cluster = &cluster.View{Nomad: nomad, Timeout: 200 * time.Millisecond}
	t.Cleanup(func() {
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
	_, err := (&backend{a: a}).Nodes(context.Background())
	must.ErrorIs(t, err, api.ErrUnavailable)
}

// A node's GPUs held are those of the running jobs on it (read as a page
// of running jobs, not as every record): a queued job holds none, and an
// ended one none, whatever allocation its record kept.
func TestNodes_CountRunningJobs(t *testing.T) {
	a := newTestAgent(t)
	t.Cleanup(func() {
		a.planner.Policies.Close()
		_ = a.store.Close()
	})
	ctx := context.Background()
	now := time.Now()
	for i, j := range []*structs.Job{
		{ID: "run-1", State: structs.JobRunning, Allocation: map[string]int{"n1": 4, "n2": 1}},
		{ID: "run-2", State: structs.JobRunning, Allocation: map[string]int{"n1": 2}},
		{ID: "done-1", State: structs.JobComplete, Allocation: map[string]int{"n1": 2}},
		{ID: "wait-1", State: structs.JobQueued},
	} {
		j.Submitted = now.Add(time.Duration(i) * time.Second)
		must.NoError(t, a.store.CreateJob(ctx, j))
	}
	nodes, err := (&backend{a: a}).Nodes(ctx)
	must.NoError(t, err)
	must.Len(t, 2, nodes)
	must.Eq(t, map[string]int{"run-1": 4, "run-2": 2}, nodes[0].Jobs)
	must.Eq(t, 6, nodes[0].GPUsUsed)
	must.Eq(t, 2, nodes[0].GPUsFree)
	must.Eq(t, map[string]int{"run-1": 1}, nodes[1].Jobs)
	must.Eq(t, 7, nodes[1].GPUsFree)
}
