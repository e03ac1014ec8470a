package assess

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// observe returns n noisy observations at each count of gs of a job that
// follows Amdahl's law with t1 and s: multiplicative noise of relative
// standard deviation noise, seeded.
func observe(t1, s float64, gs []int, n int, noise float64, seed uint64) []Observation {
	rng := rand.New(rand.NewPCG(seed, 0))
	var obs []Observation
	for _, g := range gs {
		for range n {
			obs = append(obs, Observation{GPUs: g, Throughput: t1 * amdahl(s, g) * (1 + noise*rng.NormFloat64())})
		}
	}
	rng.Shuffle(len(obs), func(i, j int) { obs[i], obs[j] = obs[j], obs[i] })
	return obs
}

func f64(x float64) *float64 { return &x }

func TestThroughputs(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	rep := func(i int, ws int, sps *float64) structs.ProgressReport {
		return structs.ProgressReport{Time: t0.Add(time.Duration(i) * time.Minute), Step: int64(100 * i), WorldSize: ws, SamplesPerSec: sps}
	}
	h := []structs.ProgressReport{
		rep(0, 1, f64(100)),  // the first report: kept
		rep(1, 1, f64(104)),  // kept
		rep(2, 2, f64(150)),  // first at world size 2: straddles, skipped
		rep(3, 2, nil),       // no throughput
		rep(4, 2, f64(190)),  // kept
		rep(5, 0, f64(200)),  // no world size
		rep(6, 2, f64(0)),    // zero throughput
		rep(7, 2, f64(-3)),   // negative throughput
		rep(8, 4, nil),       // first at 4 (no throughput, but it marks the change)
		rep(9, 4, f64(350)),  // kept: not the first at 4
		rep(10, 2, f64(180)), // back to 2: first after a change, skipped
		rep(11, 2, f64(185)), // kept
		rep(12, 2, f64(math.NaN())),
		rep(13, 2, f64(math.Inf(1))),
	}
	got := Throughputs(h)
	want := []Observation{{1, 100, 0, ""}, {1, 104, 0, ""}, {2, 190, 0, ""}, {4, 350, 0, ""}, {2, 185, 0, ""}}
	if !slices.Equal(got, want) {
		t.Fatalf("Throughputs = %v, want %v (GPUs = world size)", got, want)
	}
	if Throughputs(nil) != nil {
		t.Fatal("Throughputs(nil) is not nil")
	}
}

func TestFitRecoversSerial(t *testing.T) {
	for _, s := range []float64{0, 0.05, 0.25, 0.5, 1} {
		pts := medians(observe(123, s, []int{1, 2, 4, 8}, 1, 0, 1))
		t1, got := fitAmdahl(pts)
		if math.Abs(got-s) > 1e-4 || math.Abs(t1-123) > 0.01 {
			t.Errorf("s = %v: fitted t1 = %v, s = %v; want 123, %v", s, t1, got, s)
		}
	}
	// Without a measurement at one GPU, T1 is extrapolated.
	pts := medians(observe(80, 0.2, []int{4, 8}, 1, 0, 1))
	if t1, s := fitAmdahl(pts); math.Abs(s-0.2) > 1e-4 || math.Abs(t1-80) > 0.01 {
		t.Errorf("from 4 and 8 GPUs: t1 = %v, s = %v; want 80, 0.2", t1, s)
	}
}

