package elasticflow_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/sim/elasticflow"
)

// A job alone under EDF holds a fixed allocation (its largest count that
// the cluster has) from its arrival, so it finishes after its iterations
// over the table's throughput at that count, rounded up to a second.
func TestRun_FinishIsIterationsOverThroughput(t *testing.T) {
	tp := throughputs(t)
	cases := []struct {
		name  string
		row   string
		spec  elasticflow.Spec
		gpus  int
		model string
		batch int
	}{
		{"bert on one node of 8", "a,100,50000,bert,100000,64,1,10", elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}, 8, "bert", 64},
		{"vgg16 capped by its batch-size rule at 64", "a,0,120000,vgg16,9000,256,4,10", elasticflow.Spec{Switches: 2, NodesPerSwitch: 8, GPUsPerNode: 8}, 64, "vgg16", 256},
		{"deepspeech2 at 32 on 4 GPUs", "a,7,777,deepspeech2,9000,32,4,10", elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 4}, 4, "deepspeech2", 32},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+c.row+"\n"), "t.csv", tp)
			must.NoError(t, err)
			r, err := elasticflow.Run(tr, elasticflow.Config{Spec: c.spec, Throughputs: tp, Policy: "edf"})
			must.NoError(t, err)
			j := tr.Jobs[0]
			want := j.Submit + int64(math.Ceil(float64(j.Iterations)/tp.Rate(c.model, c.batch, c.gpus)))
			must.Eq(t, want, r.Jobs[0].Finish)
			must.Eq(t, want <= j.Deadline, r.Jobs[0].Met)
		})
	}
}

// Tiresias in ElasticFlow's simulator runs a job rigidly: its recorded
// duration on its recorded GPUs; a job that starts pays the overhead of
// utils.py's estimate_overhead, and it ends at the first event a slot or
// more after its end.
func TestRun_TiresiasIsRigid(t *testing.T) {
	tp := throughputs(t)
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+
		"a,0,100,bert,1000,64,2,600\n"+
		"b,0,100,bert,500,64,8,30\n"), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}, Throughputs: tp, Policy: "dlas-gpu"})
	must.NoError(t, err)
	// b cannot start beside a (2 + 8 > 8): a runs 600 s, ends at 600 (its
	// overhead is charged at the next event, after its end was set); b
	// starts at 600 and ends at 630, held to the event at 660.
	must.Eq(t, []elasticflow.JobResult{{ID: "a", Finish: 600, Met: true}, {ID: "b", Finish: 630, Met: false}}, r.Jobs)
	must.Eq(t, 0.5, r.Ratio)
}

func TestOverhead(t *testing.T) {
	must.Eq(t, 2+(3+1)*2, elasticflow.Overhead(64, 8, false, false))
	must.Eq(t, 7, elasticflow.Overhead(512, 8, true, true))
	must.Eq(t, 7+47+(0+1)*2, elasticflow.Overhead(512, 1, true, false))
}

func TestPow2Floor(t *testing.T) {
	for n, want := range map[int]int{-3: 0, 0: 0, 1: 1, 2: 2, 3: 2, 7: 4, 8: 8, 100: 64, 512: 512} {
		must.Eq(t, want, elasticflow.Pow2Floor(n), must.Sprint(n))
	}
}

func TestPlace_Buddy(t *testing.T) {
	spec := elasticflow.Spec{Switches: 2, NodesPerSwitch: 2, GPUsPerNode: 8} // 32 GPUs
	p, err := elasticflow.Place(spec, []int{1, 16, 0, 2, 8, 4, 1})
	must.NoError(t, err)
	// Largest first into the lowest aligned block: 16 on nodes 0-1, 8 on
	// node 2, then 4, 2, 1, 1 inside node 3, each aligned to its size.
	must.Eq(t, []elasticflow.Placement{{First: 30, Count: 1}, {First: 0, Count: 16}, {}, {First: 28, Count: 2}, {First: 16, Count: 8}, {First: 24, Count: 4}, {First: 31, Count: 1}}, p)
	for _, x := range p {
		if x.Count > 0 {
			must.Eq(t, 0, x.First%x.Count)
			if x.Count < spec.GPUsPerNode {
				must.Eq(t, x.First/spec.GPUsPerNode, (x.First+x.Count-1)/spec.GPUsPerNode, must.Sprint("a small job stays in one node"))
			}
		}
	}
	_, err = elasticflow.Place(spec, []int{16, 16, 1})
	must.ErrorContains(t, err, "failed to place 1 GPUs: 32 of 32 are taken")
	_, err = elasticflow.Place(spec, []int{3})
	must.ErrorContains(t, err, "not a power of two")
}

