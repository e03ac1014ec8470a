package elasticflow_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// The planner's qoe under ElasticFlow's job model: a job alone grows to
// its largest power of two that still speeds it up (bert at batch 64: 8
// GPUs) and finishes after its iterations over the table's rate there; a
// job that cannot meet its deadline beside the admitted ones is declined,
// as the planner's admission in reject mode refuses it (it never runs:
// missed); one that comes when there is room again is admitted and met.
// (bert scales little from 4 GPUs to 8: the deadlines are 5% past the 8-GPU
// time, which 4 GPUs each would miss.)
func TestRun_QoEAdmitsAndGrows(t *testing.T) {
	tp := throughputs(t)
	spec := elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}
	eight := tp.Rate("bert", 64, 8)
	iters := int64(math.Floor(1000 * eight)) // 1,000 s on 8 GPUs
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+
		"a,0,"+strconv.FormatInt(iters, 10)+",bert,1050,64,1,10\n"+
		"b,0,"+strconv.FormatInt(iters, 10)+",bert,1050,64,1,10\n"+
		"c,1200,"+strconv.FormatInt(iters, 10)+",bert,2250,64,1,10\n"+
		"d,1200,"+strconv.FormatInt(2*iters, 10)+",bert,3199,64,1,10\n"), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: spec, Throughputs: tp, Policy: elasticflow.QoEName})
	must.NoError(t, err)
	at8 := int64(math.Ceil(float64(iters) / eight))
	must.Eq(t, []elasticflow.JobResult{
		{ID: "a", Finish: at8, Met: true},
		{ID: "b", Finish: -1, Met: false},
		{ID: "c", Finish: 1200 + at8, Met: true},
		{ID: "d", Finish: -1, Met: false},
	}, r.Jobs)
	// d needs 2,000 s on 8 GPUs and has 1,999: no scheduler meets it.
	must.Eq(t, 3, r.Possible)
	must.Eq(t, 2, r.Met)
}

// Rounding qoe's plan down to powers of two leaves GPUs idle (three bert
// jobs on 8 GPUs: 3, 3 and 2 become 2, 2 and 2); they go to the jobs it
// rounded down, earliest deadline first, each taking the next power of
// two where it fits: a runs on 4 GPUs and finishes after its iterations
// over the 4-GPU rate, and b and c, which take a's GPUs when it is done,
// finish before the 2 GPUs each would have taken them.
func TestRun_QoERoundsUpIntoIdleGPUs(t *testing.T) {
	tp := throughputs(t)
	spec := elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+
		"a,0,20000,bert,4000,64,1,10\n"+
		"b,0,20000,bert,4500,64,1,10\n"+
		"c,0,20000,bert,5000,64,1,10\n"), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: spec, Throughputs: tp, Policy: elasticflow.QoEName})
	must.NoError(t, err)
	at4 := int64(math.Ceil(20000 / tp.Rate("bert", 64, 4)))
	at2 := int64(math.Ceil(20000 / tp.Rate("bert", 64, 2)))
	must.Eq(t, "a", r.Jobs[0].ID)
	must.Eq(t, at4, r.Jobs[0].Finish)
	for _, j := range r.Jobs {
		must.True(t, j.Met, must.Sprint(j.ID))
		must.Less(t, at2, j.Finish, must.Sprint(j.ID))
	}
}
