package plugintest

import (
	"testing"
	"time"
)

// StreamTimeout is how long Next waits.
const StreamTimeout = 10 * time.Second

// Next is the next value on a plugin stream's channel (Fingerprint,
// Stats). It fails the test when the channel is closed or nothing comes
// within StreamTimeout.
func Next[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v, ok := <-ch:
		if !ok {
			t.Fatal("stream closed")
		}
		return v
	case <-time.After(StreamTimeout):
		t.Fatal("timed out waiting on a stream")
	}
	var zero T
	return zero
}

// Closed fails the test unless ch is closed within StreamTimeout, without
// another value first.
func Closed[T any](t testing.TB, ch <-chan T) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Fatalf("stream not closed: got %v", v)
		}
	case <-time.After(StreamTimeout):
		t.Fatal("stream not closed")
	}
}
