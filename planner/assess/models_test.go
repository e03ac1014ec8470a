package assess

import (
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A job's reports carry the GPU model it ran on; the first report after a
// move to another model straddles it (the rescale, the restart) and is no
// observation, as after a change of world size.
func TestThroughputs_ByModel(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	rep := func(i, ws int, sps float64, model string) structs.ProgressReport {
		return structs.ProgressReport{Time: t0.Add(time.Duration(i) * time.Minute), WorldSize: ws, SamplesPerSec: f64(sps), GPUModel: model}
	}
	got := Throughputs([]structs.ProgressReport{
		rep(0, 2, 100, "V100"), rep(1, 2, 102, "V100"),
		rep(2, 2, 150, "A100"), // first on A100: skipped
		rep(3, 2, 300, "A100"),
	})
	must.Eq(t, []Observation{{2, 100, 0, "V100"}, {2, 102, 0, "V100"}, {2, 300, 0, "A100"}}, got)
}

// The speedup table is fitted on one model's observations: the model the
// job runs on once it has two counts there, else the model measured at
// the most counts; records without models are read whole.
func TestFitModel(t *testing.T) {
	obs := []Observation{{1, 100, 0, "V100"}, {2, 190, 0, "V100"}, {2, 500, 0, "A100"}}
	must.Eq(t, "V100", FitModel(obs, "A100"), must.Sprint("A100 has one count: V100's two make the table"))
	obs = append(obs, Observation{4, 900, 0, "A100"})
	must.Eq(t, "A100", FitModel(obs, "A100"))
	must.Eq(t, "A100", FitModel(obs, "T4"), must.Sprint("T4 unmeasured: the first of the models measured at the most counts"))
	must.Eq(t, "V100", FitModel(nil, "V100"))
	old := []Observation{{1, 100, 0, ""}, {2, 190, 0, ""}}
	must.Eq(t, "V100", FitModel(old, "V100"))
	must.Eq(t, old, OfModel(old, "V100"), must.Sprint("observations of no model are all the job's"))
	must.Eq(t, []Observation{{2, 500, 0, "A100"}, {4, 900, 0, "A100"}}, OfModel(obs, "A100"))
}

// The speed per GPU of each model is read through the job's speedup
// table, so a job measured at 2 V100s and 4 A100s compares one GPU of
// each; bad observations are left out.
func TestPerGPU(t *testing.T) {
	speedup := []float64{1, 1.8, 2.5, 3}
	obs := []Observation{
		{2, 180, 0, "V100"}, {2, 190, 0, "V100"}, {2, 170, 0, "V100"},
		{4, 900, 0, "A100"},
		{0, 50, 0, "T4"}, {1, math.NaN(), 0, "T4"}, {1, 50, 0, ""},
	}
	got := PerGPU(obs, speedup)
	must.Eq(t, map[string]Rate{"V100": {PerGPU: 100, Measured: 2, N: 3}, "A100": {PerGPU: 300, Measured: 4, N: 1}}, got)
	must.Eq(t, map[string]Rate{"A100": {PerGPU: 225, Measured: 4, N: 1}}, PerGPU(obs[3:4], nil), must.Sprint("linear where the table is unknown"))

	must.Eq(t, []float64{300, 540, 750, 900, 900}, Table(300, speedup, 5), must.Sprint("its last entry beyond the table"))
	must.Eq(t, []float64{2, 4, 6}, Table(2, nil, 3))
	must.Nil(t, Table(math.NaN(), nil, 3))
	must.Nil(t, Table(1, nil, 0))
	must.Len(t, MaxSpeedupTable, Table(1, nil, 1<<20))
}

// A model the job has not run on is estimated from the most recent model
// it has that has a ratio to it; none: unknown.
func TestBootstrap(t *testing.T) {
	ratios := map[[2]string]float64{{"V100", "A100"}: 3, {"T4", "A100"}: 5, {"V100", "H100"}: math.NaN()}
	ratio := func(from, to string) (float64, bool) { r, ok := ratios[[2]string{from, to}]; return r, ok }
	rates := map[string]float64{"V100": 100, "T4": 50}
	got, from, ok := Bootstrap(rates, []string{"T4", "V100"}, "A100", ratio)
	must.True(t, ok)
	must.Eq(t, 250.0, got)
	must.Eq(t, "T4", from)
	got, from, ok = Bootstrap(rates, []string{"V100", "T4"}, "A100", ratio)
	must.True(t, ok)
	must.Eq(t, 300.0, got)
	must.Eq(t, "V100", from)
	_, _, ok = Bootstrap(rates, []string{"V100", "T4"}, "H100", ratio)
	must.False(t, ok, must.Sprint("a NaN ratio is none"))
	_, _, ok = Bootstrap(rates, []string{"V100"}, "L4", ratio)
	must.False(t, ok)
}

// A model the job was measured on at two counts or more has a step-time
// fit of its own: its speed per GPU is the fit's one-GPU throughput and
// its table its own Amdahl curve, whatever the job's table (fitted on
// another model) says.
func TestPerGPU_OwnFit(t *testing.T) {
	var obs []Observation
	for _, o := range observe(300, 0.2, []int{1, 2, 4}, 5, 0, 3) {
		o.Model = "A100"
		obs = append(obs, o)
	}
	obs = append(obs, Observation{2, 200, 0, "V100"})
	linear := []float64{1, 2, 3, 4}
	got := PerGPU(obs, linear)
	a := got["A100"]
	must.True(t, a.Fitted)
	must.Less(t, 1e-6, math.Abs(a.PerGPU-300))
	must.Less(t, 1e-6, math.Abs(a.Serial-0.2))
	must.False(t, got["V100"].Fitted)
	must.Eq(t, 100.0, got["V100"].PerGPU)

	tab := ModelTable(a.PerGPU, a.Fitted, a.Serial, linear, 4)
	must.Less(t, 1e-6, math.Abs(tab[3]-300*4/(1+0.2*3)), must.Sprint("its own curve, not the linear table"))
	must.Eq(t, []float64{100, 200, 300, 400}, ModelTable(100, false, 0, linear, 4))
	must.Eq(t, []float64{100, 200}, ModelTable(100, true, math.NaN(), nil, 2), must.Sprint("a bad fit is none"))
}
