package policy

import "context"

// Info describes a policy plugin.
type Info struct {
	Name        string `json:"name"`
	Version     string `json:"version,omitempty"`
	Description string `json:"description,omitempty"`
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
