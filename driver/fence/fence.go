// Package fence stops a task of a training job that the Nomad servers
// no longer answer: a launcher or a worker agent on a host cut off from
// the cluster stops training before the servers take the host for lost
// and the planner runs the job elsewhere, so one job never has two
// launchers, and a host back from a partition brings no stale worker
// back into the job.
package fence

import (
	"context"
	"fmt"
	"time"
)

// Probe asks the Nomad servers something only they answer (the job's
// secret variable: discover.Nomad.Reachable); an error means they could
// not be reached (or no longer take the task's token).
type Probe func(ctx context.Context) error

// FenceEvery is how often a fence probes; each probe gets probeTimeout
// to answer (a loaded server answers late, not never).
const (
	FenceEvery   = time.Second
	probeTimeout = 2 * time.Second
)

// New returns a fence that fires (sends why, once) once probe has failed
// for longer than after: a launcher cut off from the servers stops
// training before they take its node for lost (after Nomad's heartbeat
// grace, 10 s by default) and the planner runs the job elsewhere, so one
// job never has two launchers.
func New(probe Probe, after time.Duration, now func() time.Time) func(ctx context.Context) <-chan string {
	return func(ctx context.Context) <-chan string {
		out := make(chan string, 1)
		go func() {
			defer close(out)
			lastOK := now()
			var lastErr error
			tick := time.NewTicker(FenceEvery)
			defer tick.Stop()
			for {
				pctx, cancel := context.WithTimeout(ctx, probeTimeout)
				err := probe(pctx)
				cancel()
				switch {
				case ctx.Err() != nil:
					return
				case err == nil:
					lastOK, lastErr = now(), nil
				default:
					lastErr = err
				}
				if lastErr != nil && now().Sub(lastOK) > after {
					out <- fmt.Sprintf("the Nomad servers have not answered for %s (fence_after %s): %v", now().Sub(lastOK).Round(time.Second), after, lastErr)
					return
				}
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
			}
		}()
		return out
	}
}
