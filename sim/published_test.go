package sim_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/schedulearn/schedulearn/sim"
	"github.com/shoenig/test/must"
)

// TestPublished_MatchesTheArtifact: the published averages of every load
// are the artifact's (pollux/published/<system>-<load>.json), to a second.
func TestPublished_MatchesTheArtifact(t *testing.T) {
	needTraces(t)
	files := map[string]string{"Pollux": "pollux", "Optimus+Oracle": "optimus", "Tiresias": "tiresias"}
	for dir, load := range map[string]string{"workloads-0.5": "0.5", "workloads": "1.0", "workloads-1.5": "1.5", "workloads-2.0": "2.0"} {
		for sys, file := range files {
			raw, err := os.ReadFile(filepath.Join(sharedTraces, "pollux", "published", file+"-"+load+".json"))
			must.NoError(t, err)
			var pub struct {
				Avgs map[string]float64 `json:"avgs"`
			}
			must.NoError(t, json.Unmarshal(raw, &pub))
			for i := 1; i <= 6; i++ {
				name := fmt.Sprintf("workload-%d", i)
				tr, err := sim.LoadTrace(filepath.Join(sharedTraces, "pollux", dir, name+".csv"), "", "")
				must.NoError(t, err)
				// Within a second: the 1.0x figures are the paper's, rounded there.
				must.InDelta(t, pub.Avgs[name], sim.Published(tr)[sys], 1, must.Sprintf("%s %s %s", dir, sys, name))
			}
		}
	}
}

// TestPublishedJCTs reads a workload's per-job figures beside its folder.
func TestPublishedJCTs(t *testing.T) {
	needTraces(t)
	tr, err := sim.LoadTrace(filepath.Join(sharedTraces, "pollux", "workloads-1.5", "workload-1.csv"), "", "")
	must.NoError(t, err)
	jcts, err := sim.PublishedJCTs(tr, "Tiresias")
	must.NoError(t, err)
	must.MapLen(t, len(tr.Jobs), jcts)
	none, err := sim.PublishedJCTs(tr, "nope")
	must.NoError(t, err)
	must.Nil(t, none)
}
