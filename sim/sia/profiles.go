package sia

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/sim"
)

// The facts of Sia's simulator (siasosp23/artifacts, sia-simulator/) that
// its profiles do not hold.
var (
	// restartSeconds is the checkpoint-restore delay of a job of each
	// application on every (re)allocation and move between GPU models
	// (applications.py, Application.rescale_time; 30 s for others).
	restartSeconds = map[string]float64{"cifar10": 50, "deepspeech2": 25, "bert": 120, "yolov3": 80, "imagenet": 250}
	// slowdown divides a job's simulated goodput to match Sia's testbed
	// (simulator_config.py, SLOWDOWNS; job.py, calibration_factor).
	slowdown = map[string]float64{"cifar10": 1.8, "imagenet": 1.2, "yolov3": 1.2, "bert": 1.2, "deepspeech2": 1.2}
	// maxLocal caps the per-GPU batch of an application on a GPU model
	// below its profile's largest (applications.py: deepspeech2 on rtx).
	maxLocal = map[[2]string]float64{{"deepspeech2", "rtx"}: 57}
)

// DefaultRestartSeconds is the delay of an application Sia's simulator
// names none for.
const DefaultRestartSeconds = 30

// RestartSeconds returns the checkpoint-restore delay of a job of app.
func RestartSeconds(app string) float64 {
	if s, ok := restartSeconds[app]; ok {
		return s
	}
	return DefaultRestartSeconds
}

// Slowdown returns the calibration slowdown of app (1 if Sia names none).
func Slowdown(app string) float64 {
	if s, ok := slowdown[app]; ok {
		return s
	}
	return 1
}

// Profiles are Sia's per-GPU-model job profiles: for each application
// (profiles/<app>/) and GPU model, the application's model on that GPU
// (sim.LoadAppProfile).
type Profiles struct {
	Dir string
	// Apps are by application, then GPU model.
	Apps map[string]map[string]*sim.App
	// GPUs are the GPU models every application has a profile of, sorted.
	GPUs []string
}

// maxApps bounds the applications a profiles folder may hold.
const maxApps = 256

// appDirs lists the application folders under dir: 1 to maxApps of them.
func appDirs(dir string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("failed to read profiles: %w", err)
	}
	var apps []string
	for _, e := range entries {
		if e.IsDir() {
			apps = append(apps, e.Name())
		}
	}
	if len(apps) == 0 || len(apps) > maxApps {
		return nil, fmt.Errorf("failed to read profiles: %s has %d application folders, want 1 to %d", dir, len(apps), maxApps)
	}
	return apps, nil
}

// LoadProfiles reads dir/<app>/ for every application folder, each GPU
// model's profile of gpus (nil: every model that every application has a
// placements-<model>.csv of).
func LoadProfiles(dir string, gpus []string) (*Profiles, error) {
	apps, err := appDirs(dir)
	if err != nil {
		return nil, err
	}
	if gpus == nil {
		if gpus, err = commonGPUs(dir, apps); err != nil {
			return nil, err
		}
	}
	p := &Profiles{Dir: dir, Apps: make(map[string]map[string]*sim.App, len(apps)), GPUs: slices.Sorted(slices.Values(gpus))}
	for _, app := range apps {
		p.Apps[app] = make(map[string]*sim.App, len(gpus))
		for _, gpu := range gpus {
			a, err := sim.LoadAppProfile(filepath.Join(dir, app), gpu, maxLocal[[2]string{app, gpu}])
			if err != nil {
				return nil, err
			}
			p.Apps[app][gpu] = a
		}
	}
	return p, nil
}

// commonGPUs returns the GPU models every application has a
// placements-<model>.csv of.
func commonGPUs(dir string, apps []string) ([]string, error) {
	var common []string
	for i, app := range apps {
		files, err := filepath.Glob(filepath.Join(dir, app, "placements-*.csv"))
		if err != nil {
			return nil, fmt.Errorf("failed to read profiles: %w", err)
		}
		var have []string
		for _, f := range files {
			have = append(have, strings.TrimSuffix(strings.TrimPrefix(filepath.Base(f), "placements-"), ".csv"))
		}
		if i == 0 {
			common = have
			continue
		}
		common = slices.DeleteFunc(common, func(g string) bool { return !slices.Contains(have, g) })
	}
	if len(common) == 0 {
		return nil, fmt.Errorf("failed to read profiles: no GPU model has a placements-<model>.csv in every application of %s", dir)
	}
	slices.Sort(common)
	return common, nil
}

// Known returns the GPU models the profiles have, as sim.ParseCluster
// takes them.
func (p *Profiles) Known() map[string]bool {
	k := make(map[string]bool, len(p.GPUs))
	for _, g := range p.GPUs {
		k[g] = true
	}
	return k
}

// ProfileGPUs returns the GPU models every application under dir has a
// profile of (to check a cluster against before loading them).
func ProfileGPUs(dir string) (map[string]bool, error) {
	apps, err := appDirs(dir)
	if err != nil {
		return nil, err
	}
	gpus, err := commonGPUs(dir, apps)
	if err != nil {
		return nil, err
	}
	known := make(map[string]bool, len(gpus))
	for _, g := range gpus {
		known[g] = true
	}
	return known, nil
}
