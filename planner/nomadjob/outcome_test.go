package nomadjob

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/fakeagent"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
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

// With the Nomad server frozen, a start, a stop and a resize fail within
// ApplyTimeout rather than hold the round (and every round after it)
// until Nomad answers.
func TestApply_BoundedWhenNomadFrozen(t *testing.T) {
	nomad := fakeagent.Frozen(t)
	client, err := nomadapi.NewClient(&nomadapi.Config{Address: nomad.URL})
	must.NoError(t, err)
	n := &Nomad{Client: client, Logger: hclog.NewNullLogger(), ApplyTimeout: 100 * time.Millisecond}
	spec := jobspec.Spec{Name: "j", Command: "python3", GPUs: jobspec.GPUs{Min: 1, Max: 2, PerWorker: 1}}
	for _, tc := range []struct {
		name   string
		holds  policy.Allocation
		target policy.Allocation
	}{
		{"start", nil, policy.Allocation{"n1": 1}},
		{"stop", policy.Allocation{"n1": 1}, nil},
		{"resize", policy.Allocation{"n1": 2}, policy.Allocation{"n1": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			j := &structs.Job{ID: "j-1", State: structs.JobRunning, Spec: spec, Allocation: tc.holds}
			start := time.Now()
			err := n.Apply(context.Background(), j, tc.target)
			must.ErrorIs(t, err, context.DeadlineExceeded)
			must.Less(t, 2*time.Second, time.Since(start))
		})
	}
}
