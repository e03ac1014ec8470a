package api

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Event stream limits. A stream holds a goroutine and a connection for
// up to eventStreamLife, so the planner serves a bounded number; and so
// that one client (a script, a browser with many tabs) cannot take them
// all, each client address gets a few of them. Clients behind one proxy
// share its address.
const (
	// MaxEventStreams bounds the event streams open at once, from all
	// clients (429 beyond).
	MaxEventStreams = 64
	// MaxEventStreamsPerClient bounds the event streams open at once
	// from one client address (429 beyond): a few dashboard tabs and a
	// CLI monitor or two.
	MaxEventStreamsPerClient = 8
	// streamRetryAfter is the Retry-After of a refused stream, in seconds.
	streamRetryAfter = 10
	// refusalLogEvery is how often the refusals of one client (or of the
	// planner as a whole) are logged: once, with how many there were.
	refusalLogEvery = time.Minute
)

// streamLimits counts the open event streams, in all and by client
// address, and logs the refused ones at most once per client per
// refusalLogEvery.
type streamLimits struct {
	mu     sync.Mutex
	total  int
	byAddr map[string]int
	// refused are the clients refused since their refusal was last
	// logged (the key allStreams: refused for the limit of all clients).
	refused map[string]*refusals
}

// refusals is one client's refused streams since its last log line.
type refusals struct {
	logged time.Time
	count  int
}

// ErrTooManyStreams is an event stream refused because too many are
// open (429): from the client's address, or on the planner. The client
// package's errors are it for a 429 (errors.Is).
var ErrTooManyStreams = errors.New("too many event streams")

// allStreams is the refusals key of the limit of all clients.
const allStreams = "all clients"

// clientAddr is the address a request comes from (its IP, without the
// port).
func clientAddr(r *http.Request) string {
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return host
	}
	return r.RemoteAddr
}

// acquire counts a stream from addr, or refuses it (a 429 saying why,
// logged as refusal says) when addr or the planner as a whole has as many
// open as it may. release uncounts an acquired stream.
func (l *streamLimits) acquire(addr string, now time.Time, log hclog.Logger) (release func(), err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.byAddr == nil {
		l.byAddr, l.refused = map[string]int{}, map[string]*refusals{}
	}
	switch {
	case l.byAddr[addr] >= MaxEventStreamsPerClient:
		l.refuse(addr, now, log)
		return nil, &statusError{code: http.StatusTooManyRequests, msg: fmt.Sprintf(
			"too many event streams from %s: %d are open, the most one client address may have; close another (a dashboard tab, a monitor) and this one connects again by itself",
			addr, MaxEventStreamsPerClient)}
	case l.total >= MaxEventStreams:
		l.refuse(allStreams, now, log)
		return nil, &statusError{code: http.StatusTooManyRequests, msg: fmt.Sprintf(
			"too many event streams open on the planner: %d, the most it serves at once; it connects again by itself when one closes",
			MaxEventStreams)}
	}
	l.total++
	l.byAddr[addr]++
	return func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.total--
		if l.byAddr[addr]--; l.byAddr[addr] <= 0 {
			delete(l.byAddr, addr)
		}
	}, nil
}

// refuse notes a refused stream of key and logs it at WARN, unless a
// refusal of key was logged within refusalLogEvery: one line per client
// per interval, with the refusals since the last line. Clients whose line
// is older than the interval are forgotten (logging the refusals left
// unlogged, if any), so the map holds only the clients refused lately.
func (l *streamLimits) refuse(key string, now time.Time, log hclog.Logger) {
	r := l.refused[key]
	if r != nil && now.Sub(r.logged) < refusalLogEvery {
		r.count++
		return
	}
	count := 1
	if r != nil {
		count += r.count
	}
	l.logRefusals(key, count, log)
	l.refused[key] = &refusals{logged: now}
	for k, r := range l.refused {
		if now.Sub(r.logged) >= refusalLogEvery {
			if r.count > 0 {
				l.logRefusals(k, r.count, log)
			}
			delete(l.refused, k)
		}
	}
}

func (l *streamLimits) logRefusals(key string, count int, log hclog.Logger) {
	limit := MaxEventStreamsPerClient
	if key == allStreams {
		limit = MaxEventStreams
	}
	log.Warn("refused event streams over the limit (logged at most once a minute per client)",
		"client", key, "limit", limit, "refused", count, "open", l.total)
}
