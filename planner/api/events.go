package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
)

// EventSource is what GET /v1/events streams (planner/events.Broker).
type EventSource interface {
	// Since returns up to limit events after index after (0: from the
	// oldest held), whether events after it were lost (no longer held),
	// a channel closed when more arrive, and whether the source closed.
	Since(after uint64, limit int) (evs []structs.StreamEvent, lost bool, wake <-chan struct{}, closed bool)
	// Last is the index of the last event published.
	Last() uint64
}

// Event stream settings.
const (
	// LastEventIDHeader is the header a reconnecting EventSource sends.
	LastEventIDHeader = "Last-Event-ID"
	// EventLost is the SSE event type of the marker sent when a client
	// asked for events the planner no longer holds: its data is a
	// LostEvents; the events after it start at the oldest held.
	EventLost = "lost"
	// eventStreamLife ends a stream after a while; the client reconnects
	// from its last index (EventSource does so by itself).
	eventStreamLife = 10 * time.Minute
	// eventHeartbeat is how often an idle stream sends a comment, so
	// proxies and clients see it is alive.
	eventHeartbeat = 15 * time.Second
	eventBatch     = 256
	eventWriteWait = 30 * time.Second
)

// LostEvents is the data of the EventLost marker.
type LostEvents struct {
	// After is the index the client asked to resume after.
	After uint64 `json:"after"`
	// Oldest is the index of the oldest event the planner still holds.
	Oldest  uint64 `json:"oldest"`
	Message string `json:"message"`
}

// events streams the planner's events as server-sent events: each is
// "id: <index>", "event: <type>" and "data: <StreamEvent JSON>". It
// resumes after ?index=N or the Last-Event-ID header (a reconnecting
// client); with neither it starts with the events to come (?index=0: from
// the oldest held). ?job=ID keeps one job's events.
func (s *Server) events(w http.ResponseWriter, r *http.Request) (int, any, error) {
	if s.obs.Events == nil {
		return 0, nil, notConfigured("the event stream")
	}
	src := s.obs.Events
	after := src.Last()
	raw := r.Header.Get(LastEventIDHeader)
	if q := r.URL.Query(); q.Has("index") {
		raw = q.Get("index")
	}
	if raw != "" {
		n, err := strconv.ParseUint(raw, 10, 64)
		if err != nil {
			return 0, nil, Inputf("invalid event index %q: want a non-negative integer", raw)
		}
		after = n
	}
	job := r.URL.Query().Get("job")
	if len(job) > 256 {
		return 0, nil, Inputf("job ID over 256 bytes")
	}
	release, err := s.streams.acquire(clientAddr(r), s.now(), s.log)
	if err != nil {
		w.Header().Set("Retry-After", strconv.Itoa(streamRetryAfter))
		return 0, nil, err
	}
	defer release()

	rc := http.NewResponseController(w)
	// The server's read and write timeouts are for requests, not streams.
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	send := func(text string) bool {
		_ = rc.SetWriteDeadline(time.Now().Add(eventWriteWait))
		if _, err := fmt.Fprint(w, text); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send("retry: 2000\n\n") {
		return 0, written{}, nil
	}
	end := time.NewTimer(eventStreamLife)
	defer end.Stop()
	beat := time.NewTicker(eventHeartbeat)
	defer beat.Stop()
	for {
		evs, lost, wake, closed := src.Since(after, eventBatch)
		if lost {
			oldest := src.Last() + 1
			if len(evs) > 0 {
				oldest = evs[0].Index
			}
			data, _ := json.Marshal(LostEvents{After: after, Oldest: oldest,
				Message: "events were lost: the planner no longer holds those after the index asked for (a client too far behind, or a restarted planner); read the state again"})
			if !send(fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", oldest-1, EventLost, data)) {
				return 0, written{}, nil
			}
		}
		text := ""
		for _, e := range evs {
			after = e.Index
			if job != "" && e.Job != job {
				continue
			}
			data, err := json.Marshal(e)
			if err != nil {
				continue
			}
			text += fmt.Sprintf("id: %d\nevent: %s\ndata: %s\n\n", e.Index, e.Type, data)
		}
		if text == "" && len(evs) > 0 {
			// All filtered out: move the client's last index on anyway.
			text = fmt.Sprintf("id: %d\n\n", after)
		}
		if text != "" && !send(text) {
			return 0, written{}, nil
		}
		if len(evs) == eventBatch {
			continue
		}
		if closed {
			return 0, written{}, nil
		}
		select {
		case <-wake:
		case <-beat.C:
			if !send(": keepalive\n\n") {
				return 0, written{}, nil
			}
		case <-end.C:
			return 0, written{}, nil
		case <-r.Context().Done():
			return 0, written{}, nil
		}
	}
}
