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
