package discover

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
)

type fakeSource struct {
	workers []Worker
	err     error
}

func (f *fakeSource) Workers(context.Context, string) ([]Worker, error) { return f.workers, f.err }

type fakeDrains struct {
	ids []string
	err error
}

func (f *fakeDrains) Draining(context.Context) ([]string, error) { return f.ids, f.err }

const (
	a1 = "1a2b3c4d-0000-0000-0000-000000000001"
	a2 = "2a2b3c4d-0000-0000-0000-000000000002"
	a3 = "3a2b3c4d-0000-0000-0000-000000000003"
)

func newDiscovery(t *testing.T, primary, fallback Source, drains Drains) *Discovery {
	dir := t.TempDir()
	return &Discovery{
		Task: &taskfile.Task{Service: "w", Slots: 2,
			HostsFile:      filepath.Join(dir, "hosts.json"),
			DiscoveredFile: filepath.Join(dir, "alloc", drain.DiscoveredPath)},
		Primary: primary, Fallback: fallback, Drains: drains,
		Now: func() time.Time { return time.Unix(100, 0) },
	}
}

// Discovery prints the healthy, not draining workers as host:slots, and
// writes the hosts file and the set it printed.
func TestRun_PrintsLiveNotDrainingWorkers(t *testing.T) {
	src := &fakeSource{workers: []Worker{
		{AllocID: a2, Address: "10.0.0.2:3000"},
		{AllocID: a1, Address: "10.0.0.1:3000"},
		{AllocID: a3, Address: "10.0.0.3:3000"},
		{AllocID: "", Address: "10.0.0.9:3000"}, // not a Nomad allocation
	}}
	d := newDiscovery(t, src, nil, &fakeDrains{ids: []string{a3}})
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, "w-1a2b3c4d:2\nw-2a2b3c4d:2\n", out.String())

	hosts := readJSON[map[string]string](t, d.Task.HostsFile)
	must.Eq(t, map[string]string{"w-1a2b3c4d": "10.0.0.1:3000", "w-2a2b3c4d": "10.0.0.2:3000"}, hosts)
	disc := readJSON[drain.Discovered](t, d.Task.DiscoveredFile)
	must.Eq(t, time.Unix(100, 0).UTC(), disc.Updated)
	must.MapLen(t, 2, disc.Hosts)
	must.Eq(t, drain.Host{AllocID: a1, Address: "10.0.0.1:3000", Slots: 2}, disc.Hosts["w-1a2b3c4d"])
	must.Eq(t, []string{a3}, disc.Draining)

	// A worker that leaves stays resolvable for a late ssh, but is no
	// longer printed.
	src.workers = src.workers[:1]
	out.Reset()
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, "w-2a2b3c4d:2\n", out.String())
	must.MapLen(t, 2, readJSON[map[string]string](t, d.Task.HostsFile))
	must.MapLen(t, 1, readJSON[drain.Discovered](t, d.Task.DiscoveredFile).Hosts)
}

// When Consul cannot be reached, Nomad's service API answers.
func TestRun_FallsBackWhenPrimaryFails(t *testing.T) {
	d := newDiscovery(t, &fakeSource{err: errors.New("connection refused")},
		&fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}, &fakeDrains{})
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))
	must.Eq(t, "w-1a2b3c4d:2\n", out.String())
}

// Before it has listed any worker, a run that cannot read the catalogs
// or the drain list prints no host and succeeds: horovodrun ends the job
// when its first discovery fails (a slow Consul at the launcher's start
// failed TestPlanner_FIFOThenElasticFIFO that way), and an empty set only
// makes it wait. It writes no discovered file (the planner is told of no
// set discovery did not read) and logs the outage once.
func TestRun_FirstRunWithoutSourcesPrintsNoHost(t *testing.T) {
	cases := map[string]*Discovery{
		"drains unreadable": newDiscovery(t, &fakeSource{workers: []Worker{{AllocID: a1, Address: "x:1"}}}, nil, &fakeDrains{err: errors.New("403")}),
		"no source":         newDiscovery(t, &fakeSource{err: errors.New("down")}, &fakeSource{err: errors.New("down too")}, &fakeDrains{}),
		"sources hang":      newDiscovery(t, hangingSource{}, hangingSource{}, &fakeDrains{}),
	}
	for name, d := range cases {
		t.Run(name, func(t *testing.T) {
			d.Bound = 100 * time.Millisecond
			log := withLog(d)
			var out strings.Builder
			for range 3 {
				must.NoError(t, d.Run(context.Background(), &out))
			}
			must.Eq(t, "", out.String())
			_, err := os.Stat(d.Task.DiscoveredFile)
			must.True(t, os.IsNotExist(err))
			must.Eq(t, 1, strings.Count(log.String(), "printing none until discovery reads"))
		})
	}
}

// A discovered file discovery cannot read is not taken for "none listed".
func TestRun_CorruptDiscoveredFileFails(t *testing.T) {
	d := newDiscovery(t, &fakeSource{err: errors.New("down")}, nil, &fakeDrains{})
	must.NoError(t, os.MkdirAll(filepath.Dir(d.Task.DiscoveredFile), 0o700))
	must.NoError(t, os.WriteFile(d.Task.DiscoveredFile, []byte("{"), 0o600))
	var out strings.Builder
	must.ErrorContains(t, d.Run(context.Background(), &out), "corrupt discovered file")
	must.Eq(t, "", out.String())
}

func TestAllocIDFromServiceID(t *testing.T) {
	must.Eq(t, a1, AllocIDFromServiceID("_nomad-task-"+a1+"-group-workers-train-workers-horovod"))
	must.Eq(t, "", AllocIDFromServiceID("web-1"))
}

func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	b, err := os.ReadFile(path)
	must.NoError(t, err)
	var v T
	must.NoError(t, json.Unmarshal(b, &v))
	return v
}

// The discovered file says when each host was first listed: a host keeps
// its time across runs, a new one gets the run's.
func TestRun_RecordsWhenEachHostWasFirstListed(t *testing.T) {
	src := &fakeSource{workers: []Worker{{AllocID: a1, Address: "10.0.0.1:3000"}}}
	d := newDiscovery(t, src, nil, &fakeDrains{})
	var out strings.Builder
	must.NoError(t, d.Run(context.Background(), &out))
	src.workers = append(src.workers, Worker{AllocID: a2, Address: "10.0.0.2:3000"})
	d.Now = func() time.Time { return time.Unix(101, 0) }
	must.NoError(t, d.Run(context.Background(), &out))
	disc := readJSON[drain.Discovered](t, d.Task.DiscoveredFile)
	must.Eq(t, map[string]time.Time{"w-1a2b3c4d": time.Unix(100, 0).UTC(), "w-2a2b3c4d": time.Unix(101, 0).UTC()}, disc.Since)
}
