package nomadjob

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/delivery"
)

// N1 of issue 28: whose an allocation is comes from Nomad's allocation
// API: the planner's job for an allocation of train-<id> in the planner's
// namespace, no job for any other, and ErrUnknownAllocation for one Nomad
// does not know (so the delivery fails, rather than waits).
func TestN1_AllocationJob(t *testing.T) {
	allocs := map[string]nomadapi.Allocation{
		"a1": {ID: "a1", JobID: "train-resnet-1", Namespace: "default"},
		"a2": {ID: "a2", JobID: "postgres", Namespace: "default"},
		"a3": {ID: "a3", JobID: "train-resnet-1", Namespace: "other"},
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a, ok := allocs[strings.TrimPrefix(r.URL.Path, "/v1/allocation/")]
		if !ok {
			http.Error(w, "alloc not found", http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(a)
	}))
	t.Cleanup(srv.Close)
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	n := &Nomad{Client: client, Logger: hclog.NewNullLogger()}
	ctx := context.Background()

	for id, want := range map[string]string{"a1": "resnet-1", "a2": "", "a3": ""} {
		got, err := n.AllocationJob(ctx, id)
		must.NoError(t, err)
		must.Eq(t, want, got, must.Sprint(id))
	}
	_, err = n.AllocationJob(ctx, "gone")
	must.ErrorIs(t, err, delivery.ErrUnknownAllocation)
}
