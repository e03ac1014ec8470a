package policy_test

import (
	"context"
	"testing"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/shoenig/test/must"
)

// t0 is the epoch of the hand-made snapshots; job n is submitted at t0+n s.
var t0 = time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

// node is an A100 node in pool "default" with gpus GPUs, reserved of them
// held by others.
func node(id string, gpus, reserved int) policy.Node {
	return policy.Node{ID: id, Name: id, Pool: "default", GPUModel: "A100", GPUMemoryMiB: 40960,
		GPUs: gpus, Reserved: reserved}
}

// queued is a queued job submitted at t0+sec asking for [min, max] in
// workers of w GPUs.
func queued(id string, sec, min, max, w int) policy.Job {
	return policy.Job{ID: id, Name: id, Submitted: at(sec), State: policy.Queued,
		GPUs: policy.GPURequest{Min: min, Max: max, PerWorker: w}}
}

// running is queued's job holding alloc, last resized at t0+resized s.
func running(id string, sec, min, max, w int, alloc policy.Allocation, resized int) policy.Job {
	j := queued(id, sec, min, max, w)
	j.State, j.Allocation, j.LastResized = policy.Running, alloc, at(resized)
	return j
}

// plan runs p on s and checks the plan with Validate.
func plan(t *testing.T, p policy.Policy, s *policy.Snapshot) *policy.Plan {
	t.Helper()
	out, err := p.Plan(context.Background(), s)
	must.NoError(t, err)
	must.NoError(t, policy.Validate(s, out))
	return out
}

// targets returns the target of every job that holds GPUs in the plan.
func targets(s *policy.Snapshot, p *policy.Plan) map[string]policy.Allocation {
	out := map[string]policy.Allocation{}
	for i := range s.Jobs {
		if a := p.Target(&s.Jobs[i]).Clone(); a != nil {
			out[s.Jobs[i].ID] = a
		}
	}
	return out
}

// configured returns a new builtin name configured with config.
func configured(t *testing.T, name string, config map[string]string) policy.Policy {
	t.Helper()
	p := policy.Builtins()[name]()
	must.NoError(t, p.SetConfig(config))
	return p
}
