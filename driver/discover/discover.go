// Package discover is the launcher's host discovery: horovodrun runs the
// discovery script (which execs `nomad-driver-horovod discover`) every
// Period, and it prints the job's live, healthy, not draining workers as
// `host:slots` lines. It also writes the hosts file the ssh shim resolves
// hosts with, and the host set it printed (drain.DiscoveredPath), which
// the planner reads to know when a drained worker has left: the launcher's
// side of the drain protocol (internal/drain).
package discover

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/internal/drain"
)

// Period is how often the launchers run discovery: horovodrun (whose own
// period, 1s, the driver sets to this) and the torchrun launcher alike. A
// new worker waits for the next run to join, half a period on average; a
// run costs a process start and two queries.
const Period = 250 * time.Millisecond

// DefaultBound is how long one run may take to read the catalogs and the
// drain list before it gives up and prints the last set (Run). It is
// above probeTimeout plus a query to a local agent, so that a healthy run
// that probes a new worker is not cut short, and far below Horovod's
// elastic timeout: a frozen Consul agent (its socket accepts, nothing
// answers) costs each run this much, not queryTimeout per query. The
// primary source gets half of it, so the fallback still has time to
// answer.
const DefaultBound = time.Second

// Worker is one healthy instance of the workers' service.
type Worker struct {
	AllocID string
	Address string // the agent's host:port
}

// Source lists the healthy instances of a service.
type Source interface {
	Workers(ctx context.Context, service string) ([]Worker, error)
}

// Drains reads the job's draining allocations.
type Drains interface {
	Draining(ctx context.Context) ([]string, error)
}

// Discovery is one run of host discovery.
type Discovery struct {
	Task *taskfile.Task
	// Primary is the configured provider; Fallback, if set, is asked when
	// Primary cannot be reached (Consul down: Nomad's service API).
	Primary, Fallback Source
	Drains            Drains
	Now               func() time.Time
	// Bound bounds one read of the workers and the drain list
	// (DefaultBound when 0).
	Bound time.Duration
	// Logger takes the run's warnings (the launcher's stderr); none when
	// nil.
	Logger hclog.Logger
}

// Run discovers the workers, writes the hosts and discovered files, and
// prints the `host:slots` lines to out. When the read fails or takes
// longer than the bound (Consul or Nomad down or frozen), it prints the
// set it printed last (the discovered file) and leaves the files as they
// are, so horovodrun keeps its workers through the outage and the
// planner, which waits for the file to drop drained workers, is not told
// of a drain that discovery did not see. It logs the first such run of an
// outage, and the first run that reads again (a marker file beside the
// discovered file remembers the outage between runs). A run with no set
// printed before prints no host (keepLast): a draining worker must never
// come back, and horovodrun ends the job when its first discovery fails.
func (d *Discovery) Run(ctx context.Context, out io.Writer) error {
	hosts, err := d.Refresh(ctx)
	if err != nil {
		if hosts, err = d.keepLast(err); err != nil {
			return err
		}
	} else {
		d.noteRecovered()
	}
	for _, name := range slices.Sorted(maps.Keys(hosts)) {
		if _, err := fmt.Fprintf(out, "%s:%d\n", name, hosts[name].Slots); err != nil {
			return fmt.Errorf("failed to print hosts: %w", err)
		}
	}
	return nil
}

// Refresh discovers the workers, within the bound, and writes the hosts
// and discovered files.
func (d *Discovery) Refresh(ctx context.Context) (map[string]drain.Host, error) {
	ctx, cancel := context.WithTimeout(ctx, d.bound())
	defer cancel()
	hosts, draining, err := d.Hosts(ctx)
	if err != nil {
		return nil, err
	}
	if err := d.writeFiles(hosts, draining); err != nil {
		return nil, err
	}
	return hosts, nil
}

func (d *Discovery) bound() time.Duration {
	if d.Bound > 0 {
		return d.Bound
	}
	return DefaultBound
}

func (d *Discovery) logger() hclog.Logger {
	if d.Logger == nil {
		return hclog.NewNullLogger()
	}
	return d.Logger
}

