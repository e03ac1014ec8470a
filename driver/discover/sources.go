package discover

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/driver/taskfile"
	"github.com/schedulearn/schedulearn/driver/workeragent"
	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/internal/jobsecret"
)

// queryTimeout bounds each call discovery makes: horovodrun runs it every
// second.
const queryTimeout = 5 * time.Second

// probeTimeout bounds the probe of a worker whose check has not passed.
const probeTimeout = 300 * time.Millisecond

// Consul lists the instances of a service in Consul whose checks pass, and
// those whose checks do not pass yet but whose agent answers a probe. A
// passing instance whose node has failed since it was registered is
// probed too, and left out if nothing listens at its address
// (nodeFailedSince).
type Consul struct {
	Client *consulapi.Client
	// Probe says whether the agent at addr answers now (default: a
	// workeragent.Probe within probeTimeout). A new worker's check first
	// runs at a random moment within its interval (Consul staggers checks),
	// up to 2s after its agent listens; the probe lists it at once. A worker
	// whose check failed is probed too, and left out unless it answers.
	Probe func(ctx context.Context, addr string) error
}

// NewConsul returns a Consul source for the task file's address and token.
func NewConsul(t *taskfile.Task) (*Consul, error) {
	c, err := consulapi.NewClient(&consulapi.Config{Address: t.ConsulAddress, Token: t.ConsulToken})
	if err != nil {
		return nil, fmt.Errorf("failed to create consul client: %w", err)
	}
	return &Consul{Client: c}, nil
}

// Workers implements Source: it lists service's instances in Consul's
// health API within queryTimeout, keeping those whose checks pass and
// probing the rest (and those on a node failed since they registered)
// concurrently, as the type's comment says.
func (c *Consul) Workers(ctx context.Context, service string) ([]Worker, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	entries, _, err := c.Client.Health().Service(service, "", false, (&consulapi.QueryOptions{}).WithContext(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to query consul for %s: %w", service, err)
	}
	out := make([]Worker, len(entries))
	live := make([]bool, len(entries))
	var wg sync.WaitGroup
	for i, e := range entries {
		s := e.Service
		alloc := s.Meta["alloc_id"]
		if alloc == "" {
			alloc = AllocIDFromServiceID(s.ID)
		}
		addr := s.Address
		if addr == "" && e.Node != nil {
			addr = e.Node.Address
		}
		out[i] = Worker{AllocID: alloc, Address: hostPort(addr, s.Port)}
		passing := e.Checks.AggregatedStatus() == consulapi.HealthPassing
		if passing && !nodeFailedSince(e) {
			live[i] = true
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := c.probe(ctx, out[i].Address)
			// A passing worker is left out only when nothing listens at
			// its address any more (a slow agent is not gone).
			live[i] = err == nil || passing && !errors.Is(err, syscall.ECONNREFUSED)
		}()
	}
	wg.Wait()
	var workers []Worker
	for i, w := range out {
		if live[i] {
			workers = append(workers, w)
		}
	}
	return workers, nil
}

// nodeFailedSince says whether the node of a service instance has failed
// (its serfHealth check changed) since the instance was registered: a
// host back from a partition, whose agent rejoins before it syncs what
// happened meanwhile. Its worker, fenced while cut off, may be gone while
// the catalog still lists it as passing, so it is probed, and left out
// if its address refuses connections.
func nodeFailedSince(e *consulapi.ServiceEntry) bool {
	for _, ch := range e.Checks {
		if ch.CheckID == serfHealth && ch.ServiceID == "" && ch.ModifyIndex > e.Service.ModifyIndex {
			return true
		}
	}
	return false
}

// serfHealth is the check Consul's servers keep for each node's agent.
const serfHealth = "serfHealth"

func (c *Consul) probe(ctx context.Context, addr string) error {
	if c.Probe != nil {
		return c.Probe(ctx, addr)
	}
	return workeragent.Probe(ctx, addr, probeTimeout)
}

// Nomad lists a service's instances in Nomad's native service discovery,
// and reads the job's drain variable.
type Nomad struct {
	Client    *nomadapi.Client
	Namespace string
	JobID     string
	// Group is the launcher's group, whose path holds the drain variable.
	Group string
}

// NewNomad returns a Nomad source for the task file's address and token.
func NewNomad(t *taskfile.Task) (*Nomad, error) {
	c, err := nomadapi.NewClient(&nomadapi.Config{Address: t.NomadAddress, SecretID: t.NomadToken, Namespace: t.Namespace})
	if err != nil {
		return nil, fmt.Errorf("failed to create nomad client: %w", err)
	}
	return &Nomad{Client: c, Namespace: t.Namespace, JobID: t.JobID, Group: t.Group}, nil
}

func (n *Nomad) query(ctx context.Context) *nomadapi.QueryOptions {
	return (&nomadapi.QueryOptions{Namespace: n.Namespace}).WithContext(ctx)
}

// Workers implements Source: every registration of service in the job's
// namespace, as Nomad lists it within queryTimeout (none is probed or
// left out).
func (n *Nomad) Workers(ctx context.Context, service string) ([]Worker, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	regs, _, err := n.Client.Services().Get(service, n.query(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to query nomad for %s: %w", service, err)
	}
	var out []Worker
	for _, r := range regs {
		out = append(out, Worker{AllocID: r.AllocID, Address: hostPort(r.Address, r.Port)})
	}
	return out, nil
}

// Reachable reads the job's secret variable, which every task of the job
// may read with its workload identity: nil when the Nomad servers answer
// (with the variable, or without it once the job has ended).
func (n *Nomad) Reachable(ctx context.Context) error {
	path := jobsecret.SecretVariable(n.JobID)
	if _, _, err := n.Client.Variables().Peek(path, n.query(ctx)); err != nil {
		return fmt.Errorf("failed to read variable %s: %w", path, err)
	}
	return nil
}

// Draining reads the job's drain variable; a missing variable drains none.
func (n *Nomad) Draining(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	path := drain.Variable(n.JobID, n.Group)
	v, _, err := n.Client.Variables().Peek(path, n.query(ctx))
	if err != nil {
		return nil, fmt.Errorf("failed to read variable %s: %w", path, err)
	}
	if v == nil {
		return nil, nil
	}
	return drain.Parse(v.Items[drain.Item]), nil
}

// New builds the discovery for a launcher's task file: its provider first,
// and for Consul, Nomad's service API as the fallback.
func New(t *taskfile.Task) (*Discovery, error) {
	nomad, err := NewNomad(t)
	if err != nil {
		return nil, err
	}
	d := &Discovery{Task: t, Drains: nomad}
	switch t.Provider {
	case "nomad":
		d.Primary = nomad
	case "consul", "":
		consul, err := NewConsul(t)
		if err != nil {
			return nil, err
		}
		d.Primary = consul
		d.Fallback = nomad
	default:
		return nil, fmt.Errorf("failed to set up discovery: unknown provider %q", t.Provider)
	}
	return d, nil
}

// readHostsFile reads a hosts file (host -> address).
func readHostsFile(path string) (map[string]string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m := map[string]string{}
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, errors.New("corrupt hosts file")
	}
	return m, nil
}

// readDiscovered reads the discovered file an earlier run wrote.
func readDiscovered(path string) (drain.Discovered, error) {
	var d drain.Discovered
	b, err := os.ReadFile(path)
	if err != nil {
		return d, err
	}
	if err := json.Unmarshal(b, &d); err != nil {
		return d, errors.New("corrupt discovered file")
	}
	return d, nil
}
