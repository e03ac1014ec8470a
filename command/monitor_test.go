package command

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/planner/api/client"
)

// N5 of issue 28: a planner refuses an event stream over its limits with
// a 429 (it was a 503). A monitor (job run, job status -follow) refused
// one polls instead, as it did for a 503, rather than fail or ask again
// at once.
func TestN5_MonitorPollsWhenStreamsAreRefused(t *testing.T) {
	for _, code := range []int{http.StatusTooManyRequests, http.StatusServiceUnavailable} {
		asked := 0
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			asked++
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(code)
			_, _ = io.WriteString(w, `{"error":"too many event streams"}`)
		}))
		cl, err := client.New(client.Config{Address: srv.URL})
		must.NoError(t, err)
		m := &monitor{out: io.Discard, client: cl, interval: 10 * time.Millisecond}
		m.wait(context.Background(), "j-1")
		m.wait(context.Background(), "j-1")
		must.True(t, m.noStream, must.Sprint(code))
		must.Eq(t, 1, asked, must.Sprintf("%d: asked for a stream once, then polled", code))
		srv.Close()
	}
}
