package planner

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// typedNode is node of GPU model model.
func typedNode(id, model string, gpus int) policy.Node {
	n := node(id, gpus)
	n.GPUModel = model
	return n
}

// On a cluster of two GPU models each job runs on one: the executor is
// told the model (it pins the workers to it), the record carries it and
// its model history, and a job that runs again on another model after a
// requeue says so in an event, with the start's reason.
func TestRound_GPUModels(t *testing.T) {
	ctx := context.Background()
	p, st, exec, now := newPlanner(t, "fifo", typedNode("a100", "A100", 4), typedNode("v100", "V100", 2))
	var mu sync.Mutex
	told := map[string]string{} // job name -> the model Apply saw
	exec.onApply = func(j *structs.Job) {
		mu.Lock()
		defer mu.Unlock()
		told[j.Spec.Name] = j.GPUModel
	}
	exec.infra = map[string]string{}
	p.Retries = 3
	big := submit(t, p, now, spec(t, "big", 4, 4))
	small := submit(t, p, now, spec(t, "small", 2, 2))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, []string{"big:4", "small:2"}, exec.take())
	must.Eq(t, map[string]string{"big": "A100", "small": "V100"}, told)
	s := state(t, st, small.ID)
	must.Eq(t, "V100", s.GPUModel)
	must.Eq(t, "V100", s.History[0].Model)
	must.Eq(t, []structs.ModelRun{{Model: "V100", Since: *now, Reason: s.History[0].Reason}}, s.Models)
	must.Eq(t, "A100", state(t, st, big.ID).GPUModel)

	// big ends; small's run is ended by the cluster (its node lost) and
	// it is requeued: it starts again in the same round, on the A100s,
	// the most room.
	exec.done["big"], exec.done["small"], exec.infra["small"] = 0, 1, "node lost"
	started := *now
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	delete(exec.done, "small")
	delete(exec.infra, "small")
	s = state(t, st, small.ID)
	must.Eq(t, structs.JobRunning, s.State)
	must.Eq(t, "A100", s.GPUModel)
	must.Eq(t, "A100", told["small"])
	must.SliceLen(t, 2, s.Models)
	must.Eq(t, structs.ModelRun{Model: "V100", Since: started, Until: started.Add(time.Minute), Reason: s.Models[0].Reason}, s.Models[0])
	must.Eq(t, "A100", s.Models[1].Model)
	must.True(t, s.Models[1].Until.IsZero())
	var moved []string
	for _, e := range s.Events {
		if e.Type == EventModel {
			moved = append(moved, e.Message)
		}
	}
	must.Eq(t, []string{"moved from V100 to A100: " + s.History[len(s.History)-1].Reason}, moved)
	must.StrContains(t, moved[0], "started with 2 GPUs")

	// Its end closes the run; the record keeps the history.
	exec.done["small"] = 0
	*now = now.Add(time.Minute)
	must.NoError(t, p.Round(ctx))
	s = state(t, st, small.ID)
	must.Eq(t, structs.JobComplete, s.State)
	must.Eq(t, "", s.GPUModel)
	must.Eq(t, *now, s.Models[1].Until)
}
