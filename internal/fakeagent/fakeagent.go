// Package fakeagent is an HTTP server for unit tests that stands in for a
// Nomad or Consul agent (or the planner) that answers, fails, or is
// frozen: a SIGSTOPped agent's socket accepts connections and nothing
// answers, which is what a client without a timeout hangs on.
package fakeagent

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
)

// Mode is how the server answers.
type Mode int32

const (
	// Answer serves the handler the server was made with.
	Answer Mode = iota
	// Fail answers 500, as an agent without a leader does.
	Fail
	// Freeze never answers: a request waits until its client gives up or
	// the test ends.
	Freeze
)

// Server is a fake agent; Set changes how it answers.
type Server struct {
	*httptest.Server
	mode atomic.Int32
}

// New starts a fake agent that serves answer (in mode Answer), closed when
// the test ends.
func New(t testing.TB, answer http.Handler) *Server {
	s := &Server{}
	done := make(chan struct{})
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch Mode(s.mode.Load()) {
		case Fail:
			http.Error(w, "No cluster leader", http.StatusInternalServerError)
		case Freeze:
			select {
			case <-r.Context().Done():
			case <-done:
			}
		default:
			answer.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(func() {
		close(done) // frees the frozen requests, which Close waits for
		s.Close()
	})
	return s
}

// Frozen starts a fake agent that never answers.
func Frozen(t testing.TB) *Server {
	s := New(t, http.NotFoundHandler())
	s.Set(Freeze)
	return s
}

// Set makes the server answer in mode m from now on.
func (s *Server) Set(m Mode) { s.mode.Store(int32(m)) }

// Addr is the server's host:port (Consul's clients take no scheme).
func (s *Server) Addr() string { return s.Listener.Addr().String() }
