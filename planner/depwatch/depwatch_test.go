package depwatch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// recorder is the events broker and the gauge.
type recorder struct {
	mu     sync.Mutex
	events []structs.StreamEvent
	up     map[string]bool
}

func (r *recorder) Publish(evs ...structs.StreamEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, evs...)
}

func (r *recorder) DependencyUp(dep string, up bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.up == nil {
		r.up = map[string]bool{}
	}
	r.up[dep] = up
}

func (r *recorder) types() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for _, e := range r.events {
		out = append(out, e.Type)
	}
	return out
}

// A dependency is down after Threshold failed checks in a row and up
// after one that passes: one event and one WARN line each way, none for
// the checks in between; the gauge follows the state.
func TestWatcher_ReportsEachTransitionOnce(t *testing.T) {
	var failing error
	rec := &recorder{}
	var log bytes.Buffer
	clock := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	w := &Watcher{
		Deps:   []Dependency{{Name: Consul, Check: func(context.Context) error { return failing }}},
		Events: rec, Gauge: rec,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &log, Level: hclog.Info}),
		Now:    func() time.Time { clock = clock.Add(5 * time.Second); return clock },
	}
	steps := []struct {
		name   string
		err    error
		up     bool
		events []string
	}{
		{name: "answers", up: true},
		{name: "first failure is not yet an outage", err: errors.New("connection refused"), up: true},
		{name: "second failure is", err: errors.New("connection refused"), up: false, events: []string{StreamDependencyDown}},
		{name: "still down: nothing new", err: errors.New("context deadline exceeded"), up: false, events: []string{StreamDependencyDown}},
		{name: "back", up: true, events: []string{StreamDependencyDown, StreamDependencyUp}},
		{name: "still up: nothing new", up: true, events: []string{StreamDependencyDown, StreamDependencyUp}},
	}
	for _, s := range steps {
		failing = s.err
		w.Check(context.Background())
		must.Eq(t, s.up, rec.up[Consul], must.Sprint(s.name))
		must.Eq(t, s.up, w.Up(Consul), must.Sprint(s.name))
		must.Eq(t, s.events, rec.types(), must.Sprint(s.name))
	}
	must.Eq(t, "consul is down since 2026-11-28T09:00:10Z: connection refused", rec.events[0].Message)
	must.Eq(t, "consul is back after 15s", rec.events[1].Message)
	must.Eq(t, 2, strings.Count(log.String(), "[WARN]"), must.Sprint(log.String()))
}

// leaderAgent is a fake agent whose /v1/status/leader names leader.
func leaderAgent(t *testing.T, leader string) *fakeagent.Server {
	return fakeagent.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		must.Eq(t, "/v1/status/leader", r.URL.Path)
		_ = json.NewEncoder(w).Encode(leader)
	}))
}

// The checks, through real consul/api and nomad/api clients, pass only
// when the agent answers with a leader, and end within their context.
func TestChecks_PassOnlyWithALeader(t *testing.T) {
	cases := []struct {
		name   string
		mode   fakeagent.Mode
		leader string
		ok     bool
	}{
		{name: "leader", leader: "10.0.0.1:8300", ok: true},
		{name: "no leader", leader: ""},
		{name: "500", mode: fakeagent.Fail},
		{name: "frozen", mode: fakeagent.Freeze},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			consulSrv, nomadSrv := leaderAgent(t, tc.leader), leaderAgent(t, tc.leader)
			consulSrv.Set(tc.mode)
			nomadSrv.Set(tc.mode)
			cc, err := consulapi.NewClient(&consulapi.Config{Address: consulSrv.Addr()})
			must.NoError(t, err)
			nc, err := nomadapi.NewClient(&nomadapi.Config{Address: nomadSrv.URL})
			must.NoError(t, err)
			for _, d := range []Dependency{ConsulCheck(cc), NomadCheck(nc)} {
				ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
				start := time.Now()
				err := d.Check(ctx)
				cancel()
				must.Less(t, 2*time.Second, time.Since(start), must.Sprint(d.Name))
				must.Eq(t, tc.ok, err == nil, must.Sprint(d.Name, err))
			}
		})
	}
}

