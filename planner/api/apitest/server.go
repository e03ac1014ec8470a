package apitest

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/schedulearn/schedulearn/planner/api"
)

// Token is the token NewServer's API takes for writes (and reads);
// ReadToken the one it takes for reads only.
const (
	Token     = "test-token"
	ReadToken = "test-read-token"
)

// Server is an httptest server serving the API from a Backend.
type Server struct {
	*httptest.Server
	API *api.Server
	// requests counts every HTTP request the server received.
	requests atomic.Int64
}

// Requests returns how many HTTP requests the server has received.
func (s *Server) Requests() int64 { return s.requests.Load() }

// NewServer serves b's API (tokens Token and ReadToken, logs to the
// test) until the test ends.
func NewServer(t testing.TB, b api.Backend) *Server {
	t.Helper()
	return NewObservedServer(t, b, api.Observability{})
}

// NewObservedServer is NewServer with the observability routes serving obs.
func NewObservedServer(t testing.TB, b api.Backend, obs api.Observability) *Server {
	t.Helper()
	a, err := api.NewServer(api.Config{
		Backend:   b,
		Token:     Token,
		ReadToken: ReadToken,
		Logger:    hclog.New(&hclog.LoggerOptions{Name: "api", Output: testWriter{t}, Level: hclog.Info}),
		Observe:   obs,
	})
	if err != nil {
		t.Fatalf("failed to create the API server: %v", err)
	}
	s := &Server{API: a}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.requests.Add(1)
		a.ServeHTTP(w, r)
	}))
	t.Cleanup(s.Close)
	return s
}

// testWriter sends the API's log lines to the test's log.
type testWriter struct{ t testing.TB }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
