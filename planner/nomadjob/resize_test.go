package nomadjob

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Issue 27: a job whose launcher is gone or cut off is not resized (the
// planner shrinks a job whose node left): registering it again would make
// Nomad place a second launcher, a run the planner does not know of. The
// resize fails with ErrLauncherGone and registers nothing; the planner's
// Outcome then ends the run and requeues it. A launcher on a ready node,
// or none placed yet, lets the resize go on.
func TestLauncherAlive(t *testing.T) {
	cases := []struct {
		name       string
		launcher   string // its client status; "" for none
		nodeStatus string
		gone       string // in the error; "" for none
	}{
		{"running on a ready node", nomadapi.AllocClientStatusRunning, nomadapi.NodeStatusReady, ""},
		{"not placed yet", "", "", ""},
		{"running on a node that is down", nomadapi.AllocClientStatusRunning, nomadapi.NodeStatusDown, "its node node3 is down"},
		{"running on a disconnected node", nomadapi.AllocClientStatusRunning, nomadapi.NodeStatusDisconnected, "its node node3 is disconnected"},
		{"unknown", nomadapi.AllocClientStatusUnknown, nomadapi.NodeStatusDown, "its allocation is unknown"},
		{"lost", nomadapi.AllocClientStatusLost, nomadapi.NodeStatusDown, "its allocation is lost"},
		{"failed", nomadapi.AllocClientStatusFailed, nomadapi.NodeStatusReady, "its allocation is failed"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			j := &structs.Job{ID: "a-1"}
			var mu sync.Mutex
			var calls []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls = append(calls, r.Method+" "+r.URL.Path)
				mu.Unlock()
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/"+JobID(j)+"/allocations":
					allocs := []*nomadapi.AllocationListStub{
						{ID: "w1", TaskGroup: WorkerGroup("n2"), NodeID: "n2", ClientStatus: nomadapi.AllocClientStatusRunning, CreateIndex: 12},
					}
					if tc.launcher != "" {
						allocs = append(allocs, &nomadapi.AllocationListStub{ID: "l1", TaskGroup: LauncherGroup, NodeID: "n3",
							ClientStatus: tc.launcher, CreateIndex: 11})
					}
					_ = json.NewEncoder(w).Encode(allocs)
				case r.Method == http.MethodGet && r.URL.Path == "/v1/node/n3":
					_ = json.NewEncoder(w).Encode(&nomadapi.Node{ID: "n3", Name: "node3", Status: tc.nodeStatus})
				default:
					http.NotFound(w, r)
				}
			}))
			t.Cleanup(srv.Close)
			client, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
			must.NoError(t, err)
			n := &Nomad{Client: client, Logger: hclog.NewNullLogger()}

			err = n.launcherAlive(context.Background(), JobID(j))
			if tc.gone == "" {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, ErrLauncherGone)
			must.StrContains(t, err.Error(), tc.gone)
			// The resize stops there: nothing is registered.
			id := JobID(j)
			current := &nomadapi.Job{ID: &id}
			must.ErrorIs(t, n.resize(context.Background(), j, current, policy.Allocation{"n2": 1}), ErrLauncherGone)
			mu.Lock()
			defer mu.Unlock()
			for _, c := range calls {
				must.StrHasPrefix(t, "GET ", c, must.Sprint("a refused resize wrote to Nomad"))
			}
		})
	}
}
