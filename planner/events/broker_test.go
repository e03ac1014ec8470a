package events_test

import (
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/events"
	"github.com/schedulearn/schedulearn/planner/structs"
)

func publish(b *events.Broker, n int) {
	for i := range n {
		b.Publish(structs.StreamEvent{Type: structs.StreamJobNote, Message: string(rune('a' + i%26))})
	}
}

func indexes(evs []structs.StreamEvent) []uint64 {
	var out []uint64
	for _, e := range evs {
		out = append(out, e.Index)
	}
	return out
}

func TestBroker_Since(t *testing.T) {
	start := time.UnixMilli(1_700_000_000_000)
	first := uint64(start.UnixMilli()) * 1000
	tests := []struct {
		name      string
		capacity  int
		published int
		after     uint64
		limit     int
		want      []uint64
		lost      bool
	}{
		{name: "from the oldest", capacity: 8, published: 3, after: 0, limit: 10, want: []uint64{first, first + 1, first + 2}},
		{name: "after an index", capacity: 8, published: 3, after: first, limit: 10, want: []uint64{first + 1, first + 2}},
		{name: "caught up", capacity: 8, published: 3, after: first + 2, limit: 10},
		{name: "limit", capacity: 8, published: 5, after: 0, limit: 2, want: []uint64{first, first + 1}},
		{name: "wrapped, still held", capacity: 4, published: 10, after: first + 6, limit: 10, want: []uint64{first + 7, first + 8, first + 9}},
		{name: "fell behind", capacity: 4, published: 10, after: first + 2, limit: 10, lost: true, want: []uint64{first + 6, first + 7, first + 8, first + 9}},
		{name: "just held", capacity: 4, published: 10, after: first + 5, limit: 10, want: []uint64{first + 6, first + 7, first + 8, first + 9}},
		{name: "index of an earlier run", capacity: 4, published: 2, after: first - 100, limit: 10, lost: true, want: []uint64{first, first + 1}},
		{name: "index from the future", capacity: 4, published: 2, after: first + 50, limit: 10, lost: true, want: []uint64{first, first + 1}},
		{name: "nothing published, resumed", capacity: 4, after: first - 1, limit: 10},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := events.New(tc.capacity, start)
			publish(b, tc.published)
			evs, lost, _, closed := b.Since(tc.after, tc.limit)
			must.Eq(t, tc.want, indexes(evs))
			must.Eq(t, tc.lost, lost)
			must.False(t, closed)
		})
	}
}

func TestBroker_WakesAndCloses(t *testing.T) {
	b := events.New(4, time.Now())
	_, _, wake, _ := b.Since(b.Last(), 10)
	select {
	case <-wake:
		t.Fatal("woken before any publish")
	default:
	}
	b.Publish(structs.StreamEvent{Type: structs.StreamPolicySwitched})
	select {
	case <-wake:
	case <-time.After(time.Second):
		t.Fatal("publish did not wake the reader")
	}
	_, _, wake, _ = b.Since(b.Last(), 10)
	b.Close()
	<-wake
	_, _, _, closed := b.Since(b.Last(), 10)
	must.True(t, closed)
	last := b.Last()
	b.Publish(structs.StreamEvent{Type: structs.StreamPolicySwitched})
	must.Eq(t, last, b.Last())
}

// A restarted planner's indexes are above the earlier run's.
func TestBroker_IndexesGrowAcrossRuns(t *testing.T) {
	now := time.Now()
	a := events.New(4, now)
	publish(a, 100)
	b := events.New(4, now.Add(time.Second))
	must.Greater(t, a.Last(), b.Last())
}
