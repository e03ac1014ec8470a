//go:build e2e

package e2e

import (
	"context"
	"testing"
	"time"

	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"
	"github.com/shoenig/test/wait"

	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// The planner's view of a real lab: the simulated 8-GPU node, the GPUs a job
// the planner does not own holds counted as reserved, and the node's worker
// pool found through Consul's catalog.
func TestClusterView_Lab(t *testing.T) {
	l, nomad, _ := gpuLab(t)
	consul, err := l.ConsulClient()
	must.NoError(t, err)
	view := &cluster.View{
		Nomad:  nomad,
		Consul: consul,
		Pools:  []cluster.Pool{{Name: "lab-pool", Service: "nomad-client"}},
		Owned:  func(job string) bool { return job == "ours" },
	}

	var nodes []policy.Node
	must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool {
		nodes, err = view.Nodes(context.Background())
		return err == nil && len(nodes) == 1 && nodes[0].Pool == "lab-pool"
	}), wait.Timeout(time.Minute), wait.Gap(500*time.Millisecond)), must.Sprintf("nodes: %+v, err: %v", nodes, err))
	n := nodes[0]
	must.Eq(t, 8, n.GPUs)
	must.Eq(t, 0, n.Reserved)
	must.Eq(t, "NVIDIA A100-SXM4-40GB", n.GPUModel)
	must.Eq(t, 40960, n.GPUMemoryMiB)

	release := t.TempDir()
	register(t, nomad, gpuJob("theirs", 2, "while [ ! -e "+release+"/go ]; do sleep 0.2; done"))
	register(t, nomad, gpuJob("ours", 3, "while [ ! -e "+release+"/go ]; do sleep 0.2; done"))
	for _, job := range []string{"theirs", "ours"} {
		must.Wait(t, wait.InitialSuccess(wait.BoolFunc(func() bool { return runningAlloc(t, nomad, job) != nil }),
			wait.Timeout(time.Minute), wait.Gap(300*time.Millisecond)))
	}
	nodes, err = view.Nodes(context.Background())
	must.NoError(t, err)
	must.Eq(t, 2, nodes[0].Reserved, must.Sprint("only the job the planner does not own counts as reserved"))

	// A drained node takes no new work.
	_, err = nomad.Nodes().UpdateDrain(n.ID, &nomadapi.DrainSpec{Deadline: time.Hour}, false, nil)
	must.NoError(t, err)
	nodes, err = view.Nodes(context.Background())
	must.NoError(t, err)
	must.SliceEmpty(t, nodes)
}
