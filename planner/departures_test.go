package planner

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// lossyCluster is a cluster whose nodes can go down and come back.
type lossyCluster struct {
	mu    sync.Mutex
	nodes []policy.Node
	gone  map[string]string
}

func (c *lossyCluster) Nodes(context.Context) ([]policy.Node, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []policy.Node
	for _, n := range c.nodes {
		if _, down := c.gone[n.ID]; !down {
			out = append(out, n)
		}
	}
	return out, nil
}

func (c *lossyCluster) Departed(context.Context) (map[string]string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]string{}
	for k, v := range c.gone {
		out[k] = v
	}
	return out, nil
}

func (c *lossyCluster) set(id, what string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if what == "" {
		delete(c.gone, id)
		return
	}
	c.gone[id] = what
}

// A node of a two-node job goes down: the job keeps its other node's GPUs
// (shrunk in place, not stopped), its record says which node went and why;
// when the node comes back, Elastic FIFO grows the job onto it again.
func TestRound_NodeLost(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "elastic-fifo")
	cl := &lossyCluster{nodes: []policy.Node{node("n1", 2), node("n2", 2)}, gone: map[string]string{}}
	p.Cluster = cl
	j := submit(t, p, now, spec(t, "gang", 2, 4))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, map[string]int{"n1": 2, "n2": 2}, state(t, st, j.ID).Allocation)
	exec.take()

	cl.set("n2", "node n2 is down")
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"gang:2"}, exec.take(), must.Sprint("shrunk to the node that is left, not stopped"))
	got := state(t, st, j.ID)
	must.Eq(t, structs.JobRunning, got.State)
	must.Eq(t, map[string]int{"n1": 2}, got.Allocation)
	last := got.Events[len(got.Events)-1]
	must.Eq(t, EventNodeLost, last.Type)
	must.StrContains(t, last.Message, "node n2 is down: 2 GPUs lost, 2 left; training goes on")
	must.Eq(t, "node n2 is down", got.History[len(got.History)-1].Reason)

	// Another round with the node still down changes nothing.
	must.NoError(t, p.Round(ctx))
	must.SliceEmpty(t, exec.take())

	cl.set("n2", "")
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"gang:4"}, exec.take(), must.Sprint("the node is back: the job grows onto it"))
	must.Eq(t, map[string]int{"n1": 2, "n2": 2}, state(t, st, j.ID).Allocation)
}

// A job whose only node goes is queued again, not left holding nothing.
func TestRound_NodeLostRequeues(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo")
	cl := &lossyCluster{nodes: []policy.Node{node("n1", 2)}, gone: map[string]string{}}
	p.Cluster = cl
	j := submit(t, p, now, spec(t, "solo", 2, 2))
	must.NoError(t, p.Round(ctx))
	exec.take()
	cl.set("n1", "node n1 is draining")
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"solo:0"}, exec.take())
	got := state(t, st, j.ID)
	must.Eq(t, structs.JobQueued, got.State)
	must.True(t, slices.ContainsFunc(got.Events, func(e structs.Event) bool {
		return e.Type == EventNodeLost && e.Message == "node n1 is draining: 2 GPUs lost, 0 left; the job is queued again"
	}), must.Sprint(got.Events))
}

// A job whose data hint no node of its placement matches says why in its
// history; one placed by its data says nothing of it.
func TestRound_LocalityMissSaysWhy(t *testing.T) {
	ctx := context.Background()
	holder := node("n1", 2)
	holder.Attributes = map[string]string{"meta.datasets": "imagenet"}
	p, st, _, now := newPlanner(t, "fifo", holder, node("n2", 4))
	hinted := func(name string, gpus int) *structs.Job {
		s := spec(t, name, gpus, gpus)
		s.Data = []jobspec.Data{{Name: "imagenet", Prefer: map[string]string{"meta.datasets": "imagenet"}}}
		return submit(t, p, now, s)
	}
	near := hinted("near", 2)
	far := hinted("far", 4)
	must.NoError(t, p.Round(ctx))
	gotNear, gotFar := state(t, st, near.ID), state(t, st, far.ID)
	must.Eq(t, map[string]int{"n1": 2}, gotNear.Allocation)
	must.StrNotContains(t, gotNear.History[0].Reason, "placed away")
	must.Eq(t, map[string]int{"n2": 4}, gotFar.Allocation)
	must.StrContains(t, gotFar.History[0].Reason, `data "imagenet" placed away from its data (the node that holds it had no room for the job)`)
}

// drainingCluster starts draining node n2 the moment its nodes are read:
// the race of a drain that begins within a round.
type drainingCluster struct{ lossyCluster }

func (c *drainingCluster) Nodes(ctx context.Context) ([]policy.Node, error) {
	nodes, err := c.lossyCluster.Nodes(ctx)
	c.set("n2", "node n2 is draining")
	return nodes, err
}

// A node that starts draining during a round is not released and offered
// again in that round (the job shrunk, then grown back onto the draining
// node); it is released in the next round and not used again.
func TestRound_DrainStartingMidRound(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "elastic-fifo")
	p.Cluster = &lossyCluster{nodes: []policy.Node{node("n1", 2), node("n2", 2)}, gone: map[string]string{}}
	j := submit(t, p, now, spec(t, "gang", 2, 4))
	must.NoError(t, p.Round(ctx))
	exec.take()

	dc := &drainingCluster{lossyCluster{nodes: []policy.Node{node("n1", 2), node("n2", 2)}, gone: map[string]string{}}}
	p.Cluster = dc
	must.NoError(t, p.Round(ctx))
	must.SliceEmpty(t, exec.take(), must.Sprint("nothing released and regrown within the round"))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"gang:2"}, exec.take())
	must.Eq(t, map[string]int{"n1": 2}, state(t, st, j.ID).Allocation)
}
