package policy

import (
	"context"
	"time"
)

// Info describes a policy plugin.
type Info struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
	// IgnoresPriority says that the policy does not order jobs by
	// Job.Priority (every builtin). The planner then tells a job that has
	// a priority so, at submission and while it waits, rather than let
	// "waiting behind job X (first come, first served)" be read as its
	// priority at work. A policy that leaves it unset is not said to
	// ignore priority, nor to honour it.
	IgnoresPriority bool `json:"ignores_priority,omitempty"`
}

// Base is what every plugin of the project has, as in nomad-autoscaler.
type Base interface {
	// PluginInfo describes the plugin. It does not fail: for an external
	// plugin it is read once, when the plugin is launched.
	PluginInfo() Info
	// SetConfig replaces the plugin's configuration. Unknown keys and bad
	// values are errors, and leave the previous configuration in place.
	SetConfig(config map[string]string) error
}

// Policy decides, each round, how many GPUs each job holds and where.
//
// Plan must not modify the snapshot, must be deterministic (the same
// snapshot and configuration give the same plan), should return promptly
// when ctx is done, and must be safe to call concurrently with itself and
// with SetConfig. The plan must pass Validate; the host (package policy/host)
// checks that it does.
type Policy interface {
	Base
	Plan(ctx context.Context, s *Snapshot) (*Plan, error)
}

// Steady is what a policy may implement, besides Policy, when its plan
// depends on the time only at known instants: the simulator then skips
// the rounds before the next one in which nothing else changed (the same
// jobs, allocations and reports), which would plan the same.
//
// SteadyUntil returns, for snapshot s, when the policy's plan for s moved
// on in time (Now, and the attained service that running jobs gain with
// it) may first differ from its plan for s; ok false if it cannot tell.
type Steady interface {
	SteadyUntil(s *Snapshot) (until time.Time, ok bool)
}
