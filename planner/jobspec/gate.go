package jobspec

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// ErrBusy is returned by Gate.Parse when no parse slot came free in time.
var ErrBusy = errors.New("too many jobspecs are being parsed at once")

// DefaultParseWait is how long Gate.Parse waits for a slot by default.
const DefaultParseWait = 5 * time.Second

// DefaultParses is how many parses a default Gate runs at once: 4, or the
// CPUs Go may use where fewer (at least 2). Each may take about 100 MB at
// the limits.
func DefaultParses() int { return min(4, max(2, runtime.GOMAXPROCS(0))) }

// Gate bounds the jobspec parses that run at once, so that many large
// submissions cannot take all of a planner's CPU and memory: a parse waits
// for a slot at most a set time, then fails with ErrBusy. Safe for
// concurrent use.
type Gate struct {
	slots chan struct{}
	wait  time.Duration
}

// NewGate returns a gate of n slots (DefaultParses if n < 1) whose parses
// wait at most wait for one (DefaultParseWait if wait <= 0).
func NewGate(n int, wait time.Duration) *Gate {
	if n < 1 {
		n = DefaultParses()
	}
	if wait <= 0 {
		wait = DefaultParseWait
	}
	return &Gate{slots: make(chan struct{}, n), wait: wait}
}

// Parse is Parse run in a slot of the gate. It returns ErrBusy when no
// slot came free within the gate's wait, or ctx's error when ctx ended
// first; the diagnostics are those of Parse.
func (g *Gate) Parse(ctx context.Context, src []byte, filename string, now time.Time) (*Spec, hcl.Diagnostics, error) {
	release, err := g.Hold(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to parse jobspec %s: %w", filename, err)
	}
	defer release()
	spec, diags := Parse(src, filename, now)
	return spec, diags, nil
}

// Hold takes a slot, waiting at most the gate's wait (then ErrBusy) or
// until ctx ends (then ctx's error). The caller must call release once.
func (g *Gate) Hold(ctx context.Context) (release func(), err error) {
	timer := time.NewTimer(g.wait)
	defer timer.Stop()
	select {
	case g.slots <- struct{}{}:
		return func() { <-g.slots }, nil
	case <-timer.C:
		return nil, fmt.Errorf("%w (%d running; waited %s)", ErrBusy, cap(g.slots), g.wait)
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}
