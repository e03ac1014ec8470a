package delivery

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/boltstore"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// The tests run the Deliverer as the agent wires it: a real planner takes
// the submissions and progress reports, on a real (bolt) store, and
// nudges the Deliverer, which writes its outcomes through the planner.

// updateAttempts is how often the planner's record writes try after
// losing a race (planner.update).
const updateAttempts = 5

// testStore is the bolt store with lost races on demand.
type testStore struct {
	store.Store
	mu sync.Mutex
	// conflicts makes that many next UpdateJob calls lose a race.
	conflicts int
}

func (s *testStore) UpdateJob(ctx context.Context, j *structs.Job) error {
	s.mu.Lock()
	lose := s.conflicts > 0
	if lose {
		s.conflicts--
	}
	s.mu.Unlock()
	if lose {
		return fmt.Errorf("job %s at version %d: %w", j.ID, j.Version, store.ErrConflict)
	}
	return s.Store.UpdateJob(ctx, j)
}

type staticCluster []policy.Node

func (c staticCluster) Nodes(context.Context) ([]policy.Node, error) { return slices.Clone(c), nil }

// newPlanner is a planner with the named policy over nodes, a store in a
// temporary directory and a clock that stands still (now), and its
// delivery Deliverer (not running: see runDeliveries).
func newPlanner(t *testing.T, policyName string, nodes ...policy.Node) (*planner.Planner, *testStore, *Deliverer, *time.Time) {
	t.Helper()
	logger := hclog.NewNullLogger()
	host, err := planner.NewPolicyHost(host.Policies{Registry: host.NewRegistry(t.TempDir(), nil)}, logger, policyName, nil, 5*time.Second)
	must.NoError(t, err)
	t.Cleanup(host.Close)
	bolt, err := boltstore.Open(filepath.Join(t.TempDir(), "state.db"))
	must.NoError(t, err)
	t.Cleanup(func() { bolt.Close() })
	st := &testStore{Store: bolt}
	now := time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	p := (&planner.Planner{Store: st, Cluster: staticCluster(nodes), Policies: host, Logger: logger}).With(planner.WithClock(clock))
	w := &Deliverer{Store: st, Records: p, Logger: logger, Now: clock}
	p.Delivery = w
	return p, st, w, &now
}

func node(id string, gpus int) policy.Node {
	return policy.Node{ID: id, Name: id, GPUModel: "A100", GPUMemoryMiB: 40960, GPUs: gpus}
}

func submit(t *testing.T, p *planner.Planner, now *time.Time, s *jobspec.Spec) *structs.Job {
	t.Helper()
	*now = now.Add(time.Second)
	j, _, err := p.Submit(context.Background(), s, "", nil)
	must.NoError(t, err)
	return j
}

func state(t *testing.T, st *testStore, id string) *structs.Job {
	t.Helper()
	j, err := st.GetJob(context.Background(), id)
	must.NoError(t, err)
	return j
}
