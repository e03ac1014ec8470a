//go:build e2e

package e2e

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A job with a batch block trains at the batch the planner advises
// (Pollux's co-adaptive batch size, end to end): the real example script
// under real horovodrun on 2 GPUs reports its global batch and gradient
// noise scale through the SDK; the planner, which cannot yet fit the step
// time (one per-GPU batch measured), advises exploring twice it; the
// script takes that at a commit; with two per-GPU batches measured the
// planner fits the step time and advises the goodput-best batch, which
// the script then trains at. `job status` shows the advice.
func TestPlanner_BatchFollowsAdvice(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), `
policy {
  name = "elastic-fifo"
}
`)
	progress, stop := filepath.Join(dir, "adaptive.jsonl"), filepath.Join(dir, "adaptive.stop")
	// size: the script's batch on one GPU (64 a GPU); at most 256 a GPU,
	// so on 2 GPUs no advice needs gradient accumulation (max 512).
	id := p.submit(exampleSpec(t, dir, "adaptive", gpuRange(2, 2), `
  batch {
    size        = 64
    max         = 512
    max_per_gpu = 256
  }
`, map[string]string{"TOTAL_STEPS": "100000", "STEP_SLEEP": "0.1", "SAMPLE_SLEEP": "0.0005", "PROGRESS_FILE": progress, "STOP_FILE": stop}))
	h.dumpTaskLogs(t, p.waitState(id, structs.JobRunning, 2*time.Minute).NomadJobID)
	waitWorldSize(t, progress, 2, 3*time.Minute)

	// Explored, then fitted: the script trains at the advice's batch, on
	// the GPUs it was given for.
	var advice *structs.BatchAdvice
	waitUntil(t, 3*time.Minute, func() error {
		advice = p.job(id).Batch
		recs := readProgress(t, progress)
		if advice == nil || advice.Exploring || len(recs) == 0 {
			return fmt.Errorf("advice %+v, %d steps so far", advice, len(recs))
		}
		if last := recs[len(recs)-1]; last.Batch != advice.Size || last.WorldSize != advice.GPUs {
			return fmt.Errorf("the script trains at batch %d on %d GPUs; the advice is %+v", last.Batch, last.WorldSize, advice)
		}
		return nil
	})
	must.Eq(t, 2, advice.GPUs)
	must.Eq(t, advice.Size, advice.GPUs*advice.PerGPU*advice.Accumulation)
	must.Between(t, 64, advice.Size, 512)
	must.Positive(t, advice.NoiseScale)
	must.Positive(t, advice.GoodputGain)

	// The batches the script trained at: its own (64 a GPU), the
	// exploration (twice it), then the fitted advice; never another.
	var seen []int
	for _, r := range readProgress(t, progress) {
		if len(seen) == 0 || seen[len(seen)-1] != r.Batch {
			seen = append(seen, r.Batch)
		}
	}
	t.Logf("batches trained at: %v; the advice: %+v", seen, *advice)
	must.Eq(t, []int{128, 256}, seen[:2], must.Sprintf("batches trained at: %v", seen))
	must.Eq(t, advice.Size, seen[len(seen)-1], must.Sprintf("batches trained at: %v", seen))

	out, code := p.cli("job", "status", id)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, fmt.Sprintf("= 64..512, at most 256 a GPU; advised %d on 2 GPUs (%d a GPU x 1 micro-batches)", advice.Size, advice.PerGPU))

	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
}
