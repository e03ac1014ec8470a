package store

import (
	"context"

	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
)

// ErrFenced is a write refused because the leadership term it was made
// under has ended: another planner may lead now. Compare with errors.Is; it
// is of the kind structs.ErrUnavailable (the new leader takes the request).
var ErrFenced = recs.ErrFenced

// Fence is the token of one leadership term (Leadership.Fence). The leader
// makes its writes under it (WithFence), and a store that several planners
// share writes each of them only if the term still holds, in the same
// atomic operation as the write, so a deposed leader (paused, partitioned,
// or slow to notice) cannot overwrite its successor's records.
//
// The zero Fence fences nothing.
type Fence struct {
	// Key is the leader lock's key and Session the session that held it
	// when the term began (ConsulLeadership); a term ends when the session
	// no longer holds the key. An empty Session with a Key is a term that
	// is not held: every write under it is refused.
	Key, Session string
}

// IsZero reports whether f fences nothing.
func (f Fence) IsZero() bool { return f == Fence{} }

type fenceKey struct{}

// WithFence returns ctx carrying f: the Store writes made with it
// (CreateJob, UpdateJob, PutPolicy) are conditional on f's term. Consul
// refuses them with ErrFenced once the term has ended; the single-planner
// stores (bolt, in memory) are trivially the leader and write as usual.
// Reads ignore it. A zero f returns ctx as it is.
func WithFence(ctx context.Context, f Fence) context.Context {
	if f.IsZero() {
		return ctx
	}
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the fence ctx carries, or the zero Fence.
func FenceFrom(ctx context.Context) Fence {
	f, _ := ctx.Value(fenceKey{}).(Fence)
	return f
}
