package drivers

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/shoenig/test/must"
)

func next(t *testing.T, ch <-chan *TaskEvent) (*TaskEvent, bool) {
	t.Helper()
	select {
	case ev, ok := <-ch:
		return ev, ok
	case <-time.After(5 * time.Second):
		t.Fatal("no event")
		return nil, false
	}
}

func TestEventer(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	e := NewEventer(ctx, hclog.NewNullLogger())
	must.NoError(t, e.EmitEvent(&TaskEvent{TaskID: "nobody listens"}))

	c1, cancel1 := context.WithCancel(ctx)
	ch1, err := e.TaskEvents(c1)
	must.NoError(t, err)
	ch2, err := e.TaskEvents(ctx)
	must.NoError(t, err)

	must.NoError(t, e.EmitEvent(&TaskEvent{TaskID: "t", Message: "m"}))
	must.NoError(t, e.EmitEvent(&TaskEvent{TaskID: "t2"}))
	ev, ok := next(t, ch1)
	must.True(t, ok)
	must.Eq(t, "t", ev.TaskID)
	must.False(t, ev.Timestamp.IsZero(), must.Sprint("the time is set when the driver leaves it out"))
	ev, _ = next(t, ch2)
	must.Eq(t, "m", ev.Message)
	ev, _ = next(t, ch2)
	must.Eq(t, "t2", ev.TaskID, must.Sprint("in order"))

	// A consumer that goes away is closed (after what it had queued) and
	// dropped.
	cancel1()
	ev, _ = next(t, ch1)
	must.Eq(t, "t2", ev.TaskID)
	_, ok = next(t, ch1)
	must.False(t, ok)

	// A consumer that does not read costs the emitter nothing until its
	// buffer is full, then EventSendTimeout an event, not forever.
	old := EventSendTimeout
	EventSendTimeout = 50 * time.Millisecond
	t.Cleanup(func() { EventSendTimeout = old })
	start := time.Now()
	for range EventBuffer {
		must.NoError(t, e.EmitEvent(&TaskEvent{TaskID: "queued"}))
	}
	must.Less(t, 40*time.Millisecond, time.Since(start))
	start = time.Now()
	must.NoError(t, e.EmitEvent(&TaskEvent{TaskID: "dropped"}))
	must.Between(t, 50*time.Millisecond, time.Since(start), 2*time.Second)

	// The Eventer's end closes every stream, and later ones at once.
	cancel()
	for range EventBuffer {
		ev, _ = next(t, ch2)
		must.Eq(t, "queued", ev.TaskID)
	}
	_, ok = next(t, ch2)
	must.False(t, ok)
	ch3, err := e.TaskEvents(context.Background())
	must.NoError(t, err)
	_, ok = next(t, ch3)
	must.False(t, ok)
	must.ErrorIs(t, e.EmitEvent(&TaskEvent{}), context.Canceled)
}
