package planner

// Regression tests of issue 28's report findings (N7, N8) in the planner
// core: what reaches ReportProgressAdvice past the API's checks, or was
// stored before them, never makes a reply that JSON cannot hold.

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// N7: two finite reports of 2.56e-305 samples/s made the batch advice's
// gain NaN, and the reply to the report a 500 (JSON holds no NaN). The
// advice is now left out (the reply a 204), and the job's record encodes.
func TestN7_TinyThroughputAdviceEncodes(t *testing.T) {
	ctx := context.Background()
	p, st, _, now := newPlanner(t, "elastic-fifo", node("n1", 8))
	j := submit(t, p, now, parseSpec(t, `training "adaptive" {
  command = "python3"
  gpus = 1
  batch {
    size        = 8192
    max         = 16384
    max_per_gpu = 16384
  }
}`, *now))
	must.NoError(t, p.Round(ctx))
	must.Eq(t, 1, state(t, st, j.ID).GPUs())
	for _, batch := range []int{64, 128} {
		*now = now.Add(5 * time.Second)
		a, err := p.ReportProgressAdvice(ctx, j.ID, []structs.ProgressReport{{Time: *now, Step: 1,
			SamplesPerSec: f64(2.56e-305), WorldSize: 1, BatchSize: batch, NoiseScale: 1000}})
		must.NoError(t, err)
		_, err = json.Marshal(a)
		must.NoError(t, err, must.Sprintf("the reply's advice %+v", a))
	}
	_, err := json.Marshal(state(t, st, j.ID))
	must.NoError(t, err, must.Sprint("the job's record"))
}
