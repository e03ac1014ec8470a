package nomadjob

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// A start of a job whose stopped Nomad job still has a launcher that runs
// or is pending (stopping with its checkpoint, or started again on a host
// that came back) registers nothing and says which launcher it waits for;
// once that launcher has ended, or when it is unknown (its node cut off:
// it fences itself), the job is registered.
func TestApply_StartWaitsForTheLauncherOfThePreviousRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status string // the old launcher's client status
		waits  bool
	}{
		{"running", nomadapi.AllocClientStatusRunning, true},
		{"pending", nomadapi.AllocClientStatusPending, true},
		{"complete", nomadapi.AllocClientStatusComplete, false},
		{"failed", nomadapi.AllocClientStatusFailed, false},
		{"lost", nomadapi.AllocClientStatusLost, false},
		{"unknown", nomadapi.AllocClientStatusUnknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var registered, secrets atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/train-j-1":
					stop := true
					_ = json.NewEncoder(w).Encode(&nomadapi.Job{ID: ptr("train-j-1"), Stop: &stop})
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/train-j-1/allocations":
					_ = json.NewEncoder(w).Encode([]*nomadapi.AllocationListStub{
						{ID: "0ld0ld00-0000-0000-0000-000000000000", TaskGroup: WorkerGroup("n1"), ClientStatus: nomadapi.AllocClientStatusRunning, NodeName: "node2"},
						{ID: "1a2b3c4d-0000-0000-0000-000000000000", TaskGroup: LauncherGroup, ClientStatus: tc.status, NodeName: "node2"},
					})
				case strings.HasPrefix(r.URL.Path, "/v1/var/"):
					secrets.Add(1)
					_ = json.NewEncoder(w).Encode(&nomadapi.Variable{Path: strings.TrimPrefix(r.URL.Path, "/v1/var/")})
				case r.Method != http.MethodGet && (r.URL.Path == "/v1/jobs" || r.URL.Path == "/v1/job/train-j-1"):
					registered.Add(1)
					_ = json.NewEncoder(w).Encode(&nomadapi.JobRegisterResponse{JobModifyIndex: 42})
				default:
					http.NotFound(w, r)
				}
			}))
			defer srv.Close()
			n := nomadAt(t, srv.URL)
			j := queuedJob()
			err := n.Apply(context.Background(), j, policy.Allocation{"n1": 1})
			if tc.waits {
				must.ErrorIs(t, err, planner.ErrRunEnding)
				must.StrContains(t, err.Error(), "launcher allocation 1a2b3c4d on node2 is "+tc.status)
				must.Zero(t, registered.Load(), must.Sprint("a second launcher was registered beside the running one"))
				must.Zero(t, secrets.Load(), must.Sprint("the job's secrets were written for a start that did not happen"))
				return
			}
			must.NoError(t, err)
			must.Eq(t, 1, registered.Load())
			must.Eq(t, 42, j.NomadRunIndex, must.Sprint("the start's modify index, which tells this run's launcher from the last one's"))
		})
	}
}

// Runs lists the planner's jobs whose Nomad jobs are not stopped and have
// a group (the launcher, or workers left behind) running, starting or
// queued, from one list of the train-* jobs: not a stopped one, not one
// whose every allocation has ended, not one of another name.
func TestRuns(t *testing.T) {
	var lists atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/v1/jobs" || r.URL.Query().Get("prefix") != JobPrefix {
			http.NotFound(w, r)
			return
		}
		lists.Add(1)
		launcher := func(s nomadapi.TaskGroupSummary) *nomadapi.JobSummary {
			return &nomadapi.JobSummary{Summary: map[string]nomadapi.TaskGroupSummary{LauncherGroup: s, WorkerGroup("n1"): {Complete: 1}}}
		}
		_ = json.NewEncoder(w).Encode([]*nomadapi.JobListStub{
			{ID: "train-running-1", Status: "running", JobSummary: launcher(nomadapi.TaskGroupSummary{Running: 1})},
			{ID: "train-starting-2", Status: "pending", JobSummary: launcher(nomadapi.TaskGroupSummary{Starting: 1})},
			{ID: "train-queued-3", Status: "pending", JobSummary: launcher(nomadapi.TaskGroupSummary{Queued: 1})},
			{ID: "train-stopped-4", Status: "running", Stop: true, JobSummary: launcher(nomadapi.TaskGroupSummary{Running: 1})},
			{ID: "train-ended-5", Status: "running", JobSummary: launcher(nomadapi.TaskGroupSummary{Complete: 1})},
			{ID: "train-nosummary-6", Status: "running"},
			{ID: "train-workers-left-8", Status: "running", JobSummary: &nomadapi.JobSummary{Summary: map[string]nomadapi.TaskGroupSummary{
				LauncherGroup: {Complete: 1}, WorkerGroup("n1"): {Running: 1}}}},
			{ID: "trainer-7", Status: "running", JobSummary: launcher(nomadapi.TaskGroupSummary{Running: 1})},
		})
	}))
	defer srv.Close()
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	n := &Nomad{Client: client, Logger: hclog.NewNullLogger()}
	ids, err := n.Runs(context.Background())
	must.NoError(t, err)
	must.Eq(t, []string{"queued-3", "running-1", "starting-2", "workers-left-8"}, ids) // the client sorts by ID
	must.Eq(t, 1, lists.Load())
}

// A start that finds its Nomad job registered (the registration went
// through, its answer was lost: the call timed out) goes on from that
// registration, whose modify index becomes the run's (NomadRunIndex, by
// which Outcome tells this run's launcher from an earlier one's).
func TestApply_StartAfterALostAnswerKeepsItsRunIndex(t *testing.T) {
	j := queuedJob()
	target := policy.Allocation{"n1": 1}
	current := Build(j, target, Options{})
	current.JobModifyIndex = ptr(uint64(77))
	var registered atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodGet && r.URL.Path == "/v1/job/train-j-1":
			_ = json.NewEncoder(w).Encode(current)
		case r.Method != http.MethodGet && (r.URL.Path == "/v1/jobs" || r.URL.Path == "/v1/job/train-j-1"):
			registered.Add(1)
			_ = json.NewEncoder(w).Encode(&nomadapi.JobRegisterResponse{JobModifyIndex: 78})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	n := nomadAt(t, srv.URL)
	must.NoError(t, n.Apply(context.Background(), j, target))
	must.Eq(t, 77, j.NomadRunIndex)
	must.Eq(t, 1, registered.Load(), must.Sprint("registered once, as a resize to the same counts"))
}

// nomadAt is the planner's actuator on the (fake) Nomad at addr.
func nomadAt(t *testing.T, addr string) *Nomad {
	t.Helper()
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: addr})
	must.NoError(t, err)
	return &Nomad{Client: client, Logger: hclog.NewNullLogger()}
}

// queuedJob is a queued 1-GPU job j-1.
func queuedJob() *structs.Job {
	return &structs.Job{ID: "j-1", State: structs.JobQueued, Spec: jobspec.Spec{Name: "j", Command: "python3", GPUs: jobspec.GPUs{Min: 1, Max: 1, PerWorker: 1}}}
}
