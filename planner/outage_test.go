package planner

import (
	"context"
	"net/http"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// Rounds that cannot read the cluster (the cluster view on a real Nomad
// client, against a Nomad that fails or is frozen) change no job record
// and apply nothing; a submission meanwhile is refused as unavailable and
// queues nothing. When Nomad answers again, the next round goes on from
// the records as they were.
func TestRound_ClusterOutageKeepsQueueAndResumes(t *testing.T) {
	for name, mode := range map[string]fakeagent.Mode{"failing": fakeagent.Fail, "frozen": fakeagent.Freeze} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			p, st, exec, now := newPlanner(t, "fifo", node("n1", 8))
			a := submit(t, p, now, spec(t, "a", 4, 4))
			b := submit(t, p, now, spec(t, "b", 4, 4))
			c := submit(t, p, now, spec(t, "c", 4, 4))
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"a:4", "b:4"}, exec.take())
			before, err := st.ListJobs(ctx)
			must.NoError(t, err)

			healthy := p.Cluster
			nomad := fakeagent.New(t, http.NotFoundHandler())
			nomad.Set(mode)
			client, err := nomadapi.NewClient(&nomadapi.Config{Address: nomad.URL})
			must.NoError(t, err)
			p.Cluster = &cluster.View{Nomad: client, Timeout: 100 * time.Millisecond}
			for range 3 {
				*now = now.Add(10 * time.Second)
				start := time.Now()
				must.ErrorContains(t, p.Round(ctx), "failed to read cluster")
				must.Less(t, 2*time.Second, time.Since(start), must.Sprint("a round is bounded"))
			}
			_, _, err = p.Submit(ctx, spec(t, "d", 1, 1), "", nil)
			must.ErrorIs(t, err, structs.ErrUnavailable)
			during, err := st.ListJobs(ctx)
			must.NoError(t, err)
			must.Eq(t, before, during, must.Sprint("no record lost, added or changed"))
			must.SliceEmpty(t, exec.take())

			p.Cluster = healthy
			exec.done["a"] = 0
			must.NoError(t, p.Round(ctx))
			must.Eq(t, []string{"c:4"}, exec.take())
			must.Eq(t, structs.JobComplete, state(t, st, a.ID).State)
			must.Eq(t, structs.JobRunning, state(t, st, b.ID).State)
			must.Eq(t, structs.JobRunning, state(t, st, c.ID).State)
		})
	}
}
