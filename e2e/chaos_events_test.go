//go:build e2e

package e2e

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/schedulearn/schedulearn/planner/api/client"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// chaosEvent is one thing the planners said: an event of a planner's
// stream, or of a job's record.
type chaosEvent struct {
	Time    time.Time
	Type    string // the stream's type (job-health, node-lost, dependency-down, ...)
	Job     string
	Node    string
	Message string
}

// chaosEvents gathers what the planners say: every planner's event
// stream (each publishes its own: dependency events from all, job and
// node events from the leader), read again after the planner comes back,
// and the events of the job records the checker reads.
type chaosEvents struct {
	mu   sync.Mutex
	all  []chaosEvent
	seen map[string]bool // job record events added already
}

// follow reads the planner at addr's stream until ctx ends, connecting
// again a second after each end.
func (ev *chaosEvents) follow(ctx context.Context, addr string) {
	c, err := client.New(client.Config{Address: addr, Token: plannerToken})
	if err != nil {
		return
	}
	for ctx.Err() == nil {
		if s, err := c.Events(ctx, client.EventQuery{}); err == nil {
			for {
				e, err := s.Next()
				if err != nil {
					break
				}
				ev.add(chaosEvent{Time: e.Time, Type: e.Type, Job: e.Job, Node: e.Node, Message: e.Message})
			}
			s.Close()
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Second):
		}
	}
}

func (ev *chaosEvents) add(e chaosEvent) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	ev.all = append(ev.all, e)
}

// addRecord adds the events of a job's record not added before.
func (ev *chaosEvents) addRecord(j *structs.Job) {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.seen == nil {
		ev.seen = map[string]bool{}
	}
	for _, e := range j.Events {
		key := j.ID + e.Time.String() + e.Type + e.Message
		if ev.seen[key] {
			continue
		}
		ev.seen[key] = true
		typ := structs.StreamType(e.Type)
		if typ == structs.StreamJobNote {
			typ = e.Type // node-lost and the like keep their own
		}
		ev.all = append(ev.all, chaosEvent{Time: e.Time, Type: typ, Job: j.ID, Message: e.Message})
	}
}

// since lists the events at or after t, oldest first.
func (ev *chaosEvents) since(t time.Time) []chaosEvent {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	var out []chaosEvent
	for _, e := range ev.all {
		if !e.Time.Before(t) {
			out = append(out, e)
		}
	}
	slices.SortStableFunc(out, func(a, b chaosEvent) int { return a.Time.Compare(b.Time) })
	return out
}
