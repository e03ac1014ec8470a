// Package events is the planner's event broker: a bounded, in-memory
// buffer of structs.StreamEvent that the planner publishes to and the
// API's event stream (GET /v1/events) and the dashboard read from.
//
// Readers never block the planner: Publish only appends to a ring buffer
// and wakes waiting readers. A reader that falls further behind than the
// buffer holds is told so (Since's lost), and goes on from the oldest
// event still held.
package events

import (
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// DefaultCapacity is how many events a broker holds by default: hours of
// a busy cluster's job changes, about 1 MiB.
const DefaultCapacity = 4096

// Broker holds the last events published, in order.
type Broker struct {
	mu     sync.Mutex
	buf    []structs.StreamEvent // ring; buf[(head+i)%cap] is the i-th oldest
	head   int
	n      int
	next   uint64        // the index of the next event
	wake   chan struct{} // closed (and replaced) on every publish
	closed bool
}

// New returns a broker holding the last capacity events (DefaultCapacity
// when <= 0). Its first event's index is derived from now (its Unix time
// in milliseconds, times 1,000): a planner that restarts starts above the
// indexes of its previous run, so a reader resuming from an old index is
// told it lost events. (The indexes stay below 2^53, exact in JavaScript.)
func New(capacity int, now time.Time) *Broker {
	if capacity <= 0 {
		capacity = DefaultCapacity
	}
	first := uint64(max(now.UnixMilli(), 1)) * 1000
	return &Broker{buf: make([]structs.StreamEvent, capacity), next: first, wake: make(chan struct{})}
}

// Publish appends events, giving each its index (their Index is
// overwritten), and wakes the readers. After Close it does nothing.
func (b *Broker) Publish(evs ...structs.StreamEvent) {
	if len(evs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	for _, e := range evs {
		e.Index = b.next
		b.next++
		if b.n < len(b.buf) {
			b.buf[(b.head+b.n)%len(b.buf)] = e
			b.n++
		} else {
			b.buf[b.head] = e
			b.head = (b.head + 1) % len(b.buf)
		}
	}
	close(b.wake)
	b.wake = make(chan struct{})
}

// Last is the index of the last event published (the one before the
// first index when none was).
func (b *Broker) Last() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.next - 1
}

// Since returns up to limit of the events after index after, oldest
// first. after = 0 means from the oldest event held. lost is true when
// events after after are no longer held (the reader fell behind by more
// than the buffer, or after comes from another run of the planner): the
// events returned then start at the oldest held. wake is closed when
// more events arrive or the broker closes; closed is true once it has.
func (b *Broker) Since(after uint64, limit int) (evs []structs.StreamEvent, lost bool, wake <-chan struct{}, closed bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	oldest := b.next - uint64(b.n) // the index of the oldest held (= next when none)
	switch {
	case after == 0:
		after = oldest - 1
	case after >= b.next || after+1 < oldest:
		lost = true
		after = oldest - 1
	}
	start := int(after + 1 - oldest)
	for i := start; i < b.n && len(evs) < limit; i++ {
		evs = append(evs, b.buf[(b.head+i)%len(b.buf)])
	}
	return evs, lost, b.wake, b.closed
}

// Close wakes every reader for the last time: readers end their streams
// (the planner is shutting down), and Publish does nothing from now on.
func (b *Broker) Close() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.closed {
		b.closed = true
		close(b.wake)
	}
}
