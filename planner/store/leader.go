package store

import (
	"context"
	"sync"

	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
)

// Leadership decides which of several planners acts: only the leader
// schedules and writes; the others stand by.
type Leadership interface {
	// Acquire blocks until this planner is the leader, or ctx ends (then it
	// returns ctx's error). The channel it returns is closed when the
	// leadership ends: lost to another planner, the backing session gone,
	// or Release called. The leader must stop acting when it closes and may
	// call Acquire again to stand by.
	Acquire(ctx context.Context) (lost <-chan struct{}, err error)
	// Release gives the leadership up (or abandons a pending Acquire) so a
	// standby can take over at once. It does nothing if not held.
	Release() error
	// Fence is the token of the term the last successful Acquire began,
	// for the leader's writes (WithFence): a store shared by several
	// planners refuses them once that term has ended. Call it after
	// Acquire returns; it says the same until the next Acquire.
	Fence() Fence
}

// AlwaysLeader is the Leadership of a planner that runs alone (the embedded
// store): Acquire succeeds at once and the leadership is lost only through
// Release. The zero value is ready to use.
type AlwaysLeader struct {
	mu   sync.Mutex
	lost chan struct{}
}

var _ Leadership = (*AlwaysLeader)(nil)

// Acquire implements Leadership.
func (a *AlwaysLeader) Acquire(ctx context.Context) (<-chan struct{}, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lost != nil {
		return nil, recs.ErrLeaderHeld
	}
	a.lost = make(chan struct{})
	return a.lost, nil
}

// Fence implements Leadership: the zero Fence, as a planner that runs
// alone has nobody to be fenced from.
func (a *AlwaysLeader) Fence() Fence { return Fence{} }

// Release implements Leadership.
func (a *AlwaysLeader) Release() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.lost != nil {
		close(a.lost)
		a.lost = nil
	}
	return nil
}
