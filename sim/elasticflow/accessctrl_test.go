package elasticflow_test

import (
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

var oneNode = elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}

func runAccessCtrl(t *testing.T, spec elasticflow.Spec, rows ...string) (*elasticflow.Trace, *elasticflow.Result) {
	t.Helper()
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+strings.Join(rows, "\n")+"\n"), "t.csv", throughputs(t))
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: spec, Throughputs: throughputs(t), Policy: "ef-accessctrl"})
	must.NoError(t, err)
	return tr, r
}

// A job alone is admitted at its minimum share, then takes the spare GPUs
// level by level up to its largest count (8 for vgg16 at 64 here: the
// node), so it finishes after its iterations over the table's throughput
// on 8 GPUs; its finish is its plan's last second, which leaves its
// overhead out, as ElasticFlow's real_end_time does.
func TestAccessCtrl_LoneJobTakesTheSpareGPUs(t *testing.T) {
	tr, r := runAccessCtrl(t, oneNode, "a,30,20000,vgg16,100000,64,1,10")
	rate := throughputs(t).Rate("vgg16", 64, 8)
	must.Eq(t, tr.Jobs[0].Submit+int64(math.Ceil(20000/rate)), r.Jobs[0].Finish)
	must.True(t, r.Jobs[0].Met)
}

// A job that no allocation finishes by its deadline is declined at
// arrival, and a later arrival that would make an admitted job miss its
// deadline is declined too (admission control), while the admitted one
// keeps the GPUs it needs.
func TestAccessCtrl_Admission(t *testing.T) {
	tp := throughputs(t)
	// a needs all 8 GPUs to finish by 1100 (1,050 s on 8, over 1,300 on
	// 4); b, due 300 s after it arrives, would need 4 of them for most of
	// that time (3,690 iterations: 408 s on 2 GPUs, 250 on 4).
	iters := int64(1050 * tp.Rate("vgg16", 64, 8))
	_, r := runAccessCtrl(t, oneNode,
		"a,0,"+itoa(iters)+",vgg16,1100,64,1,10",
		"b,100,3690,vgg16,400,64,1,10",
		"c,2000,1000000,vgg16,2100,64,1,10",
		"d,3000,1000,vgg16,4000,64,1,10")
	must.Eq(t, []bool{true, false, false, true}, []bool{r.Jobs[0].Met, r.Jobs[1].Met, r.Jobs[2].Met, r.Jobs[3].Met})
	must.Eq(t, int64(-1), r.Jobs[1].Finish, must.Sprint("b was declined"))
	must.Eq(t, int64(-1), r.Jobs[2].Finish, must.Sprint("c was declined"))
	must.Eq(t, 0.5, r.Ratio)
}

func itoa(n int64) string {
	var b []byte
	if n == 0 {
		return "0"
	}
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
