package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// PublishedSystems are the systems of Published, in the order to print
// them.
var PublishedSystems = []string{"Pollux", "Optimus+Oracle", "Tiresias"}

// published is the average JCT in seconds that the Pollux paper (Qiao et
// al., OSDI'21) reports from its simulator for workload-1..6.csv on 16 nodes
// x 4 GPUs with 60 s rounds, by the folder of the trace: workloads (1.0x
// load) and workloads-0.5, -1.5, -2.0 (traces/README.md; the artifact's
// simulator/results-jobload/*/summary.json, rounded).
var published = map[string]map[string][6]float64{
	"workloads-0.5": {
		"Pollux":         {1060, 1826, 1311, 1498, 977, 1288},
		"Optimus+Oracle": {1310, 3125, 1987, 2174, 1325, 1958},
		"Tiresias":       {1451, 2333, 1870, 1947, 1425, 1827},
	},
	"workloads": {
		"Pollux":         {2089, 3323, 2189, 2721, 2674, 2446},
		"Optimus+Oracle": {4087, 6914, 3944, 5968, 5656, 5302},
		"Tiresias":       {2474, 5145, 3876, 3280, 3501, 3470},
	},
	"workloads-1.5": {
		"Pollux":         {3856, 3381, 3300, 3903, 4007, 3474},
		"Optimus+Oracle": {7674, 6678, 5684, 7684, 7900, 7500},
		"Tiresias":       {5520, 6334, 6562, 5577, 6832, 5830},
	},
	"workloads-2.0": {
		"Pollux":         {6186, 4191, 5132, 5262, 6591, 5105},
		"Optimus+Oracle": {10807, 8515, 8363, 10313, 11830, 9767},
		"Tiresias":       {10138, 8656, 10728, 9665, 12098, 10255},
	},
}

// Published returns the published average JCTs for trace, by system, or
// nil if there are none: only a Pollux workload-1..6.csv in a folder named
// "workloads" (1.0x load) or "workloads-0.5", "-1.5", "-2.0" has them.
func Published(t *Trace) map[string]float64 {
	if t.Format != FormatPollux {
		return nil
	}
	bySystem, ok := published[filepath.Base(filepath.Dir(t.Path))]
	if !ok {
		return nil
	}
	n, ok := strings.CutPrefix(t.Name, "workload-")
	if !ok || len(n) != 1 || n[0] < '1' || n[0] > '6' {
		return nil
	}
	out := make(map[string]float64, len(bySystem))
	for sys, v := range bySystem {
		out[sys] = v[n[0]-'1']
	}
	return out
}

// PublishedPorts are the policies compared job by job with a published
// system (PublishedFit): tiresias is a port of the Pollux simulator's
// Tiresias; goodput and goodput-jct stand beside Pollux.
var PublishedPorts = map[string]string{"tiresias": "Tiresias", "goodput": "Pollux", "goodput-jct": "Pollux"}

// publishedFiles name each system's per-job file of the artifact
// (<system>-<load>.json in pollux/published beside the workload folders),
// and publishedLoads each workload folder's load.
var (
	publishedFiles = map[string]string{"Pollux": "pollux", "Optimus+Oracle": "optimus", "Tiresias": "tiresias"}
	publishedLoads = map[string]string{"workloads-0.5": "0.5", "workloads": "1.0", "workloads-1.5": "1.5", "workloads-2.0": "2.0"}
)

// PublishedJCTs returns the per-job JCTs in seconds, by job name, that the
// Pollux artifact's simulator reports for system on trace t, read from
// pollux/published/<system>-<load>.json beside the trace's folder (its
// "jcts" object, by workload). It returns nil and no error where t has no
// published figures or the file is not there.
func PublishedJCTs(t *Trace, system string) (map[string]float64, error) {
	file, ok := publishedFiles[system]
	if !ok || Published(t) == nil {
		return nil, nil
	}
	dir := filepath.Dir(t.Path)
	path := filepath.Join(filepath.Dir(dir), "published", file+"-"+publishedLoads[filepath.Base(dir)]+".json")
	raw, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("failed to read the published JCTs: %w", err)
	}
	var pub struct {
		JCTs map[string]map[string]float64 `json:"jcts"`
	}
	if err := json.Unmarshal(raw, &pub); err != nil {
		return nil, fmt.Errorf("failed to read the published JCTs: %s: %w", path, err)
	}
	return pub.JCTs[t.Name], nil
}

// PublishedFit compares a run with a published system job by job, over
// the jobs both have: each figure is the run's over the published one.
type PublishedFit struct {
	System string  `json:"system"`
	Jobs   int     `json:"jobs"`
	Mean   float64 `json:"mean_ratio"`
	Median float64 `json:"median_ratio"`
	P95    float64 `json:"p95_ratio"`
	// Same counts the jobs whose JCTs are within a second of each other.
	Same int `json:"same"`
}

// fitPublished compares jobs (the run's) with pub (PublishedJCTs); nil if
// they share no job.
func fitPublished(system string, jobs []JobJCT, pub map[string]float64) *PublishedFit {
	var ours, theirs []float64
	f := &PublishedFit{System: system}
	for _, j := range jobs {
		p, ok := pub[j.ID]
		if !ok {
			continue
		}
		ours, theirs = append(ours, j.JCT), append(theirs, p)
		if math.Abs(j.JCT-p) < 1 {
			f.Same++
		}
	}
	if len(ours) == 0 {
		return nil
	}
	f.Jobs = len(ours)
	a, b := summarize(ours), summarize(theirs)
	f.Mean, f.Median = a.Mean/b.Mean, a.Median/b.Median
	f.P95 = quantile(ours, 0.95) / quantile(theirs, 0.95) // sorted by summarize
	return f
}
