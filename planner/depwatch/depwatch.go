// Package depwatch watches the planner's dependencies, Consul and the
// Nomad servers (and the Consul agents of the other hosts, through
// Consul): it asks each, every Interval and within Timeout, whether it
// answers and has a leader, and says when one goes down and when it
// comes back: one event on the planner's event stream and one WARN log
// line per transition (not per check), and a gauge (planner/metrics'
// schedulearn_dependency_up) that follows the state.
//
// A dependency is down after Threshold failed checks in a row, and up
// again after one that passes; each starts up. With the defaults (5 s, 3
// s, 2) an outage is reported 5-16 s after it begins.
package depwatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// Defaults of a Watcher's settings.
const (
	DefaultInterval  = 5 * time.Second
	DefaultTimeout   = 3 * time.Second
	DefaultThreshold = 2
)

// The stream event types a Watcher publishes (structs.StreamEvent.Type).
const (
	StreamDependencyDown = "dependency-down"
	StreamDependencyUp   = "dependency-up"
)

// ErrUnknown is a check that could not tell (what it asks through is
// down): the dependency's state stays as it was.
var ErrUnknown = errors.New("state unknown")

// Dependency is something the planner needs, and how to check it: Check
// returns nil when the dependency answers and can serve (it has a
// leader), or an error that is ErrUnknown when it cannot tell. It must
// honour ctx.
type Dependency struct {
	Name  string
	Check func(ctx context.Context) error
}

// Publisher takes the stream's events (planner/events.Broker).
type Publisher interface {
	Publish(evs ...structs.StreamEvent)
}

// Gauge follows each dependency's state (planner/metrics.Recorder).
type Gauge interface {
	DependencyUp(dependency string, up bool)
}

// Watcher checks the dependencies and reports their transitions.
type Watcher struct {
	Deps      []Dependency
	Interval  time.Duration // DefaultInterval when 0
	Timeout   time.Duration // DefaultTimeout when 0
	Threshold int           // DefaultThreshold when 0
	Events    Publisher     // nil: no events
	Gauge     Gauge         // nil: no gauge
	Logger    hclog.Logger  // nil: no log
	Now       func() time.Time

	mu    sync.Mutex
	state map[string]*depState
}

// depState is what the watcher knows of one dependency.
type depState struct {
	down      bool
	failures  int       // failed checks in a row
	since     time.Time // the first failure of the run, or when it went down
	lastError error
}

// Run checks the dependencies at once and then every Interval, until ctx
// ends.
func (w *Watcher) Run(ctx context.Context) {
	tick := time.NewTicker(w.interval())
	defer tick.Stop()
	for {
		w.Check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// Check checks every dependency once, all at once, each within Timeout,
// and reports the transitions.
func (w *Watcher) Check(ctx context.Context) {
	errs := make([]error, len(w.Deps))
	var wg sync.WaitGroup
	for i, d := range w.Deps {
		wg.Go(func() {
			cctx, cancel := context.WithTimeout(ctx, w.timeout())
			defer cancel()
			errs[i] = d.Check(cctx)
		})
	}
	wg.Wait()
	if ctx.Err() != nil {
		return // the planner stops: its dependencies did not fail
	}
	now := w.now()
	for i, d := range w.Deps {
		if errors.Is(errs[i], ErrUnknown) {
			continue
		}
		w.note(d.Name, errs[i], now)
	}
}

// Up reports whether dependency name is up (true for one never checked).
func (w *Watcher) Up(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	s, ok := w.state[name]
	return !ok || !s.down
}

// note records one check's result and reports a transition.
func (w *Watcher) note(name string, err error, now time.Time) {
	w.mu.Lock()
	if w.state == nil {
		w.state = map[string]*depState{}
	}
	s := w.state[name]
	if s == nil {
		s = &depState{}
		w.state[name] = s
	}
	var ev *structs.StreamEvent
	switch {
	case err == nil && s.down:
		ev = &structs.StreamEvent{Time: now, Type: StreamDependencyUp,
			Message: fmt.Sprintf("%s is back after %s", name, now.Sub(s.since).Round(time.Second))}
		*s = depState{}
	case err == nil:
		*s = depState{}
	default:
		if s.failures == 0 {
			s.since = now
		}
		s.failures++
		s.lastError = err
		if !s.down && s.failures >= w.threshold() {
			s.down = true
			ev = &structs.StreamEvent{Time: now, Type: StreamDependencyDown,
				Message: fmt.Sprintf("%s is down since %s: %v", name, s.since.UTC().Format(time.RFC3339), err)}
		}
	}
	down := s.down
	w.mu.Unlock()

	if w.Gauge != nil {
		w.Gauge.DependencyUp(name, !down)
	}
	if ev == nil {
		return
	}
	if w.Logger != nil {
		w.Logger.Warn(ev.Message, "dependency", name, "event", ev.Type)
	}
	if w.Events != nil {
		w.Events.Publish(*ev)
	}
}

func (w *Watcher) interval() time.Duration {
	if w.Interval > 0 {
		return w.Interval
	}
	return DefaultInterval
}

func (w *Watcher) timeout() time.Duration {
	if w.Timeout > 0 {
		return w.Timeout
	}
	return DefaultTimeout
}

func (w *Watcher) threshold() int {
	if w.Threshold > 0 {
		return w.Threshold
	}
	return DefaultThreshold
}

func (w *Watcher) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}