func TestChooseGPUs(t *testing.T) {
	for _, tc := range []struct {
		name      string
		s         float64
		measured  []int
		counts    Counts
		threshold float64
		want      int
		tol       float64 // on the fitted s and T1/200; 0: 0.02
	}{
		// Linear scaling: every worker pays, up to the max.
		{"linear", 0, []int{1, 2, 4}, Counts{1, 8, 1}, 0, 8, 0},
		// s = 0.25: speedups 1, 1.6, 2, 2.29: the 2nd GPU adds 0.6, the
		// 3rd 0.4 < 0.5.
		{"s=0.25", 0.25, []int{1, 2, 4}, Counts{1, 8, 1}, 0, 2, 0},
		// Same, threshold 0.35: the 3rd (0.4) pays, the 4th (0.29) not.
		{"s=0.25 threshold 0.35", 0.25, []int{1, 2, 4}, Counts{1, 8, 1}, 0.35, 3, 0},
		// s = 0.15: speedups 1, 1.739, 2.308, 2.759: gains 0.739, 0.569,
		// 0.451: the 4th does not pay.
		{"s=0.15", 0.15, []int{1, 2, 4, 8}, Counts{1, 16, 1}, 0.5, 3, 0},
		// s = 0.15 but at least 4 GPUs: the min wins.
		{"s=0.15 min 4", 0.15, []int{1, 2, 4, 8}, Counts{4, 16, 1}, 0.5, 4, 0},
		// No gain at all: the min. Near s = 1 the curve is flat in s (a 2%
		// noise moves it by 0.05), and T1 is extrapolated from 2 GPUs.
		{"flat", 1, []int{2, 4}, Counts{2, 8, 1}, 0.5, 2, 0.1},
		// Two GPUs per worker, s = 0.05: speedups at 2, 4, 6, 8 are 1.905,
		// 3.478, 4.8, 5.926; per GPU the workers add 0.787, 0.661, 0.563:
		// with threshold 0.6 the 4th worker does not pay.
		{"per_worker 2", 0.05, []int{2, 4, 8}, Counts{2, 16, 2}, 0.6, 6, 0},
		// The fit may extrapolate past what was measured.
		{"extrapolate", 0.02, []int{1, 2}, Counts{1, 6, 1}, 0.5, 6, 0},
	} {
		for seed := range uint64(5) {
			obs := observe(200, tc.s, tc.measured, 15, 0.02, seed)
			got := ChooseGPUs(obs, tc.counts, tc.threshold)
			if got.GPUs != tc.want || got.Measuring {
				t.Errorf("%s, seed %d: GPUs %d (measuring %v), want %d; fit T1 %.1f s %.3f: %s",
					tc.name, seed, got.GPUs, got.Measuring, tc.want, got.T1, got.Serial, got.Reason)
			}
			tol := tc.tol
			if tol == 0 {
				tol = 0.02
			}
			if math.Abs(got.Serial-tc.s) > tol || math.Abs(got.T1/200-1) > tol {
				t.Errorf("%s, seed %d: fit T1 %.1f s %.3f, want 200, %v", tc.name, seed, got.T1, got.Serial, tc.s)
			}
			if len(got.Speedup) != tc.counts.Max || got.Speedup[0] != 1 {
				t.Errorf("%s: speedup table %v, want %d entries from 1", tc.name, got.Speedup, tc.counts.Max)
			}
			for g := 2; g <= len(got.Speedup); g++ {
				if want := amdahl(got.Serial, g); math.Abs(got.Speedup[g-1]-want) > 1e-12 {
					t.Errorf("%s: Speedup[%d] = %v, want %v", tc.name, g-1, got.Speedup[g-1], want)
				}
			}
		}
	}
}

func TestChooseGPUsReason(t *testing.T) {
	obs := observe(100, 0.25, []int{1, 2, 4}, 1, 0, 1)
	got := ChooseGPUs(obs, Counts{Min: 1, Max: 8, PerWorker: 1}, 0)
	want := "2 GPUs: a 3rd would add 0.40x of one GPU's throughput (< 0.5; fit from 1, 2, 4 GPUs: 100, 160, 229 samples/s)"
	if got.Reason != want {
		t.Errorf("Reason\n got %q\nwant %q", got.Reason, want)
	}
	wantPts := []Point{{1, 100, 1}, {2, 160, 1}, {4, 100 * 4 / 1.75, 1}}
	if len(got.Points) != 3 {
		t.Fatalf("Points = %v, want %v", got.Points, wantPts)
	}
	for i, p := range got.Points {
		if p.GPUs != wantPts[i].GPUs || p.N != 1 || math.Abs(p.Throughput-wantPts[i].Throughput) > 1e-9 {
			t.Errorf("Points = %v, want %v", got.Points, wantPts)
		}
	}

	got = ChooseGPUs(observe(100, 0, []int{1, 2}, 1, 0, 1), Counts{Min: 1, Max: 4, PerWorker: 1}, 0)
	want = "4 GPUs, the most allowed: the 4th still adds 1.00x of one GPU's throughput (>= 0.5; fit from 1, 2 GPUs: 100, 200 samples/s); extrapolated beyond 2 GPUs"
	if got.Reason != want {
		t.Errorf("Reason\n got %q\nwant %q", got.Reason, want)
	}

	got = ChooseGPUs(observe(100, 0.05, []int{2, 4}, 1, 0, 1), Counts{Min: 2, Max: 8, PerWorker: 2}, 0.7)
	want = "4 GPUs: 2 more (GPUs 5-6) would add 0.66x of one GPU's throughput each (< 0.7; fit from 2, 4 GPUs: 190, 348 samples/s)"
	if got.Reason != want {
		t.Errorf("Reason\n got %q\nwant %q", got.Reason, want)
	}

	got = ChooseGPUs(observe(100, 0.05, []int{2, 4}, 1, 0, 1), Counts{Min: 4, Max: 4, PerWorker: 2}, 0)
	if got.GPUs != 4 || !strings.HasPrefix(got.Reason, "4 GPUs, the only count allowed (fit from 2, 4 GPUs") {
		t.Errorf("min = max = 4: GPUs %d, Reason %q", got.GPUs, got.Reason)
	}
}

