package sim_test

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

// copyToy copies the toy application to dir/name, keeping only the
// scalability.csv rows keep accepts.
func copyToy(t *testing.T, dir, name string, keep func(line string) bool) string {
	t.Helper()
	to := filepath.Join(dir, name)
	for _, f := range []string{"placements.csv", "scalability.csv", "validation-32.csv", "validation-256.csv", "validation-1024.csv"} {
		raw, err := os.ReadFile(filepath.Join("testdata/apps/toy", f))
		must.NoError(t, err)
		lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
		if f == "scalability.csv" {
			lines = append(lines[:1], slices.DeleteFunc(lines[1:], func(l string) bool { return !keep(l) })...)
		}
		writeFileAt(t, filepath.Join(to, f), lines...)
	}
	return to
}

// TestApp_MaxLocal: the per-GPU batch limit is placements.csv's largest, as
// Pollux's simulator takes it, however little scalability.csv measured;
// but yolov3's, which Pollux's sets to 8.
func TestApp_MaxLocal(t *testing.T) {
	dir := t.TempDir()
	small := func(l string) bool { return strings.Split(l, ",")[2] == "32" }
	a, err := sim.LoadApp(copyToy(t, dir, "toy", small))
	must.NoError(t, err)
	must.Eq(t, 128, a.MaxLocal, must.Sprint("not scalability.csv's 32"))
	needTraces(t)
	apps, err := sim.LoadApps(filepath.Join(sharedTraces, "pollux", "apps"))
	must.NoError(t, err)
	must.Eq(t, 32768, apps["ncf"].MaxLocal, must.Sprint("scalability.csv stops at 5803"))
	must.Eq(t, 8, apps["yolov3"].MaxLocal)
}

// placements is a model that records the placements it is asked about.
type placements struct {
	sim.Rigid
	seen [][]int
}

func (p *placements) Rate(placement []int, done float64) (float64, float64) {
	p.seen = append(p.seen, slices.Clone(placement))
	return p.Rigid.Rate(placement, done)
}

// TestRun_PlacementLargestFirst: a model sees its GPUs per node largest
// first, as Pollux's simulator lists them, not in node order.
func TestRun_PlacementLargestFirst(t *testing.T) {
	m := &placements{Rigid: sim.Rigid{Duration: 100, GPUs: 6}}
	a := rigid("a", 0, 1000, 2)
	b := sim.JobSpec{ID: "b", Submit: 0, GPUs: policy.GPURequest{Min: 6, Max: 6, PerWorker: 1}, Model: m}
	// fifo: a takes 2 GPUs of node 0; b gets node 1's 4 and node 0's 2.
	run(t, config(2, 4), builtin.FIFOName, a, b)
	must.Eq(t, [][]int{{4, 2}}, m.seen)
}

// TestRun_TiesInTraceOrder: jobs submitted at the same second queue in the
// trace's order, not by ID: b runs 60..160, a from the round at 180.
func TestRun_TiesInTraceOrder(t *testing.T) {
	r := run(t, config(1, 1), builtin.FIFOName, rigid("b", 10, 100, 1), rigid("a", 10, 100, 1))
	must.Eq(t, []sim.JobJCT{{ID: "b", JCT: 50 + 100}, {ID: "a", JCT: 170 + 100}}, r.JobJCTs)
}

// TestRun_WholeSeconds: with WholeSeconds, an epoch of a Pollux job ends on
// a whole second, and the job no further from its exact end than half a
// second an epoch; without, at its exact time.
func TestRun_WholeSeconds(t *testing.T) {
	a := loadToy(t)
	m := sim.NewGoodput(a, sim.BatchFixed, 256, 1)
	spec := sim.JobSpec{ID: "j", GPUs: policy.GPURequest{Min: 2, Max: 2, PerWorker: 1}, Model: m, ChargeStart: true}
	best, _ := m.Best(spec.GPUs, 4)
	cfg := config(1, 4)
	exact := run(t, cfg, builtin.FIFOName, spec)
	must.InDelta(t, best+30, exact.JCT.Mean, 1e-6*best)
	must.NotEq(t, math.Round(exact.JCT.Mean), exact.JCT.Mean, must.Sprint("the toy's end is not a whole second"))
	cfg.WholeSeconds = true
	whole := run(t, cfg, builtin.FIFOName, spec)
	must.Eq(t, math.Round(whole.JCT.Mean), whole.JCT.Mean)
	must.InDelta(t, exact.JCT.Mean, whole.JCT.Mean, 0.5*float64(a.Epochs))
}

// wholeRigid is a rigid job whose end the simulator rounds to a second.
type wholeRigid struct{ *sim.Rigid }

func (wholeRigid) WholeSeconds() bool { return true }

// TestRun_WholeSecondsAtARound: an end rounded down onto a round's time
// comes after that round, as Pollux's simulator, which plans before its
// jobs step on, sees it; one rounded up onto it comes before. b waits for
// a's GPU.
func TestRun_WholeSecondsAtARound(t *testing.T) {
	cfg := config(1, 1)
	cfg.WholeSeconds = true
	for _, tc := range []struct {
		end, bStart float64
	}{{120.3, 180}, {119.7, 120}} {
		a := sim.JobSpec{ID: "a", GPUs: policy.GPURequest{Min: 1, Max: 1, PerWorker: 1},
			Model: wholeRigid{&sim.Rigid{Duration: tc.end, GPUs: 1}}}
		r := run(t, cfg, builtin.FIFOName, a, rigid("b", 0, 60, 1))
		must.InDelta(t, 120, r.JobJCTs[0].JCT, 1e-9, must.Sprintf("a ends at %g", tc.end))
		must.Eq(t, tc.bStart+60, r.JobJCTs[1].JCT, must.Sprintf("a ends at %g", tc.end))
	}
}
