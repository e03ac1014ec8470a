package sia_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/schedulearn/schedulearn/sim"
	"github.com/schedulearn/schedulearn/sim/sia"
	"github.com/shoenig/test/must"
)

const profiles = "../../../shared/traces/sia/profiles"

func needProfiles(t *testing.T) {
	if _, err := os.Stat(profiles); err != nil {
		t.Skip("no Sia profiles at " + profiles)
	}
}

// TestLoadAppProfile: a GPU model's profile (columns in another order
// than Pollux's) reads as the file says: T4's is placements.csv (the same
// measurements), and one A100 steps faster than one T4.
func TestLoadAppProfile(t *testing.T) {
	needProfiles(t)
	dir := filepath.Join(profiles, "cifar10")
	plain, err := sim.LoadApp(dir)
	must.NoError(t, err)
	aws, err := sim.LoadAppProfile(dir, "aws", 0)
	must.NoError(t, err)
	a100, err := sim.LoadAppProfile(dir, "dgx-ext", 0)
	must.NoError(t, err)
	s1, y1 := plain.Throughput([]int{1}, 32)
	s2, y2 := aws.Throughput([]int{1}, 32)
	must.Eq(t, s1, s2)
	must.Eq(t, y1, y2)
	// placements-dgx-ext.csv: local_bsz,step_time,sync_time,placement = 32,0.03504...,0.000717...,1
	s3, y3 := a100.Throughput([]int{1}, 32)
	must.Between(t, 0.03504, s3, 0.03505)
	must.Between(t, 0.000717, y3, 0.000718)
	must.Eq(t, plain.Work(), a100.Work())
	ds, err := sim.LoadAppProfile(filepath.Join(profiles, "deepspeech2"), "rtx", 57)
	must.NoError(t, err)
	must.Eq(t, 57.0, ds.MaxLocal)
}

// TestLoadAppProfile_BadInput: NaN, a missing column, an unknown model
// give errors at file:line.
func TestLoadAppProfile_BadInput(t *testing.T) {
	needProfiles(t)
	for _, tc := range []struct{ file, text, want string }{
		{"placements-t4.csv", "local_bsz,step_time,sync_time,placement\n32,NaN,0.1,1\n", "placements-t4.csv:2: \"NaN\" is not a number"},
		{"placements-t4.csv", "local_bsz,step_time,placement\n32,0.1,1\n", "placements-t4.csv:1: header is"},
		{"scalability-t4.csv", "num_nodes,num_replicas,local_bsz,step_time,sync_time\n-1,2,32,0.1,0.01\n", "scalability-t4.csv:2:"},
	} {
		dir := t.TempDir()
		app := filepath.Join(dir, "cifar10")
		must.NoError(t, os.MkdirAll(app, 0o755))
		src := filepath.Join(profiles, "cifar10")
		for _, f := range []string{"placements-aws.csv", "scalability-aws.csv", "validation-128.csv", "validation-256.csv"} {
			b, err := os.ReadFile(filepath.Join(src, f))
			must.NoError(t, err)
			name := f
			if f != "validation-128.csv" && f != "validation-256.csv" {
				name = map[string]string{"placements-aws.csv": "placements-t4.csv", "scalability-aws.csv": "scalability-t4.csv"}[f]
			}
			must.NoError(t, os.WriteFile(filepath.Join(app, name), b, 0o644))
		}
		must.NoError(t, os.WriteFile(filepath.Join(app, tc.file), []byte(tc.text), 0o644))
		_, err := sim.LoadAppProfile(app, "t4", 0)
		must.ErrorContains(t, err, tc.want)
	}
	_, err := sim.LoadAppProfile(filepath.Join(profiles, "cifar10"), "../aws", 0)
	must.ErrorContains(t, err, "only letters")
}

// TestSpecs: every job of a workload is a model over the cluster's GPU
// models with its application's restart delay, and its goodput by model
// has a table per model, at most that model's GPUs long.
func TestSpecs(t *testing.T) {
	needProfiles(t)
	prof, err := sia.LoadProfiles(profiles, []string{"aws", "rtx", "dgx-ext"})
	must.NoError(t, err)
	tr, err := sia.LoadWorkload(filepath.Join(profiles, "..", "workloads", "philly", "workload-1.csv"), prof)
	must.NoError(t, err)
	specs, err := sia.Specs(tr, prof, sim.SiaCluster())
	must.NoError(t, err)
	must.Eq(t, 160, len(specs))
	perNode := map[string]int{"aws": 4, "rtx": 8, "dgx-ext": 8}
	capacity := map[string]int{"aws": 24, "rtx": 24, "dgx-ext": 16}
	for _, sp := range specs {
		must.Eq(t, sia.RestartSeconds(sp.Kind), sp.RestartDelay)
		h := sp.Model.(*sim.Hetero)
		by, _ := h.ByModel(0, sp.GPUs.Max, perNode, capacity)
		must.MapLen(t, 3, by)
		for m, tab := range by {
			must.LessEq(t, capacity[m], len(tab))
			must.Positive(t, tab[0])
		}
		if sp.Kind == "imagenet" {
			must.Greater(t, by["aws"][0], by["dgx-ext"][0], must.Sprint("an A100 is faster than a T4 for imagenet"))
		}
	}
}
