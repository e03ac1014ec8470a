// Package cluster is the planner's view of the GPU nodes: what Nomad's
// clients offer through the device plugin, what other work already holds,
// and which Consul-discovered worker pool each node is in. It turns them
// into the nodes of a policy.Snapshot.
package cluster

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	consulapi "github.com/hashicorp/consul/api"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// GPU device identity, as the schedulearn-gpu plugin (and Nomad's official
// nvidia plugin) fingerprint it.
const (
	GPUVendor = "nvidia"
	GPUType   = "gpu"
)

// Pool is a worker pool: the nodes carrying a Consul service with all the
// given tags.
type Pool struct {
	Name    string
	Service string
	Tags    []string
}

// View reads the cluster from Nomad and Consul.
type View struct {
	Nomad  *nomadapi.Client
	Consul *consulapi.Client // nil: no pools
	Pools  []Pool
	// Owned reports whether a Nomad job is one the planner manages; the
	// GPUs other jobs hold count as Reserved.
	Owned func(nomadJobID string) bool
	// Timeout bounds each dependency's part of a read (DefaultTimeout
	// when 0): Nomad's and Consul's clients have no timeout of their own,
	// and a frozen agent accepts connections and never answers.
	Timeout time.Duration
	// Now is the clock (time.Now when nil).
	Now func() time.Time

	// known is what the view last read, for Known and for the pools while
	// Consul does not answer.
	known known

	// meta caches each node's meta (Nomad's node list leaves it out),
	// read again when the node's ModifyIndex moves.
	metaMu sync.Mutex
	meta   map[string]nodeMeta
}

type nodeMeta struct {
	index uint64
	meta  map[string]string
}

// Nodes returns the GPU nodes that can take work now, ordered by ID.
// Nomad's part (nodes, allocations, meta) and Consul's (the pools) are
// each read within the timeout. When Consul fails, the pools it last
// gave are used (Known says how old they are); when Nomad fails, or
// Consul never answered, Nodes fails with a *DependencyError, which is
// structs.ErrUnavailable.
func (v *View) Nodes(ctx context.Context) ([]policy.Node, error) {
	at := v.now()
	nodes, allocs, err := v.readNomad(ctx)
	if err != nil {
		v.failed(ctx, DependencyNomad, at, err)
		return nil, &DependencyError{Dependency: DependencyNomad, Err: err}
	}
	v.known.succeeded(DependencyNomad)
	pools, poolsAt, err := v.readPools(ctx, at)
	if err != nil {
		return nil, &DependencyError{Dependency: DependencyConsul, Err: err}
	}
	owned := v.Owned
	if owned == nil {
		owned = func(string) bool { return false }
	}
	out := Build(nodes, allocs, pools, owned)
	asOf := at
	if v.Consul != nil && len(v.Pools) > 0 && poolsAt.Before(at) {
		asOf = poolsAt // pools from before Consul stopped answering
	}
	v.known.remember(out, asOf)
	return out, nil
}

// readNomad reads the nodes (with their meta) and the allocations, within
// the timeout.
func (v *View) readNomad(ctx context.Context) ([]*nomadapi.NodeListStub, []*nomadapi.AllocationListStub, error) {
	ctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	q := (&nomadapi.QueryOptions{Params: map[string]string{"resources": "true"}}).WithContext(ctx)
	nodes, _, err := v.Nomad.Nodes().List(q)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list nomad nodes: %w", err)
	}
	aq := (&nomadapi.QueryOptions{Params: map[string]string{"resources": "true", "task_states": "false"}}).WithContext(ctx)
	allocs, _, err := v.Nomad.Allocations().List(aq)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to list nomad allocations: %w", err)
	}
	if err := v.addMeta(ctx, nodes); err != nil {
		return nil, nil, err
	}
	return nodes, allocs, nil
}

// readPools reads the pools' members from Consul within the timeout, and
// remembers them; when Consul fails, it returns the members it last read
// and when, or the error if it never read them.
func (v *View) readPools(ctx context.Context, at time.Time) (map[string]string, time.Time, error) {
	rctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	pools, err := v.poolMembers(rctx)
	if err != nil {
		v.failed(ctx, DependencyConsul, at, err)
		return v.known.lastPools(err)
	}
	v.known.succeeded(DependencyConsul)
	v.known.rememberPools(pools, at)
	return pools, at, nil
}

