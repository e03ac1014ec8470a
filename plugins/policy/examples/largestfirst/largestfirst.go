// Package largestfirst is an example external policy, small enough to read
// in one go: each round it starts the queued jobs that ask for the most GPUs
// first. It shows how a policy is written on policy.Cluster; its binary,
// cmd/largest-first, serves it with policy.Serve.
//
// Semantics: queued jobs are taken by Max, largest first (then submission
// order); each starts with the largest multiple of PerWorker in [Min, Max]
// that fits, packed best fit, or is skipped if Min does not fit (there is no
// head-of-line blocking: smaller jobs fill in behind a large one). Running
// jobs are left alone.
package largestfirst

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Name is the policy's name, and the name of its binary in plugin_dir.
const Name = "largest-first"

// Policy is the largest-first policy. It has no configuration.
type Policy struct{}

// New returns the policy.
func New() *Policy { return &Policy{} }

// PluginInfo implements policy.Base.
func (*Policy) PluginInfo() policy.Info {
	return policy.Info{Name: Name, Version: "0.1.0", Description: "largest queued job first, with backfill"}
}

// SetConfig implements policy.Base; any key is an error.
func (*Policy) SetConfig(config map[string]string) error {
	for k := range config {
		return fmt.Errorf("failed to configure %s: unknown config key %q", Name, k)
	}
	return nil
}

// Plan implements policy.Policy.
func (*Policy) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := policy.NewCluster(s)
	if err != nil {
		return nil, fmt.Errorf("failed to plan: %w", err)
	}
	var queued []*policy.Job
	for _, j := range c.Jobs() {
		if c.Total(j.ID) == 0 {
			queued = append(queued, j)
		}
	}
	// Jobs() is in submission order, so a stable sort keeps it among equals.
	slices.SortStableFunc(queued, func(a, b *policy.Job) int { return cmp.Compare(b.GPUs.Max, a.GPUs.Max) })
	for _, j := range queued {
		g := min(j.GPUs.Max, c.Room(j.ID)/j.GPUs.PerWorker*j.GPUs.PerWorker)
		if g < j.GPUs.Min {
			c.Note(j.ID, fmt.Sprintf("queued: needs %d GPUs, %d fit now", j.GPUs.Min, c.Room(j.ID)))
			continue
		}
		if err := c.Resize(j.ID, g); err != nil {
			return nil, fmt.Errorf("failed to plan: %w", err)
		}
		c.Note(j.ID, fmt.Sprintf("started with %d GPUs (largest first)", g))
	}
	return c.Plan(Name), nil
}
