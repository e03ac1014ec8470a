package nomadjob

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Issue 27: a launcher that ended is the script's failure (or success)
// when the script ran and exited, and the cluster's (Infrastructure) when
// it exited drain.ExitInfrastructure, its allocation was lost, or its
// task failed without ever running the command.
func TestEnded_ClassifiesInfrastructure(t *testing.T) {
	terminated := func(code int, msg string) *nomadapi.TaskEvent {
		return &nomadapi.TaskEvent{Type: nomadapi.TaskTerminated, ExitCode: code, DisplayMessage: msg}
	}
	started := &nomadapi.TaskEvent{Type: nomadapi.TaskStarted, DisplayMessage: "Task started by client"}
	received := &nomadapi.TaskEvent{Type: nomadapi.TaskReceived, DisplayMessage: "Task received by client"}
	notRestarting := &nomadapi.TaskEvent{Type: nomadapi.TaskNotRestarting, DisplayMessage: "Policy allows no restarts"}
	cases := []struct {
		name   string
		status string
		failed bool
		events []*nomadapi.TaskEvent
		code   int
		infra  string // a prefix; "" none
	}{
		{"script succeeded", nomadapi.AllocClientStatusComplete, false,
			[]*nomadapi.TaskEvent{received, started, terminated(0, "Exit Code: 0")}, 0, ""},
		{"script failed", nomadapi.AllocClientStatusFailed, true,
			[]*nomadapi.TaskEvent{received, started, terminated(1, "Exit Code: 1"), notRestarting}, 1, ""},
		{"launcher exited 75", nomadapi.AllocClientStatusFailed, true,
			[]*nomadapi.TaskEvent{received, started, terminated(drain.ExitInfrastructure, "Exit Code: 75"), notRestarting},
			drain.ExitInfrastructure, "launcher exited 75: Policy allows no restarts"},
		{"allocation lost", nomadapi.AllocClientStatusLost, false,
			[]*nomadapi.TaskEvent{received, started}, -1, "the launcher's allocation was lost"},
		{"node cut off (unknown, not replaced)", nomadapi.AllocClientStatusUnknown, false,
			[]*nomadapi.TaskEvent{received, started}, -1, "the launcher's node is cut off from the servers"},
		{"lost after the script failed", nomadapi.AllocClientStatusLost, true,
			[]*nomadapi.TaskEvent{received, started, terminated(1, "Exit Code: 1")}, 1, "the launcher's allocation was lost"},
		{"driver failure", nomadapi.AllocClientStatusFailed, true,
			[]*nomadapi.TaskEvent{received, {Type: nomadapi.TaskDriverFailure, DisplayMessage: "failed to start task: no horovodrun"}, notRestarting},
			-1, "the launcher never ran: driver failure: failed to start task: no horovodrun"},
		{"setup failure", nomadapi.AllocClientStatusFailed, true,
			[]*nomadapi.TaskEvent{received, {Type: nomadapi.TaskSetupFailure, SetupError: "template: variable missing"}},
			-1, "the launcher never ran: setup failure: template: variable missing"},
		{"failed without a terminated event", nomadapi.AllocClientStatusFailed, true,
			[]*nomadapi.TaskEvent{received, notRestarting}, -1, "the launcher failed without running its command: Policy allows no restarts"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out := Ended(&nomadapi.AllocationListStub{ClientStatus: tc.status, TaskStates: map[string]*nomadapi.TaskState{
				LauncherTask: {State: "dead", Failed: tc.failed, Events: tc.events}}})
			must.True(t, out.Done)
			must.Eq(t, tc.code, out.ExitCode)
			if tc.infra == "" {
				must.Eq(t, "", out.Infrastructure)
				return
			}
			must.StrHasPrefix(t, tc.infra, out.Infrastructure)
		})
	}
}

