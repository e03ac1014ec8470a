//go:build e2e

package e2e

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// The same job under both launchers, grown from 2 to 3 workers while it
// trains: the time from the grow to the first step trained with the new
// world size, in place (horovod) and by restart (torchrun), and their ratio,
// from one run of each. The figure is logged; the test checks only that
// both launchers grow.
func TestHorovod_GrowLatencyInPlaceVersusRestart(t *testing.T) {
	venvBin(t)
	h := startHorovodLab(t, horovodConfig(t))
	latency := map[string]time.Duration{}
	afterDiscovery := map[string]time.Duration{}
	for _, launcher := range []string{"horovod", "torchrun"} {
		job, progress, stop := h.runningJob(t, "bench-"+launcher, 2, launcher)
		id := *job.ID
		// Let training settle at world size 2.
		settled := readProgress(t, progress)
		waitUntil(t, 2*time.Minute, func() error {
			recs := readProgress(t, progress)
			if recs[len(recs)-1].Step < settled[len(settled)-1].Step+10 {
				return errorf("waiting for 10 steps at world size 2")
			}
			return nil
		})

		start := time.Now()
		_, err := grow(context.Background(), h.nomad, id, "worker", 1)
		must.NoError(t, err)
		// Grow returns once the new worker runs and discovery lists it:
		// up to here both launchers wait for the same things.
		discovered := time.Now()
		rec := waitWorldSize(t, progress, 3, 5*time.Minute)
		at := time.Unix(0, int64(rec.Time*float64(time.Second)))
		latency[launcher] = at.Sub(start)
		afterDiscovery[launcher] = at.Sub(discovered)
		t.Logf("%s: grow 2 -> 3 workers: first step at world size 3 (step %d) %.2fs after the grow, %.2fs after discovery listed the new worker",
			launcher, rec.Step, latency[launcher].Seconds(), afterDiscovery[launcher].Seconds())
		h.stopTraining(t, id, stop)
	}
	ratio := latency["torchrun"].Seconds() / latency["horovod"].Seconds()
	t.Logf("grow latency: in place (horovod) %.2fs, restart (torchrun) %.2fs, restart/in-place = %.2f",
		latency["horovod"].Seconds(), latency["torchrun"].Seconds(), ratio)
	t.Logf("after discovery: in place (horovod) %.2fs, restart (torchrun) %.2fs, restart/in-place = %.2f",
		afterDiscovery["horovod"].Seconds(), afterDiscovery["torchrun"].Seconds(),
		afterDiscovery["torchrun"].Seconds()/afterDiscovery["horovod"].Seconds())
	must.False(t, math.IsNaN(ratio))
}