// failed notes that a read of dep begun at at failed, unless the caller
// gave up (ctx ended: a round cut short, a request abandoned), which says
// nothing of dep.
func (v *View) failed(ctx context.Context, dep string, at time.Time, err error) {
	if ctx.Err() == nil {
		v.known.failed(dep, at, err)
	}
}

func (v *View) timeout() time.Duration {
	if v.Timeout > 0 {
		return v.Timeout
	}
	return DefaultTimeout
}

func (v *View) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

// Build is the pure part of Nodes: it keeps the ready, eligible, undrained
// nodes with healthy GPUs, counts the GPUs held by allocations of jobs the
// planner does not own as Reserved, and sets each node's pool.
func Build(nodes []*nomadapi.NodeListStub, allocs []*nomadapi.AllocationListStub, pools map[string]string, owned func(string) bool) []policy.Node {
	reserved := map[string]map[string]bool{} // node → GPU IDs held by others
	for _, a := range allocs {
		if owned(a.JobID) || a.AllocatedResources == nil || terminal(a) {
			continue
		}
		for _, task := range a.AllocatedResources.Tasks {
			for _, d := range task.Devices {
				if d.Vendor != GPUVendor || d.Type != GPUType {
					continue
				}
				if reserved[a.NodeID] == nil {
					reserved[a.NodeID] = map[string]bool{}
				}
				for _, id := range d.DeviceIDs {
					reserved[a.NodeID][id] = true
				}
			}
		}
	}

	var out []policy.Node
	for _, n := range nodes {
		if n.Status != nomadapi.NodeStatusReady || n.Drain || n.SchedulingEligibility != nomadapi.NodeSchedulingEligible || n.NodeResources == nil {
			continue
		}
		group := largestGPUGroup(n.NodeResources.Devices)
		if group == nil {
			continue
		}
		healthy := 0
		held := 0
		for _, inst := range group.Instances {
			if !inst.Healthy {
				continue
			}
			healthy++
			if reserved[n.ID][inst.ID] {
				held++
			}
		}
		if healthy == 0 {
			continue
		}
		out = append(out, policy.Node{
			ID:           n.ID,
			Name:         n.Name,
			Pool:         poolOf(pools, n),
			GPUModel:     group.Name,
			GPUMemoryMiB: memoryMiB(group),
			GPUs:         healthy,
			Reserved:     held,
			Attributes:   nodeAttributes(n),
		})
	}
	slices.SortFunc(out, func(a, b policy.Node) int { return strings.Compare(a.ID, b.ID) })
	return out
}

// largestGPUGroup is the node's GPU device group with the most instances;
// a node that mixes models is scheduled on its largest group.
func largestGPUGroup(devices []*nomadapi.NodeDeviceResource) *nomadapi.NodeDeviceResource {
	var best *nomadapi.NodeDeviceResource
	for _, d := range devices {
		if d.Vendor != GPUVendor || d.Type != GPUType {
			continue
		}
		if best == nil || len(d.Instances) > len(best.Instances) {
			best = d
		}
	}
	return best
}

// memoryMiB reads the group's "memory" attribute, in MiB.
func memoryMiB(d *nomadapi.NodeDeviceResource) int {
	a, ok := d.Attributes["memory"]
	if !ok || a.IntVal == nil {
		return 0
	}
	v := *a.IntVal
	switch strings.ToLower(a.Unit) {
	case "gib":
		v *= 1024
	case "kib":
		v /= 1024
	case "b":
		v >>= 20
	}
	return int(v)
}

func terminal(a *nomadapi.AllocationListStub) bool {
	switch a.ClientStatus {
	case nomadapi.AllocClientStatusComplete, nomadapi.AllocClientStatusFailed, nomadapi.AllocClientStatusLost:
		return true
	}
	return a.DesiredStatus == nomadapi.AllocDesiredStatusStop || a.DesiredStatus == nomadapi.AllocDesiredStatusEvict
}