// What Nomad has not placed of a job, from the allocations wanted and
// running per group: the GPUs of each node short, and the launcher.
func TestMissing(t *testing.T) {
	a, b := WorkerGroup("node-a"), WorkerGroup("node-b")
	gpus, launcher := Missing(map[string]int{LauncherGroup: 1, a: 2, b: 3}, map[string]int{LauncherGroup: 1, a: 2, b: 1}, 2)
	must.Eq(t, map[string]int{"node-b": 4}, gpus)
	must.False(t, launcher)
	gpus, launcher = Missing(map[string]int{LauncherGroup: 1, a: 1}, map[string]int{a: 1}, 1)
	must.MapEmpty(t, gpus)
	must.True(t, launcher)
}

// Outcome reads the launcher's allocation from Nomad's API: a lost one, or an
// unknown one (its node cut off; the group does not replace it), is
// the cluster's end of the run, and the ended job's Nomad job is stopped
// and its secrets deleted.
func TestOutcome_LostLauncherIsInfrastructure(t *testing.T) {
	for status, want := range map[string]string{
		nomadapi.AllocClientStatusLost:    "the launcher's allocation was lost",
		nomadapi.AllocClientStatusUnknown: "the launcher's node is cut off",
	} {
		t.Run(status, func(t *testing.T) {
			j := &structs.Job{ID: "a-1"}
			var mu sync.Mutex
			var calls []string
			out := outcomeOf(t, j, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls = append(calls, r.Method+" "+r.URL.Path)
				mu.Unlock()
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/"+JobID(j)+"/allocations":
					_ = json.NewEncoder(w).Encode([]*nomadapi.AllocationListStub{
						{ID: "w1", TaskGroup: WorkerGroup("n1"), ClientStatus: nomadapi.AllocClientStatusRunning, CreateIndex: 12},
						{ID: "l1", TaskGroup: LauncherGroup, ClientStatus: status, CreateIndex: 11,
							TaskStates: map[string]*nomadapi.TaskState{LauncherTask: {State: "running"}}},
					})
				case r.Method == http.MethodDelete:
					_, _ = w.Write([]byte("{}"))
				default:
					http.NotFound(w, r)
				}
			})
			must.True(t, out.Done)
			must.StrHasPrefix(t, want, out.Infrastructure)
			mu.Lock()
			defer mu.Unlock()
			must.SliceContains(t, calls, "DELETE /v1/job/"+JobID(j))
			must.SliceContains(t, calls, "DELETE /v1/var/"+SecretVariable(j))
		})
	}
}

// A job started again (after a stop or a preemption) whose launcher Nomad
// has not placed yet has only the earlier run's launcher, ended: that is
// not this run's end (a chaos run saw a preempted job restarted, and the
// next round took its old launcher's exit 1 for the new run's failure and
// stopped the new workers). Once this run's launcher is there, its end is
// the run's. A record from before NomadRunIndex reads the newest launcher.
func TestOutcome_EarlierRunsLauncherIsNotThisRunsEnd(t *testing.T) {
	old := &nomadapi.AllocationListStub{ID: "l0", TaskGroup: LauncherGroup, ClientStatus: nomadapi.AllocClientStatusFailed, CreateIndex: 11,
		TaskStates: map[string]*nomadapi.TaskState{LauncherTask: {State: "dead", Failed: true,
			Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskTerminated, ExitCode: 1, DisplayMessage: "Exit Code: 1"}}}}}
	cur := func(status string, code int) *nomadapi.AllocationListStub {
		return &nomadapi.AllocationListStub{ID: "l1", TaskGroup: LauncherGroup, ClientStatus: status, CreateIndex: 21,
			TaskStates: map[string]*nomadapi.TaskState{LauncherTask: {State: "dead",
				Events: []*nomadapi.TaskEvent{{Type: nomadapi.TaskTerminated, ExitCode: code}}}}}
	}
	for _, tc := range []struct {
		name     string
		runIndex uint64
		allocs   []*nomadapi.AllocationListStub
		done     bool
		code     int
	}{
		{"only the earlier run's launcher", 20, []*nomadapi.AllocationListStub{old}, false, 0},
		{"this run's launcher runs", 20, []*nomadapi.AllocationListStub{old, cur(nomadapi.AllocClientStatusRunning, 0)}, false, 0},
		{"this run's launcher ended", 20, []*nomadapi.AllocationListStub{old, cur(nomadapi.AllocClientStatusComplete, 0)}, true, 0},
		{"a record from before the index", 0, []*nomadapi.AllocationListStub{old}, true, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &structs.Job{ID: "a-1", NomadRunIndex: tc.runIndex}
			var stops atomic.Int32
			out := outcomeOf(t, j, func(w http.ResponseWriter, r *http.Request) {
				switch {
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/"+JobID(j)+"/allocations":
					_ = json.NewEncoder(w).Encode(tc.allocs)
				case r.Method == http.MethodGet && r.URL.Path == "/v1/job/"+JobID(j):
					_ = json.NewEncoder(w).Encode(&nomadapi.Job{ID: ptr(JobID(j)), Status: ptr("running"), JobModifyIndex: ptr(uint64(20))})
				case r.Method == http.MethodDelete:
					stops.Add(1)
					_, _ = w.Write([]byte("{}"))
				default:
					http.NotFound(w, r)
				}
			})
			must.Eq(t, tc.done, out.Done)
			if tc.done {
				must.Eq(t, tc.code, out.ExitCode)
				return
			}
			must.Zero(t, stops.Load(), must.Sprint("the new run's Nomad job was stopped"))
		})
	}
}

