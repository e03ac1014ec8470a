package store_test

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/store/internal/recs"
	"github.com/schedulearn/schedulearn/planner/store/storetest"
)

func TestAlwaysLeader(t *testing.T) {
	cases := []struct {
		name string
		run  func(t *testing.T, a *store.AlwaysLeader)
	}{
		{"acquire at once, lost on release", func(t *testing.T, a *store.AlwaysLeader) {
			lost, err := a.Acquire(context.Background())
			must.NoError(t, err)
			must.False(t, storetest.Closed(lost))
			must.NoError(t, a.Release())
			must.True(t, storetest.Closed(lost))
		}},
		{"acquire while held fails", func(t *testing.T, a *store.AlwaysLeader) {
			_, err := a.Acquire(context.Background())
			must.NoError(t, err)
			_, err = a.Acquire(context.Background())
			must.ErrorIs(t, err, recs.ErrLeaderHeld)
		}},
		{"acquire again after release", func(t *testing.T, a *store.AlwaysLeader) {
			_, err := a.Acquire(context.Background())
			must.NoError(t, err)
			must.NoError(t, a.Release())
			lost, err := a.Acquire(context.Background())
			must.NoError(t, err)
			must.False(t, storetest.Closed(lost))
		}},
		{"release when not held", func(t *testing.T, a *store.AlwaysLeader) {
			must.NoError(t, a.Release())
		}},
		{"cancelled context", func(t *testing.T, a *store.AlwaysLeader) {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_, err := a.Acquire(ctx)
			must.ErrorIs(t, err, context.Canceled)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, new(store.AlwaysLeader)) })
	}
}