// A frozen Consul is reported while Nomad, checked at the same time, stays
// up: one check that hangs delays no other.
func TestWatcher_FrozenConsulReportedNomadStaysUp(t *testing.T) {
	cc, err := consulapi.NewClient(&consulapi.Config{Address: fakeagent.Frozen(t).Addr()})
	must.NoError(t, err)
	nc, err := nomadapi.NewClient(&nomadapi.Config{Address: leaderAgent(t, "10.0.0.1:4647").URL})
	must.NoError(t, err)
	rec := &recorder{}
	w := &Watcher{Deps: []Dependency{ConsulCheck(cc), NomadCheck(nc)}, Interval: 20 * time.Millisecond,
		Timeout: 50 * time.Millisecond, Events: rec, Gauge: rec}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); w.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	deadline := time.Now().Add(5 * time.Second)
	for len(rec.types()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	must.Eq(t, []string{StreamDependencyDown}, rec.types())
	must.StrHasPrefix(t, "consul is down since", rec.events[0].Message)
	must.True(t, w.Up(Nomad))
	must.False(t, w.Up(Consul))
}

// With the defaults, an outage that begins just after a check is reported
// within 30 s: Threshold checks, each Interval apart and each up to
// Timeout long.
func TestDefaults_ReportWithin30Seconds(t *testing.T) {
	must.LessEq(t, 30*time.Second, DefaultThreshold*(DefaultInterval+DefaultTimeout))
}

// The agents check names the nodes whose Consul agent does not answer the
// cluster (serfHealth critical), not those with another critical check,
// and cannot tell while Consul itself does not answer.
func TestConsulAgentsCheck_NamesNodesFailingSerfHealth(t *testing.T) {
	cases := []struct {
		name    string
		checks  consulapi.HealthChecks
		mode    fakeagent.Mode
		wantErr string
		unknown bool
	}{
		{name: "all answer", checks: consulapi.HealthChecks{}},
		{name: "a service check fails", checks: consulapi.HealthChecks{{Node: "node1", CheckID: "service:w", Status: consulapi.HealthCritical}}},
		{name: "two agents frozen", checks: consulapi.HealthChecks{
			{Node: "node3", CheckID: serfHealth, Status: consulapi.HealthCritical},
			{Node: "node1", CheckID: "service:w", Status: consulapi.HealthCritical},
			{Node: "node2", CheckID: serfHealth, Status: consulapi.HealthCritical}},
			wantErr: "consul agents do not answer on node2, node3"},
		{name: "consul frozen", mode: fakeagent.Freeze, unknown: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := fakeagent.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				must.Eq(t, "/v1/health/state/critical", r.URL.Path)
				_ = json.NewEncoder(w).Encode(tc.checks)
			}))
			srv.Set(tc.mode)
			cc, err := consulapi.NewClient(&consulapi.Config{Address: srv.Addr()})
			must.NoError(t, err)
			ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
			defer cancel()
			err = ConsulAgentsCheck(cc).Check(ctx)
			switch {
			case tc.unknown:
				must.ErrorIs(t, err, ErrUnknown)
			case tc.wantErr != "":
				must.EqError(t, err, tc.wantErr)
			default:
				must.NoError(t, err)
			}
		})
	}
}

// A check that cannot tell (ErrUnknown) leaves the dependency as it was:
// no event, no transition.
func TestWatcher_UnknownKeepsState(t *testing.T) {
	var result error
	rec := &recorder{}
	w := &Watcher{Deps: []Dependency{{Name: ConsulAgents, Check: func(context.Context) error { return result }}},
		Threshold: 1, Events: rec, Gauge: rec}
	result = errors.New("consul agents do not answer on node2")
	w.Check(context.Background())
	must.False(t, w.Up(ConsulAgents))
	result = fmt.Errorf("failed to list consul's critical checks: %w", ErrUnknown)
	w.Check(context.Background())
	must.False(t, w.Up(ConsulAgents))
	must.Eq(t, []string{StreamDependencyDown}, rec.types())
}
