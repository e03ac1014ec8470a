package launch

import (
	"context"
	"fmt"
	"time"
)

// Probe asks the Nomad servers something only they answer (the job's
// drain variable: discover.Nomad.Draining); an error means they could not
// be reached (or no longer take the launcher's token).
type Probe func(ctx context.Context) error

// FenceEvery is how often a fence probes; each probe gets probeTimeout
// to answer (a loaded server answers late, not never).
const (
	FenceEvery   = time.Second
	probeTimeout = 2 * time.Second
)

// NewFence returns a Supervisor.Fence that fires once probe has failed
// for longer than after: a launcher cut off from the servers stops
// training before they take its node for lost (after Nomad's heartbeat
// grace, 10 s by default) and the planner runs the job elsewhere, so one
// job never has two launchers.
func NewFence(probe Probe, after time.Duration, now func() time.Time) func(ctx context.Context) <-chan string {
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