func (d *Discovery) now() time.Time {
	if d.Now != nil {
		return d.Now()
	}
	return time.Now()
}

// Hosts returns the live, not draining workers by host name, and the
// draining alloc IDs.
func (d *Discovery) Hosts(ctx context.Context) (map[string]drain.Host, []string, error) {
	workers, err := d.workers(ctx)
	if err != nil {
		return nil, nil, err
	}
	draining, err := d.Drains.Draining(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to read draining workers: %w", err)
	}
	hosts := map[string]drain.Host{}
	for _, w := range workers {
		if w.AllocID == "" || slices.Contains(draining, w.AllocID) {
			continue
		}
		hosts[drain.HostName(w.AllocID)] = drain.Host{AllocID: w.AllocID, Address: w.Address, Slots: d.Task.Slots}
	}
	return hosts, draining, nil
}

// workers asks the primary source, within half the bound when there is a
// fallback (so that a frozen primary leaves the fallback time to answer),
// and the fallback when the primary fails; an empty answer of the
// fallback is no answer (errFallbackEmpty).
func (d *Discovery) workers(ctx context.Context) ([]Worker, error) {
	pctx := ctx
	if d.Fallback != nil {
		var cancel context.CancelFunc
		pctx, cancel = context.WithTimeout(ctx, d.bound()/2)
		defer cancel()
	}
	workers, err := d.Primary.Workers(pctx, d.Task.Service)
	if err == nil || d.Fallback == nil {
		if err != nil {
			return nil, fmt.Errorf("failed to list workers: %w", err)
		}
		return workers, nil
	}
	fallback, ferr := d.Fallback.Workers(ctx, d.Task.Service)
	if ferr == nil && len(fallback) == 0 {
		ferr = errFallbackEmpty
	}
	if ferr != nil {
		return nil, fmt.Errorf("failed to list workers: %w", errors.Join(err, ferr))
	}
	return fallback, nil
}

// errFallbackEmpty is a fallback that lists no worker while the primary
// fails. Nomad's service API lists only the services Nomad registers
// itself (provider "nomad"): for a job whose workers register in Consul,
// as the planner's do, it answers an empty list while Consul is down, and
// printing that would drop every worker from horovodrun.
var errFallbackEmpty = errors.New("the fallback lists no workers (Nomad's catalog holds only provider \"nomad\" services)")

// writeFiles updates the hosts file (keeping hosts printed before, so a
// late ssh to one still resolves) and replaces the discovered file.
func (d *Discovery) writeFiles(hosts map[string]drain.Host, draining []string) error {
	addrs := map[string]string{}
	if old, err := readHostsFile(d.Task.HostsFile); err == nil {
		addrs = old
	}
	for name, h := range hosts {
		addrs[name] = h.Address
	}
	if err := taskfile.WriteJSON(d.Task.HostsFile, addrs); err != nil {
		return err
	}
	at := d.now().UTC()
	// A host listed before keeps the time it was first listed.
	before, _ := readDiscovered(d.Task.DiscoveredFile)
	since := map[string]time.Time{}
	for name, h := range hosts {
		since[name] = at
		if old, ok := before.Hosts[name]; ok && old.AllocID == h.AllocID && !before.Since[name].IsZero() {
			since[name] = before.Since[name]
		}
	}
	return taskfile.WriteJSON(d.Task.DiscoveredFile, drain.Discovered{
		Updated:  at,
		Hosts:    hosts,
		Draining: draining,
		Since:    since,
	})
}

// nomadAllocInServiceID finds the allocation ID in the ID Nomad gives a
// service it registers in Consul: _nomad-task-<alloc id>-<group|task>-...
var nomadAllocInServiceID = regexp.MustCompile(`^_nomad-task-([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-`)

// AllocIDFromServiceID returns the allocation of a Nomad-registered
// Consul service instance, or "".
func AllocIDFromServiceID(id string) string {
	if m := nomadAllocInServiceID.FindStringSubmatch(id); m != nil {
		return m[1]
	}
	return ""
}

func hostPort(host string, port int) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + strconv.Itoa(port)
	}
	return host + ":" + strconv.Itoa(port)
}
