package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// DefaultTimeout bounds each dependency's part of a read of the cluster.
const DefaultTimeout = 4 * time.Second

// The dependencies a read of the cluster has.
const (
	DependencyNomad  = "nomad"
	DependencyConsul = "consul"
)

// DependencyError is a read of the cluster that failed because Nomad or
// Consul failed or did not answer within the timeout. It is
// structs.ErrUnavailable (the API answers 503: try again).
type DependencyError struct {
	Dependency string // DependencyNomad or DependencyConsul
	Err        error
}

func (e *DependencyError) Error() string { return e.Err.Error() }
func (e *DependencyError) Unwrap() error { return e.Err }

// Is makes a DependencyError structs.ErrUnavailable.
func (e *DependencyError) Is(target error) bool { return target == structs.ErrUnavailable }

// Reading is the nodes as the view last read them, and how old they are.
type Reading struct {
	Nodes []policy.Node
	// AsOf is when the oldest part of Nodes was read (Nomad's nodes,
	// Consul's pools).
	AsOf time.Time
	// StaleSince is when reads began to fail, zero while they succeed;
	// Stale says what fails.
	StaleSince time.Time
	Stale      string
}

// Known reads the nodes as Nodes does, and returns them with when they
// were read. When the read fails (Nomad or Consul down, or not answering
// within the timeout), it returns the nodes it last read, saying since
// when and why reads fail; it fails only when it never read any.
func (v *View) Known(ctx context.Context) (Reading, error) {
	_, err := v.Nodes(ctx)
	r, ok := v.known.reading()
	if !ok {
		if err == nil {
			err = fmt.Errorf("failed to read cluster: no reading")
		}
		return Reading{}, err
	}
	return r, nil
}

// Recent returns the nodes the view read less than maxAge ago, when
// every dependency answered then and since; ok is false otherwise (read
// them again with Nodes).
func (v *View) Recent(maxAge time.Duration) (nodes []policy.Node, ok bool) {
	r, ok := v.known.reading()
	if !ok || !r.StaleSince.IsZero() || v.now().Sub(r.AsOf) >= maxAge {
		return nil, false
	}
	return r.Nodes, true
}

// known is what a View last read, and which of its dependencies fail
// since when.
type known struct {
	mu      sync.Mutex
	nodes   []policy.Node
	asOf    time.Time
	pools   map[string]string
	poolsAt time.Time
	down    map[string]failure // by dependency
}

type failure struct {
	since time.Time
	err   error
}

func (k *known) remember(nodes []policy.Node, asOf time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if asOf.Before(k.asOf) {
		return // a slower read of older facts
	}
	k.nodes, k.asOf = nodes, asOf
}

func (k *known) rememberPools(pools map[string]string, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if at.Before(k.poolsAt) {
		return
	}
	k.pools, k.poolsAt = pools, at
}

// lastPools returns the pools last read and when, or cause when none was.
func (k *known) lastPools(cause error) (map[string]string, time.Time, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.poolsAt.IsZero() {
		return nil, time.Time{}, cause
	}
	return k.pools, k.poolsAt, nil
}

// failed notes that a read of dep begun at at failed with err; the first
// failure of an outage gives its start.
func (k *known) failed(dep string, at time.Time, err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.down == nil {
		k.down = map[string]failure{}
	}
	f, ok := k.down[dep]
	if !ok {
		f.since = at
	}
	f.err = err
	k.down[dep] = f
}

func (k *known) succeeded(dep string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.down, dep)
}

// reading is the last nodes with their staleness; ok is false when none
// were read.
func (k *known) reading() (r Reading, ok bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.asOf.IsZero() {
		return Reading{}, false
	}
	r = Reading{Nodes: slices.Clone(k.nodes), AsOf: k.asOf}
	var why []string
	for _, dep := range slices.Sorted(maps.Keys(k.down)) {
		f := k.down[dep]
		if r.StaleSince.IsZero() || f.since.Before(r.StaleSince) {
			r.StaleSince = f.since
		}
		why = append(why, f.err.Error())
	}
	r.Stale = strings.Join(why, "; ")
	return r, true
}
