package storetest

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/store"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// testFence is the Store contract's fencing: writes under a term's fence
// go through while the term holds and are refused with ErrFenced, writing
// nothing, once it has ended; unfenced writes (submissions and progress
// reports, which any planner takes) are not affected. A store one planner
// holds writes under any fence.
func testFence(t *testing.T, h Harness) {
	s := h.Open(t)
	ctx := context.Background()
	first := &structs.PolicyState{Name: "fifo", Changed: T0}
	if h.Fence == nil {
		fctx := store.WithFence(ctx, store.Fence{Key: "leader", Session: "a-term"})
		j := NewJob("a", T0)
		must.NoError(t, s.CreateJob(fctx, j))
		must.NoError(t, s.UpdateJob(fctx, j))
		must.NoError(t, s.PutPolicy(fctx, first))
		got, err := s.GetJob(ctx, "a")
		must.NoError(t, err)
		must.EqOp(t, 2, got.Version)
		j.State = structs.JobComplete
		must.NoError(t, s.UpdateJob(fctx, j))
		must.NoError(t, s.DeleteJob(fctx, "a", j.Version))
		return
	}

	f, end := h.Fence(t, s)
	fctx := store.WithFence(ctx, f)
	a := NewJob("a", T0)
	must.NoError(t, s.CreateJob(fctx, a))
	must.NoError(t, s.UpdateJob(fctx, a))
	must.NoError(t, s.PutPolicy(fctx, first))
	done := NewJob("d", T0)
	done.State = structs.JobComplete
	must.NoError(t, s.CreateJob(fctx, done))
	end()

	cases := []struct {
		name  string
		write func(t *testing.T, ctx context.Context) error
	}{
		{"update", func(t *testing.T, ctx context.Context) error {
			j, err := s.GetJob(ctx, "a")
			must.NoError(t, err)
			j.State = structs.JobRunning
			return s.UpdateJob(ctx, j)
		}},
		{"create", func(_ *testing.T, ctx context.Context) error { return s.CreateJob(ctx, NewJob("b", T0)) }},
		{"create with an idempotency key", func(_ *testing.T, ctx context.Context) error {
			j := NewJob("c", T0)
			j.Idempotency = &structs.Idempotency{Key: "retry-1"}
			return s.CreateJob(ctx, j)
		}},
		{"put policy", func(_ *testing.T, ctx context.Context) error {
			return s.PutPolicy(ctx, &structs.PolicyState{Name: "tiresias", Changed: T0})
		}},
		{"delete", func(_ *testing.T, ctx context.Context) error { return s.DeleteJob(ctx, "d", done.Version) }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			must.ErrorIs(t, tc.write(t, fctx), store.ErrFenced)
			must.ErrorIs(t, tc.write(t, store.WithFence(ctx, store.Fence{Key: f.Key})), store.ErrFenced, must.Sprint("a term not held"))
		})
	}
	got, err := s.GetJob(ctx, "a")
	must.NoError(t, err)
	must.Eq(t, a, got, must.Sprint("a refused write changed the record"))
	_, err = s.GetJob(ctx, "d")
	must.NoError(t, err, must.Sprint("a refused delete deleted the record"))
	for _, id := range []string{"b", "c"} {
		_, err = s.GetJob(ctx, id)
		must.ErrorIs(t, err, store.ErrNotFound)
	}
	_, err = s.JobByIdempotencyKey(ctx, "retry-1")
	must.ErrorIs(t, err, store.ErrNotFound)
	p, err := s.GetPolicy(ctx)
	must.NoError(t, err)
	must.Eq(t, first, p)

	// Unfenced writes still go through.
	must.NoError(t, s.CreateJob(ctx, NewJob("b", T0)))
	must.NoError(t, s.UpdateJob(ctx, got))
}
