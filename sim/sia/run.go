package sia

import (
	"context"
	"fmt"
	"time"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/sim"
)

// Start is the wall-clock time of second 0 of a run.
var Start = time.Date(2023, 1, 1, 0, 0, 0, 0, time.UTC)

// Config returns the simulator's configuration for Sia's setting on the
// cluster of groups: 60 s rounds, a restart on every change (each job's
// delay its application's), the epochs on whole seconds as Sia's
// simulator (Pollux's) steps them. unaware makes the jobs' speedup tables
// for 4-GPU nodes, as Sia's heterogeneity-unaware Pollux sees 8-GPU nodes.
func Config(groups []sim.NodeGroup, unaware bool) sim.Config {
	c := sim.DefaultConfig()
	c.Nodes, c.GPUsPerNode = 0, 0
	c.Groups = groups
	c.Gantt = false
	c.WholeSeconds = true
	c.SkipQuietRounds = true
	c.RestartDelay = DefaultRestartSeconds * time.Second
	if unaware {
		c.SpeedupNodeGPUs = UnawareNodeGPUs(groups)
		c.SpeedupModel = DefaultModel(groups)
	}
	return c
}

// DefaultModel is the GPU model of the cluster's largest group (the first
// of the largest): the model whose speedup tables the unaware baseline's
// jobs report, and that of a job before its first start.
func DefaultModel(groups []sim.NodeGroup) string {
	most, def := 0, ""
	for _, g := range groups {
		if c := g.Nodes * g.GPUsPerNode; c > most {
			most, def = c, g.Model
		}
	}
	return def
}

// UnawareNodeGPUs is the node size Sia's heterogeneity-unaware baseline
// sees: the smallest of the cluster's.
func UnawareNodeGPUs(groups []sim.NodeGroup) int {
	n := 0
	for _, g := range groups {
		if n == 0 || g.GPUsPerNode < n {
			n = g.GPUsPerNode
		}
	}
	return n
}

// RunWorkload replays the workload at path on the cluster of groups with
// policy p.
func RunWorkload(ctx context.Context, path string, prof *Profiles, groups []sim.NodeGroup, p policy.Policy, unaware bool) (*sim.Trace, *sim.Result, error) {
	t, err := LoadWorkload(path, prof)
	if err != nil {
		return nil, nil, err
	}
	specs, err := Specs(t, prof, groups)
	if err != nil {
		return nil, nil, err
	}
	res, err := sim.Run(ctx, Config(groups, unaware), Start, specs, p)
	if err != nil {
		return nil, nil, fmt.Errorf("failed to replay %s: %w", path, err)
	}
	return t, res, nil
}
