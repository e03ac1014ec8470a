//go:build e2e

package e2e

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// A training job run by the planner reports its progress through the
// Python SDK with the per-job token the executor put in its environment
// (through horovodrun onto the worker that is rank 0): the job's record
// holds the step, throughput, loss, the example's "accuracy" and the world
// size, growing as Elastic FIFO grows the job, and `job status` shows it.
func TestPlanner_ProgressReports(t *testing.T) {
	h := startHorovodLab(t, horovodConfig(t))
	dir := t.TempDir()
	p := startPlanner(t, h.lab, filepath.Join(dir, "data"), `
policy {
  name = "elastic-fifo"
}
`)
	progress, stop := filepath.Join(dir, "p.jsonl"), filepath.Join(dir, "p.stop")
	id := p.submit(trainingSpec(t, dir, "p", 1, 2, progress, stop))
	p.waitState(id, structs.JobRunning, 2*time.Minute)

	var pr *structs.Progress
	waitUntil(t, 3*time.Minute, func() error {
		pr = p.job(id).Progress
		switch {
		case pr == nil:
			return errorf("no progress reported yet")
		case pr.WorldSize != 2:
			return errorf("reported world size %d, want 2 (the job grown to its max)", pr.WorldSize)
		}
		return nil
	})
	must.Positive(t, pr.Step)
	must.NotNil(t, pr.SamplesPerSec)
	must.Positive(t, *pr.SamplesPerSec)
	must.NotNil(t, pr.Loss)
	must.MapContainsKey(t, pr.Metrics, "accuracy")
	must.SliceNotEmpty(t, pr.History)

	out, code := p.cli("job", "status", id)
	must.Zero(t, code, must.Sprint(out))
	must.StrContains(t, out, "Progress     = step ")

	touch(t, stop)
	done := p.waitState(id, structs.JobComplete, 3*time.Minute)
	must.Eq(t, 0, *done.ExitCode)
	must.GreaterEq(t, pr.Step, done.Progress.Step)
}
