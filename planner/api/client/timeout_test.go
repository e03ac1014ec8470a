package client_test

import (
	"context"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/api/client"
)

// A client made without an HTTP client has a timeout: a planner that
// accepts the request and never answers does not hang the CLI.
func TestClient_TimesOutOnPlannerThatNeverAnswers(t *testing.T) {
	srv := fakeagent.Frozen(t)

	def, err := client.New(client.Config{Address: srv.URL})
	must.NoError(t, err)
	must.Eq(t, client.DefaultTimeout, client.HTTPTimeout(def))

	cl, err := client.New(client.Config{Address: srv.URL, Timeout: 100 * time.Millisecond})
	must.NoError(t, err)
	start := time.Now()
	_, err = cl.Nodes(context.Background())
	must.Error(t, err)
	must.StrContains(t, err.Error(), "failed to reach the planner")
	must.Less(t, 5*time.Second, time.Since(start))
}
