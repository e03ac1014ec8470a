package planner_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// The planner's deadline admission and the simulator's replay of qoe
// under ElasticFlow's job model (sim/elasticflow, which admits each
// arrival as the planner would in reject mode) decide alike: on random
// sets of jobs that arrive together on a cluster of two 8-GPU nodes (work
// and speedup from ElasticFlow's throughput tables, given to the planner
// as its estimates, as the simulator's models are), the jobs the replay
// declines are exactly the ones the planner refuses.
func TestAdmission_AgreesWithTheSimulator(t *testing.T) {
	tp, err := elasticflow.LoadThroughputs("../sim/elasticflow/testdata/throughputs_A100")
	must.NoError(t, err)
	spec := elasticflow.Spec{Switches: 1, NodesPerSwitch: 2, GPUsPerNode: 8}
	type kind struct {
		model string
		batch int
	}
	kinds := []kind{{"resnet50", 64}, {"resnet50", 128}, {"bert", 64}, {"vgg16", 64}, {"gpt2", 128}, {"inception3", 64}}
	rng := rand.New(rand.NewPCG(30, 1))
	decided, refused := 0, 0
	for c := range 40 {
		var rows []string
		type want struct {
			name           string
			work           float64
			speedup        []float64
			deadline, gpus int
		}
		var jobs []want
		for i := range 2 + rng.IntN(6) {
			k := kinds[rng.IntN(len(kinds))]
			one := tp.Rate(k.model, k.batch, 1)
			must.Positive(t, one, must.Sprintf("%s at %d", k.model, k.batch))
			alone := 600 + rng.Float64()*20000 // seconds on one GPU
			iters := int64(alone * one)
			deadline := int(alone * (0.05 + rng.Float64()*0.6))
			gpus := min(elasticflow.MaxGPUsElastic(k.model, k.batch), spec.GPUs())
			name := fmt.Sprintf("c%dj%d", c, i)
			rows = append(rows, fmt.Sprintf("%s,0,%d,%s,%d,%d,1,10", name, iters, k.model, deadline, k.batch))
			jobs = append(jobs, want{name, float64(iters) / one, elasticflow.SpeedupTable(tp, k.model, k.batch, gpus), deadline, gpus})
		}
		tr, err := elasticflow.ParseTrace(strings.NewReader("job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"+
			strings.Join(rows, "\n")+"\n"), "case.csv", tp)
		must.NoError(t, err)
		res, err := elasticflow.Run(tr, elasticflow.Config{Spec: spec, Throughputs: tp, Policy: elasticflow.QoEName})
		must.NoError(t, err)

		p, _, _, now := planner.NewTestPlanner(t, "qoe", planner.TestNode("n1", 8), planner.TestNode("n2", 8))
		p.SetQueues(quota.DefaultAdmitting(quota.AdmissionReject))
		byName := map[string]int{}
		for i, j := range jobs {
			byName[j.name] = i
		}
		p.With(planner.WithOutlooks(func(j *structs.Job) {
			if w, ok := byName[j.Spec.Name]; ok && j.Outlook == nil {
				j.Outlook = &structs.Outlook{Updated: *now, Speedup: jobs[w].speedup, Target: &structs.TargetOutlook{
					Status: structs.OutlookEstimated, RemainingWork: jobs[w].work, Reason: "known"}}
			}
		}, false))
		for i, j := range jobs {
			s := planner.ParseTestSpec(t, fmt.Sprintf(`training %q {
  command = "python3"
  gpus {
    min = 1
    max = %d
  }
  target {
    metric   = "accuracy"
    goal     = 0.9
    deadline = "%ds"
  }
}`, j.name, j.gpus, j.deadline), *now)
			_, _, err := p.Submit(context.Background(), s, "", nil)
			declined := res.Jobs[i].Finish < 0
			must.Eq(t, declined, err != nil, must.Sprintf("case %d, job %s (due in %d s, %.0f s of work on one GPU): simulator declined %t, planner: %v",
				c, j.name, j.deadline, j.work, declined, err))
			if err != nil {
				must.ErrorIs(t, err, structs.ErrDeadlineRefused)
				refused++
			}
			decided++
		}
	}
	// The cases decide both ways.
	t.Logf("%d decisions, %d refused", decided, refused)
	must.Positive(t, refused)
	must.Less(t, decided, refused)
}
