package store

import (
	"context"
	"testing"

	"github.com/shoenig/test/must"
)

func TestWithFence(t *testing.T) {
	ctx := context.Background()
	must.Eq(t, Fence{}, FenceFrom(ctx))
	must.EqOp(t, ctx, WithFence(ctx, Fence{}), must.Sprint("a zero fence fences nothing"))
	f := Fence{Key: "schedulearn/leader", Session: "s-1"}
	must.Eq(t, f, FenceFrom(WithFence(ctx, f)))
	must.True(t, Fence{}.IsZero())
	must.False(t, Fence{Key: "schedulearn/leader"}.IsZero())
}
