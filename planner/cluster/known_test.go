package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// nomadAnswers serves one GPU node, no allocations, and the node's info.
func nomadAnswers(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/nodes":
		n := gpuNode("1", 4, 0)
		n.ModifyIndex = 7
		_ = json.NewEncoder(w).Encode([]*nomadapi.NodeListStub{n})
	case r.URL.Path == "/v1/allocations":
		_ = json.NewEncoder(w).Encode([]*nomadapi.AllocationListStub{})
	case strings.HasPrefix(r.URL.Path, "/v1/node/"):
		_ = json.NewEncoder(w).Encode(&nomadapi.Node{ID: "1", Meta: map[string]string{"rack": "r1"}})
	default:
		http.NotFound(w, r)
	}
}

// consulAnswers puts node name-1 in the service "gpu-a100".
func consulAnswers(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/health/service/gpu-a100" {
		http.NotFound(w, r)
		return
	}
	_ = json.NewEncoder(w).Encode([]*consulapi.ServiceEntry{{Node: &consulapi.Node{Node: "name-1", Address: "10.0.0.1"},
		Service: &consulapi.AgentService{Service: "gpu-a100"}}})
}

// testView is a View on real Nomad and Consul clients against fake
// agents, with a clock that moves a second per read.
func testView(t *testing.T) (*View, *fakeagent.Server, *fakeagent.Server) {
	nomad, consul := fakeagent.New(t, http.HandlerFunc(nomadAnswers)), fakeagent.New(t, http.HandlerFunc(consulAnswers))
	nc, err := nomadapi.NewClient(&nomadapi.Config{Address: nomad.URL})
	must.NoError(t, err)
	cc, err := consulapi.NewClient(&consulapi.Config{Address: consul.Addr()})
	must.NoError(t, err)
	var mu sync.Mutex
	clock := time.Unix(1000, 0)
	v := &View{Nomad: nc, Consul: cc, Pools: []Pool{{Name: "a100", Service: "gpu-a100"}},
		Timeout: 150 * time.Millisecond,
		Now: func() time.Time {
			mu.Lock()
			defer mu.Unlock()
			clock = clock.Add(time.Second)
			return clock
		}}
	return v, nomad, consul
}

// timed runs f and fails the test when it takes longer than bound.
func timed(t *testing.T, bound time.Duration, f func()) {
	t.Helper()
	start := time.Now()
	f()
	must.Less(t, bound, time.Since(start), must.Sprint("the read is bounded"))
}

// With Consul failing or frozen, the nodes come from Nomad as they are,
// with the pools Consul gave last; Known says since when they are stale.
func TestNodes_ConsulOutageKeepsLastPools(t *testing.T) {
	for name, mode := range map[string]fakeagent.Mode{"failing": fakeagent.Fail, "frozen": fakeagent.Freeze} {
		t.Run(name, func(t *testing.T) {
			v, _, consul := testView(t)
			first, err := v.Nodes(context.Background())
			must.NoError(t, err)
			must.Eq(t, "a100", first[0].Pool)

			consul.Set(mode)
			timed(t, 2*time.Second, func() {
				nodes, err := v.Nodes(context.Background())
				must.NoError(t, err)
				must.Eq(t, first, nodes)
			})
			r, err := v.Known(context.Background())
			must.NoError(t, err)
			must.Eq(t, time.Unix(1001, 0), r.AsOf, must.Sprint("as old as the pools"))
			must.Eq(t, time.Unix(1002, 0), r.StaleSince)
			must.StrContains(t, r.Stale, "failed to list consul service")

			consul.Set(fakeagent.Answer)
			r, err = v.Known(context.Background())
			must.NoError(t, err)
			must.Eq(t, time.Unix(1004, 0), r.AsOf)
			must.True(t, r.StaleSince.IsZero())
			must.Eq(t, "", r.Stale)
		})
	}
}

// With Nomad failing or frozen, Nodes fails within the timeout with an
// error that is structs.ErrUnavailable, and Known answers the nodes read
// last, saying how old they are.
func TestKnown_NomadOutageAnswersLastNodes(t *testing.T) {
	for name, mode := range map[string]fakeagent.Mode{"failing": fakeagent.Fail, "frozen": fakeagent.Freeze} {
		t.Run(name, func(t *testing.T) {
			v, nomad, _ := testView(t)
			first, err := v.Nodes(context.Background())
			must.NoError(t, err)

			nomad.Set(mode)
			timed(t, 2*time.Second, func() {
				_, err := v.Nodes(context.Background())
				must.ErrorIs(t, err, structs.ErrUnavailable)
				var de *DependencyError
				must.True(t, errors.As(err, &de))
				must.Eq(t, DependencyNomad, de.Dependency)
			})
			var r Reading
			timed(t, 2*time.Second, func() {
				r, err = v.Known(context.Background())
				must.NoError(t, err)
			})
			must.Eq(t, first, r.Nodes)
			must.Eq(t, time.Unix(1001, 0), r.AsOf)
			must.Eq(t, time.Unix(1002, 0), r.StaleSince, must.Sprint("from the first failed read"))
			must.StrContains(t, r.Stale, "failed to list nomad nodes")

			_, err = v.Departed(context.Background())
			must.ErrorIs(t, err, structs.ErrUnavailable)
		})
	}
}

// A view that never read the cluster has nothing to answer with: Known
// fails, and the error is structs.ErrUnavailable.
func TestKnown_FailsWhenNeverRead(t *testing.T) {
	v, nomad, _ := testView(t)
	nomad.Set(fakeagent.Freeze)
	timed(t, 2*time.Second, func() {
		_, err := v.Known(context.Background())
		must.ErrorIs(t, err, structs.ErrUnavailable)
	})
}

// Departed reads Nomad within the timeout.
func TestDeparted_BoundedWhenNomadHangs(t *testing.T) {
	v, nomad, _ := testView(t)
	nomad.Set(fakeagent.Freeze)
	timed(t, 2*time.Second, func() {
		_, err := v.Departed(context.Background())
		must.ErrorIs(t, err, context.DeadlineExceeded)
	})
}

// A read the caller gave up on (its context ended) says nothing of the
// dependencies: Known stays fresh.
func TestKnown_CallerCancelIsNoOutage(t *testing.T) {
	v, nomad, _ := testView(t)
	_, err := v.Nodes(context.Background())
	must.NoError(t, err)
	nomad.Set(fakeagent.Freeze)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = v.Nodes(ctx)
	must.ErrorIs(t, err, context.Canceled)
	r, ok := v.known.reading()
	must.True(t, ok)
	must.True(t, r.StaleSince.IsZero())
}

// Recent answers the nodes last read while that read is younger than the
// age asked and every dependency answered; never before a read, never
// once a read failed.
func TestRecent(t *testing.T) {
	v, nomad, _ := testView(t)
	_, ok := v.Recent(time.Hour)
	must.False(t, ok, must.Sprint("nothing read yet"))

	first, err := v.Nodes(context.Background()) // read at 1001
	must.NoError(t, err)
	nodes, ok := v.Recent(5 * time.Second) // asked at 1002
	must.True(t, ok)
	must.Eq(t, first, nodes)
	_, ok = v.Recent(time.Second) // asked at 1003: 2 s old
	must.False(t, ok, must.Sprint("older than asked"))

	nomad.Set(fakeagent.Fail)
	_, err = v.Nodes(context.Background())
	must.Error(t, err)
	_, ok = v.Recent(time.Hour)
	must.False(t, ok, must.Sprint("Nomad fails: the last read is no answer for now"))
}
