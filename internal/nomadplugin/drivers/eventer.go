package drivers

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// EventSendTimeout is how long EmitEvent waits for a consumer whose
// buffer (EventBuffer events) is full before it drops the event for that
// consumer.
var EventSendTimeout = 2 * time.Second

// EventBuffer is how many events a stream holds that its consumer has not
// read yet.
const EventBuffer = 16

// Eventer fans a driver's task events out to every TaskEvents stream (the
// agent keeps one open per driver instance, and opens a new one when it
// ends). A driver embeds one and serves TaskEvents with it.
type Eventer struct {
	ctx    context.Context
	logger hclog.Logger

	mu        sync.Mutex
	consumers map[*eventConsumer]struct{}
}

type eventConsumer struct {
	ctx context.Context
	ch  chan *TaskEvent
}

// NewEventer returns an Eventer whose streams all end when ctx does (the
// driver's own context).
func NewEventer(ctx context.Context, logger hclog.Logger) *Eventer {
	return &Eventer{ctx: ctx, logger: logger, consumers: map[*eventConsumer]struct{}{}}
}

// TaskEvents is a stream of the events emitted from now on, until ctx or
// the Eventer's context ends; then the channel is closed.
func (e *Eventer) TaskEvents(ctx context.Context) (<-chan *TaskEvent, error) {
	c := &eventConsumer{ctx: ctx, ch: make(chan *TaskEvent, EventBuffer)}
	e.mu.Lock()
	select {
	case <-e.ctx.Done(): // the Eventer has stopped: a stream already ended
		e.mu.Unlock()
		close(c.ch)
		return c.ch, nil
	default:
	}
	e.consumers[c] = struct{}{}
	e.mu.Unlock()
	go func() {
		select {
		case <-ctx.Done():
		case <-e.ctx.Done():
		}
		e.mu.Lock()
		defer e.mu.Unlock()
		delete(e.consumers, c)
		close(c.ch)
	}()
	return c.ch, nil
}

// EmitEvent queues ev on every stream, waiting up to EventSendTimeout for
// each whose buffer is full; it returns the Eventer's context's error once
// that has ended.
func (e *Eventer) EmitEvent(ev *TaskEvent) error {
	if err := e.ctx.Err(); err != nil {
		return err
	}
	if ev.Timestamp.IsZero() {
		ev.Timestamp = time.Now()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for c := range e.consumers {
		select {
		case c.ch <- ev:
			continue
		default:
		}
		timer := time.NewTimer(EventSendTimeout)
		select {
		case c.ch <- ev:
		case <-c.ctx.Done():
		case <-e.ctx.Done():
		case <-timer.C:
			e.logger.Warn("timed out sending a task event", "task_id", ev.TaskID, "message", ev.Message)
		}
		timer.Stop()
	}
	return nil
}
