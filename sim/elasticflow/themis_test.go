package elasticflow_test

import (
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// Themis shares the cluster by finish-time fairness, slot by slot: of two
// jobs that each want the whole node, the one that has run less is
// further behind its fair finish time and gets the node at the next slot,
// so they take turns instead of one running to completion first. Each
// needs two slots of bert at batch 64 on 8 GPUs (1327 iterations at 11.06
// per second), and its recorded duration (10000 s) plays no part.
func TestThemis_JobFurthestBehindRunsNext(t *testing.T) {
	tp := throughputs(t)
	node := elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}
	rows := "a,0,1327,bert,100000,64,8,10000\nb,0,1327,bert,100000,64,8,10000\n"
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+rows), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: node, Throughputs: tp, Policy: "themis"})
	must.NoError(t, err)
	// Slot 0: a (a tie, trace order). Slot 60: b, behind. Slot 120: even
	// again, b keeps its place and finishes at the slot's end. Then a.
	must.Eq(t, int64(240), r.Jobs[0].Finish)
	must.Eq(t, int64(180), r.Jobs[1].Finish)

	// Deadlines play no part: the same with b's twice as far.
	rows = "a,0,1327,bert,100000,64,8,10000\nb,0,1327,bert,200000,64,8,10000\n"
	tr, err = elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+rows), "t.csv", tp)
	must.NoError(t, err)
	r, err = elasticflow.Run(tr, elasticflow.Config{Spec: node, Throughputs: tp, Policy: "themis"})
	must.NoError(t, err)
	must.Eq(t, int64(240), r.Jobs[0].Finish, must.Sprint("themis ignores deadlines"))
}

// A job under Themis is done at the earlier of its recorded duration
// (counted down by the slots it runs) and its iterations at the table's
// rate (at the end of the slot they run out in, which wins when both run
// out in the same slot).
func TestThemis_TwoClocks(t *testing.T) {
	tp := throughputs(t)
	node := elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}
	cases := []struct {
		name string
		rows string
		want []int64
		met  []bool
	}{
		{"duration first, to the second", "a,5,100000,bert,1000,64,8,90\n", []int64{95}, []bool{true}},
		{"iterations first, at the slot's end", "a,5,700,bert,1000,64,8,5000\n", []int64{125}, []bool{true}},
		{"iterations and duration in the same slot: the slot's end", "a,5,10,bert,1000,64,8,50\n", []int64{65}, []bool{true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+c.rows), "t.csv", tp)
			must.NoError(t, err)
			r, err := elasticflow.Run(tr, elasticflow.Config{Spec: node, Throughputs: tp, Policy: "themis"})
			must.NoError(t, err)
			for i := range c.want {
				must.Eq(t, c.want[i], r.Jobs[i].Finish, must.Sprintf("job %d", i))
				must.Eq(t, c.met[i], r.Jobs[i].Met, must.Sprintf("job %d", i))
			}
		})
	}
}