func TestChooseGPUsMeasuring(t *testing.T) {
	for _, tc := range []struct {
		name   string
		obs    []Observation
		reason string
	}{
		{"none", nil, "measuring: no throughput measured yet"},
		{"one count", observe(150, 0.1, []int{2}, 9, 0.02, 3), "measuring: only 2 GPUs measured so far ("},
		{"one GPU", []Observation{{1, 150, 0, ""}}, "measuring: only 1 GPU measured so far (150 samples/s)"},
		// Unusable observations do not count as measured.
		{"bad", []Observation{{1, 150, 0, ""}, {0, 90, 0, ""}, {-1, 90, 0, ""}, {3, math.NaN(), 0, ""}, {3, 0, 0, ""}, {3, -5, 0, ""}, {3, math.Inf(1), 0, ""}}, "measuring: only 1 GPU measured so far"},
	} {
		got := ChooseGPUs(tc.obs, Counts{Min: 1, Max: 8, PerWorker: 1}, 0.5)
		if !got.Measuring || got.GPUs != 8 || got.Speedup != nil || got.T1 != 0 {
			t.Errorf("%s: %+v, want measuring at 8 GPUs with no speedup table", tc.name, got)
		}
		if !strings.HasPrefix(got.Reason, tc.reason) {
			t.Errorf("%s: Reason %q, want it to start with %q", tc.name, got.Reason, tc.reason)
		}
	}
}

// A few wild observations (a straggler, a warm-up) do not move a median.
func TestChooseGPUsOutliers(t *testing.T) {
	obs := observe(200, 0.25, []int{1, 2, 4}, 9, 0.01, 7)
	obs = append(obs, Observation{1, 2000, 0, ""}, Observation{2, 20, 0, ""}, Observation{4, 5, 0, ""}, Observation{4, 3000, 0, ""})
	got := ChooseGPUs(obs, Counts{Min: 1, Max: 8, PerWorker: 1}, 0)
	if got.GPUs != 2 || math.Abs(got.Serial-0.25) > 0.02 {
		t.Errorf("with outliers: GPUs %d, s %.3f, want 2, 0.25: %s", got.GPUs, got.Serial, got.Reason)
	}
}

func TestChooseGPUsCounts(t *testing.T) {
	obs := observe(100, 0, []int{1, 2}, 1, 0, 1)
	for _, tc := range []struct {
		counts  Counts
		want    int
		entries int
	}{
		{Counts{1, 8, 0}, 8, 8}, // per_worker 0 counts as 1
		{Counts{3, 2, 1}, 3, 3}, // max below min: min
		{Counts{0, 0, 1}, 1, 1}, // nothing given: 1
		{Counts{3, 9, 2}, 8, 8}, // multiples of 2 in [3, 9]: 4, 6, 8
		{Counts{1, 7, 4}, 4, 4}, // only 4
		{Counts{5, 5, 1}, 5, 5}, // fixed
	} {
		got := ChooseGPUs(obs, tc.counts, 0)
		if got.GPUs != tc.want || len(got.Speedup) != tc.entries {
			t.Errorf("%+v: GPUs %d, %d speedup entries; want %d, %d", tc.counts, got.GPUs, len(got.Speedup), tc.want, tc.entries)
		}
	}
	// A threshold above 1 never pays: the smallest allowed count.
	if got := ChooseGPUs(obs, Counts{2, 8, 2}, 1.5); got.GPUs != 2 {
		t.Errorf("threshold 1.5: GPUs %d, want 2", got.GPUs)
	}
	// threshold 0 and NaN mean the default.
	o := observe(100, 0.25, []int{1, 2, 4}, 1, 0, 1)
	for _, th := range []float64{0, -1, math.NaN()} {
		if got := ChooseGPUs(o, Counts{1, 8, 1}, th); got.GPUs != 2 {
			t.Errorf("threshold %v: GPUs %d, want 2 (the default 0.5)", th, got.GPUs)
		}
	}
}

// End to end from a progress history: per_worker 2, measured at world
// sizes 1, 2 and 4 with the reports straddling each rescale far off.
func TestChooseGPUsFromHistory(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 0))
	t0 := time.Unix(1_000_000, 0)
	var h []structs.ProgressReport
	step := int64(0)
	for _, ws := range []int{1, 2, 4} {
		for k := range 20 {
			sps := 300 * amdahl(0.05, 2*ws) * (1 + 0.02*rng.NormFloat64())
			if k == 0 {
				sps *= 0.3 // straddles the rescale
			}
			step += 100
			h = append(h, structs.ProgressReport{Time: t0.Add(time.Duration(len(h)) * time.Minute), Step: step, SamplesPerSec: f64(sps), WorldSize: 2 * ws})
		}
	}
	obs := Throughputs(h)
	if len(obs) != 58 {
		t.Fatalf("%d observations, want 58 (60 reports less 2 straddling)", len(obs))
	}
	got := ChooseGPUs(obs, Counts{Min: 2, Max: 16, PerWorker: 2}, 0.6)
	if got.GPUs != 6 {
		t.Errorf("GPUs %d, want 6: %s", got.GPUs, got.Reason)
	}
}
