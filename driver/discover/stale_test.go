package discover

import (
	"bytes"
	"context"
	"errors"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/internal/fakeagent"
)

// hangingSource answers only when its context ends, as a frozen Consul
// agent does to a client that honours its context.
type hangingSource struct{}

func (hangingSource) Workers(ctx context.Context, _ string) ([]Worker, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

type hangingDrains struct{}

func (hangingDrains) Draining(ctx context.Context) ([]string, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

// withLog gives d a logger into a buffer.
func withLog(d *Discovery) *bytes.Buffer {
	var buf bytes.Buffer
	d.Logger = hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Info})
	return &buf
}

// Through an outage of every source (failing, or hanging past the bound)
// discovery prints the set it printed last, within the bound, and leaves
// the discovered file as it was.
func TestRun_PrintsLastSetWhenSourcesFailOrHang(t *testing.T) {
	workers := []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}, {AllocID: a2, Address: "10.0.0.2:3000"}}
	cases := []struct {
		name     string
		primary  Source
		fallback Source
		drains   Drains
	}{
		{name: "sources fail", primary: &fakeSource{err: errors.New("connection refused")}, fallback: &fakeSource{err: errors.New("no leader")}, drains: &fakeDrains{}},
		{name: "sources hang", primary: hangingSource{}, fallback: hangingSource{}, drains: &fakeDrains{}},
		{name: "drain list hangs", primary: &fakeSource{workers: workers}, drains: hangingDrains{}},
		{name: "drain list fails", primary: &fakeSource{workers: workers}, drains: &fakeDrains{err: errors.New("403")}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			src := &fakeSource{workers: workers}
			d := newDiscovery(t, src, nil, &fakeDrains{ids: []string{a2}})
			d.Bound = 100 * time.Millisecond
			var out strings.Builder
			must.NoError(t, d.Run(context.Background(), &out))
			must.Eq(t, "w-1a2b3c4d:2\n", out.String())
			before, err := os.ReadFile(d.Task.DiscoveredFile)
			must.NoError(t, err)

			d.Primary, d.Fallback, d.Drains = tc.primary, tc.fallback, tc.drains
			d.Now = func() time.Time { return time.Unix(200, 0) }
			out.Reset()
			start := time.Now()
			must.NoError(t, d.Run(context.Background(), &out))
			must.Less(t, 2*time.Second, time.Since(start), must.Sprint("the run is bounded"))
			must.Eq(t, "w-1a2b3c4d:2\n", out.String())
			after, err := os.ReadFile(d.Task.DiscoveredFile)
			must.NoError(t, err)
			must.Eq(t, string(before), string(after), must.Sprint("the planner is not told of a set discovery did not read"))
		})
	}
}

// The outage is logged once when it begins and once when discovery reads
// again, not at every run.
func TestRun_LogsOutageOncePerTransition(t *testing.T) {
	src := &fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}
	d := newDiscovery(t, src, nil, &fakeDrains{})
	log := withLog(d)
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, "", log.String())

	src.err = errors.New("connection refused")
	for range 3 {
		must.NoError(t, d.Run(context.Background(), &out))
	}
	must.Eq(t, 1, strings.Count(log.String(), "printing the last known hosts"))
	must.StrContains(t, log.String(), "connection refused")

	src.err = nil
	d.Now = func() time.Time { return time.Unix(130, 0) }
	must.NoError(t, d.Run(context.Background(), &out))
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, 1, strings.Count(log.String(), "discovery reads the workers again"))
	must.StrContains(t, log.String(), "stale_for=30s")
	_, err := os.Stat(d.markerPath())
	must.True(t, os.IsNotExist(err))
}

// A frozen Consul agent (a real consul/api client against a server that
// never answers) costs a run the primary's half of the bound: Nomad's
// service API, the fallback, answers within the rest.
func TestRun_FrozenConsulFallsBackWithinBound(t *testing.T) {
	client, err := consulapi.NewClient(&consulapi.Config{Address: fakeagent.Frozen(t).Addr()})
	must.NoError(t, err)
	d := newDiscovery(t, &Consul{Client: client},
		&fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}, &fakeDrains{})
	d.Bound = 400 * time.Millisecond
	var out strings.Builder
	start := time.Now()
	must.NoError(t, d.Run(context.Background(), &out))
	must.Less(t, 2*time.Second, time.Since(start))
	must.Eq(t, "w-1a2b3c4d:2\n", out.String())
	must.MapLen(t, 1, readJSON[drain.Discovered](t, d.Task.DiscoveredFile).Hosts)
}

// With every source frozen (real consul/api client, hanging server), a
// run prints the last set within the bound.
func TestRun_FrozenConsulWithoutFallbackPrintsLastSet(t *testing.T) {
	src := &fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}
	d := newDiscovery(t, src, nil, &fakeDrains{})
	d.Bound = 200 * time.Millisecond
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))

	client, err := consulapi.NewClient(&consulapi.Config{Address: fakeagent.Frozen(t).Addr()})
	must.NoError(t, err)
	d.Primary = &Consul{Client: client}
	out.Reset()
	start := time.Now()
	must.NoError(t, d.Run(context.Background(), &out))
	must.Less(t, 2*time.Second, time.Since(start))
	must.Eq(t, "w-1a2b3c4d:2\n", out.String())
}

// Nomad's service API (a real nomad/api client) answers an empty list for
// a service registered in Consul, as the planner's workers are: with
// Consul frozen, that answer is no answer, and the run prints the last
// set rather than drop every worker.
func TestRun_EmptyFallbackKeepsLastSet(t *testing.T) {
	src := &fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}
	d := newDiscovery(t, src, nil, &fakeDrains{})
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))

	nomad := fakeagent.New(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		must.Eq(t, "/v1/service/w", r.URL.Path)
		_, _ = w.Write([]byte("[]"))
	}))
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: nomad.URL})
	must.NoError(t, err)
	consul, err := consulapi.NewClient(&consulapi.Config{Address: fakeagent.Frozen(t).Addr()})
	must.NoError(t, err)
	d.Primary, d.Fallback = &Consul{Client: consul}, &Nomad{Client: client}
	d.Bound = 200 * time.Millisecond
	log := withLog(d)
	out.Reset()
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, "w-1a2b3c4d:2\n", out.String())
	must.StrContains(t, log.String(), "the fallback lists no workers")
}
