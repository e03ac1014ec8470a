package sim

import (
	"path/filepath"
	"strings"
)

// PublishedSystems are the systems of Published, in the order to print
// them.
var PublishedSystems = []string{"Pollux", "Optimus+Oracle", "Tiresias"}

// published is the average JCT in seconds that the Pollux paper (Qiao et
// al., OSDI'21) reports from its simulator for workloads/workload-N.csv at
// 1.0x load on 16 nodes x 4 GPUs with 60 s rounds (traces/README.md).
var published = map[string][6]float64{
	"Pollux":         {2089, 3323, 2189, 2721, 2674, 2446},
	"Optimus+Oracle": {4087, 6914, 3944, 5968, 5656, 5302},
	"Tiresias":       {2474, 5145, 3876, 3280, 3501, 3470},
}

// Published returns the published average JCTs for trace, by system, or
// nil if there are none: only a Pollux workload-1..6.csv in a folder named
// "workloads" (1.0x load) has them.
func Published(t *Trace) map[string]float64 {
	if t.Format != FormatPollux || filepath.Base(filepath.Dir(t.Path)) != "workloads" {
		return nil
	}
	n, ok := strings.CutPrefix(t.Name, "workload-")
	if !ok || len(n) != 1 || n[0] < '1' || n[0] > '6' {
		return nil
	}
	out := make(map[string]float64, len(published))
	for sys, v := range published {
		out[sys] = v[n[0]-'1']
	}
	return out
}