// Any powers of two that sum to at most the cluster fit.
func TestPlace_PowersOfTwoAlwaysFit(t *testing.T) {
	spec := elasticflow.Spec{Switches: 2, NodesPerSwitch: 4, GPUsPerNode: 8}
	for seed := range 200 {
		var counts []int
		sum := 0
		for k := seed; ; k = k*7 + 3 {
			g := 1 << (k % 6)
			if sum+g > spec.GPUs() {
				break
			}
			counts, sum = append(counts, g), sum+g
		}
		p, err := elasticflow.Place(spec, counts)
		must.NoError(t, err)
		used := make([]bool, spec.GPUs())
		for _, x := range p {
			for i := x.First; i < x.First+x.Count; i++ {
				must.False(t, used[i])
				used[i] = true
			}
		}
	}
}

// dlas-gpu steps as ElasticFlow's simulator does: arrivals within a slot
// of an event move to a slot after it, merged, while another arrival is
// pending. a starts at 0; b (at 10) and c (at 20) start together at 60,
// so they finish together, 60 s after a; d (at 100), within a slot of
// that event but the only arrival pending then, is not moved: it starts
// at 100, and finishes 100 s after a.
func TestRun_TiresiasMergesArrivalsWithinASlot(t *testing.T) {
	tp := throughputs(t)
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+
		"a,0,100,bert,5000,64,1,100\n"+
		"b,10,100,bert,5000,64,1,100\n"+
		"c,20,100,bert,5000,64,1,100\n"+
		"d,100,100,bert,5000,64,1,100\n"), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}, Throughputs: tp, Policy: "dlas-gpu"})
	must.NoError(t, err)
	a, b, c, d := r.Jobs[0].Finish, r.Jobs[1].Finish, r.Jobs[2].Finish, r.Jobs[3].Finish
	t.Logf("finishes %d %d %d %d", a, b, c, d)
	must.Eq(t, b, c)
	must.Eq(t, a+60, b)
	must.Eq(t, a+100, d)
}

// EDF steps as ElasticFlow's loop does: the next event, when it is within
// a slot of now and another event is pending (any later arrival counts:
// ElasticFlow's job events hold them all), moves to now + 60 s. a runs
// alone and ends; b comes 30 s after a's end, c much later: b starts a
// slot after a's end, not at its own submission.
func TestRun_EDFMovesAnArrivalWithinASlotWhileAnotherIsPending(t *testing.T) {
	tp := throughputs(t)
	rate := tp.Rate("bert", 64, 8)
	aEnd := int64(math.Ceil(11000 / rate))
	rows := fmt.Sprintf("a,0,11000,bert,90000,64,8,10\nb,%d,5000,bert,90000,64,8,10\nc,%d,5000,bert,90000,64,8,10\n", aEnd+30, aEnd+9000)
	tr, err := elasticflow.ParseTrace(strings.NewReader(clusterHeader+"\n"+rows), "t.csv", tp)
	must.NoError(t, err)
	r, err := elasticflow.Run(tr, elasticflow.Config{Spec: elasticflow.Spec{Switches: 1, NodesPerSwitch: 1, GPUsPerNode: 8}, Throughputs: tp, Policy: "edf"})
	must.NoError(t, err)
	must.Eq(t, aEnd, r.Jobs[0].Finish)
	must.Eq(t, aEnd+60+int64(math.Ceil(5000/rate)), r.Jobs[1].Finish)
}