// A worker group whose node is down or cut off does not wait for room
// there (no unplaced note: the node's loss is the departures' to say);
// one on a ready node does, naming the node by its name (issue 28).
func TestOutcome_WorkersOfAGoneNodeAreNotUnplaced(t *testing.T) {
	for status, unplaced := range map[string]bool{
		nomadapi.NodeStatusDown:         false,
		nomadapi.NodeStatusDisconnected: false,
		nomadapi.NodeStatusReady:        true,
	} {
		t.Run(status, func(t *testing.T) {
			j := &structs.Job{ID: "a-1", Allocation: map[string]int{"n1": 1, "n2": 1}, Spec: jobspec.Spec{GPUs: jobspec.GPUs{PerWorker: 1}}}
			out := outcomeOf(t, j, func(w http.ResponseWriter, r *http.Request) {
				switch r.URL.Path {
				case "/v1/job/" + JobID(j) + "/allocations":
					_ = json.NewEncoder(w).Encode([]*nomadapi.AllocationListStub{
						{ID: "l1", TaskGroup: LauncherGroup, DesiredStatus: "run", ClientStatus: nomadapi.AllocClientStatusRunning},
						{ID: "w1", TaskGroup: WorkerGroup("n1"), DesiredStatus: "run", ClientStatus: nomadapi.AllocClientStatusRunning},
						{ID: "w2", TaskGroup: WorkerGroup("n2"), DesiredStatus: "run", ClientStatus: nomadapi.AllocClientStatusLost},
					})
				case "/v1/node/n2":
					_ = json.NewEncoder(w).Encode(&nomadapi.Node{ID: "n2", Name: "gpu-2", Status: status})
				case "/v1/job/" + JobID(j) + "/evaluations":
					_ = json.NewEncoder(w).Encode([]*nomadapi.Evaluation{{ID: "e1", Status: nomadapi.EvalStatusBlocked, CreateIndex: 5,
						FailedTGAllocs: map[string]*nomadapi.AllocationMetric{WorkerGroup("n2"): {NodesEvaluated: 1, ConstraintFiltered: map[string]int{"${node.unique.id} = n2": 1}}}}})
				default:
					http.NotFound(w, r)
				}
			})
			must.False(t, out.Done)
			must.Eq(t, unplaced, out.Unplaced != "", must.Sprintf("unplaced: %q", out.Unplaced))
			if unplaced {
				must.StrContains(t, out.Unplaced, "1 of 1 workers on node gpu-2: ")
			}
		})
	}
}

// outcomeOf is Outcome of job j from a Nomad whose API is h.
func outcomeOf(t *testing.T, j *structs.Job, h http.HandlerFunc) planner.Outcome {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: srv.URL})
	must.NoError(t, err)
	out, err := (&Nomad{Client: client, Logger: hclog.NewNullLogger()}).Outcome(context.Background(), j)
	must.NoError(t, err)
	return out
}
