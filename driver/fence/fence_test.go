package fence

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/shoenig/test/must"
)

// The fence fires once the servers have not answered for longer than its
// bound, and never while they answer.
func TestNew(t *testing.T) {
	down := errors.New("no servers")
	t.Run("unreachable", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		fired := New(func(context.Context) error { return down }, 500*time.Millisecond, time.Now)(ctx)
		select {
		case why := <-fired:
			must.StrContains(t, why, "no servers")
		case <-time.After(30 * time.Second):
			t.Fatal("the fence never fired")
		}
	})
	t.Run("reachable", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		calls := 0
		fired := New(func(context.Context) error { calls++; return nil }, 500*time.Millisecond, time.Now)(ctx)
		select {
		case why := <-fired:
			t.Fatalf("fired while the servers answer: %s", why)
		case <-time.After(2500 * time.Millisecond):
		}
		cancel()
		_, open := <-fired
		must.False(t, open)
		must.Positive(t, calls)
	})
}