// addMeta puts each ready node's meta into its attributes as
// "meta.<key>", as Nomad's constraints name them: the node list carries no
// meta, so it is read per node, once per change of the node.
func (v *View) addMeta(ctx context.Context, nodes []*nomadapi.NodeListStub) error {
	v.metaMu.Lock()
	defer v.metaMu.Unlock()
	if v.meta == nil {
		v.meta = map[string]nodeMeta{}
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if n.Status != nomadapi.NodeStatusReady {
			continue
		}
		seen[n.ID] = true
		m, ok := v.meta[n.ID]
		if !ok || m.index != n.ModifyIndex {
			node, _, err := v.Nomad.Nodes().Info(n.ID, (&nomadapi.QueryOptions{}).WithContext(ctx))
			if err != nil {
				return fmt.Errorf("failed to read nomad node %s: %w", n.Name, err)
			}
			m = nodeMeta{index: n.ModifyIndex, meta: node.Meta}
			v.meta[n.ID] = m
		}
		if len(m.meta) == 0 {
			continue
		}
		attrs := maps.Clone(n.Attributes)
		if attrs == nil {
			attrs = map[string]string{}
		}
		for k, val := range m.meta {
			attrs["meta."+k] = val
		}
		n.Attributes = attrs
	}
	for id := range v.meta {
		if !seen[id] {
			delete(v.meta, id)
		}
	}
	return nil
}

// nodeAttributes are the node facts policies can constrain on: Nomad's
// node pool and datacenter, and the node's meta as "meta.<key>".
func nodeAttributes(n *nomadapi.NodeListStub) map[string]string {
	attrs := map[string]string{"node_pool": n.NodePool, "datacenter": n.Datacenter}
	for k, v := range n.Attributes {
		if strings.HasPrefix(k, "meta.") {
			attrs[k] = v
		}
	}
	return attrs
}

// poolMembers maps node names and addresses to the pool whose Consul
// service they carry (the first pool wins when a node is in several).
func (v *View) poolMembers(ctx context.Context) (map[string]string, error) {
	if v.Consul == nil || len(v.Pools) == 0 {
		return nil, nil
	}
	members := map[string]string{}
	for _, p := range v.Pools {
		q := (&consulapi.QueryOptions{}).WithContext(ctx)
		entries, _, err := v.Consul.Health().ServiceMultipleTags(p.Service, p.Tags, true, q)
		if err != nil {
			return nil, fmt.Errorf("failed to list consul service %q for pool %q: %w", p.Service, p.Name, err)
		}
		for _, e := range entries {
			for _, key := range []string{e.Node.Node, e.Node.Address} {
				if _, taken := members[key]; !taken {
					members[key] = p.Name
				}
			}
		}
	}
	return members, nil
}

func poolOf(pools map[string]string, n *nomadapi.NodeListStub) string {
	if p, ok := pools[n.Name]; ok {
		return p
	}
	if p, ok := pools[n.Address]; ok {
		return p
	}
	return ""
}

// Departed lists the nodes that have left: down (or disconnected) in
// Nomad, or draining. It maps each node's ID to what happened to it, for
// the planner to take their GPUs from the jobs that held them.
// It reads Nomad within the timeout, and fails as Nodes does.
func (v *View) Departed(ctx context.Context) (map[string]string, error) {
	at := v.now()
	rctx, cancel := context.WithTimeout(ctx, v.timeout())
	defer cancel()
	nodes, _, err := v.Nomad.Nodes().List((&nomadapi.QueryOptions{}).WithContext(rctx))
	if err != nil {
		err = fmt.Errorf("failed to list nomad nodes: %w", err)
		v.failed(ctx, DependencyNomad, at, err)
		return nil, &DependencyError{Dependency: DependencyNomad, Err: err}
	}
	v.known.succeeded(DependencyNomad)
	return departed(nodes), nil
}

// departed is the pure part of Departed.
func departed(nodes []*nomadapi.NodeListStub) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		switch {
		case n.Status == nomadapi.NodeStatusDown, n.Status == nomadapi.NodeStatusDisconnected:
			out[n.ID] = fmt.Sprintf("node %s is %s", n.Name, n.Status)
		case n.Drain:
			out[n.ID] = fmt.Sprintf("node %s is draining", n.Name)
		}
	}
	return out
}
