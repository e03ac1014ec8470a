package nomadjob

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// With the Nomad server frozen, a running job's Outcome fails within
// OutcomeTimeout (a real Nomad client against a server that never
// answers) rather than hold the round until Nomad answers.
func TestOutcome_BoundedWhenNomadFrozen(t *testing.T) {
	nomad := fakeagent.Frozen(t)
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: nomad.URL})
	must.NoError(t, err)
	n := &Nomad{Client: client, Logger: hclog.NewNullLogger(), OutcomeTimeout: 100 * time.Millisecond}
	start := time.Now()
	_, err = n.Outcome(context.Background(), &structs.Job{ID: "j-1", State: structs.JobRunning})
	must.ErrorIs(t, err, context.DeadlineExceeded)
	must.Less(t, 2*time.Second, time.Since(start))
}
