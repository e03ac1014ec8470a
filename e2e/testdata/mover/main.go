// Command mover is a test policy plugin for the e2e tier (issue 29): as a
// heterogeneity-aware policy would for a job faster on A100s, it moves a
// running job from GPUs of another model onto the A100s (a model whose
// name holds "A100") as soon as they have room for it, and starts queued
// jobs at their minimum on the A100s where they fit, else where the
// placement kit puts them. It plans on the placement kit, as any Go policy
// may.
package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/place"
	policyplugin "github.com/schedulearn/schedulearn/plugins/policy/plugin"
)

type mover struct{}

func (mover) PluginInfo() policy.Info {
	return policy.Info{Name: "mover", Version: "0.1.0", Description: "test: moves jobs onto A100s", IgnoresPriority: true}
}

func (mover) SetConfig(config map[string]string) error {
	for k := range config {
		return fmt.Errorf("failed to configure mover: unknown config key %q", k)
	}
	return nil
}

func (mover) Plan(_ context.Context, s *policy.Snapshot) (*policy.Plan, error) {
	c, err := place.NewBoard(s)
	if err != nil {
		return nil, err
	}
	a100 := ""
	for _, m := range c.Models() {
		if strings.Contains(m, "A100") {
			a100 = m
		}
	}
	for j, job := range c.Jobs() {
		jj := int32(j)
		switch held := c.Held(jj); {
		case held > 0 && a100 != "" && c.ModelOf(jj) != a100:
			h := c.Preempt(jj)
			if c.GrowOn(jj, held, a100) {
				c.Note(job.ID, "moved to the A100s, which have room for it")
			} else {
				c.Restore(jj, h)
			}
		case held == 0:
			if (a100 != "" && c.GrowOn(jj, job.GPUs.Min, a100)) || c.Grow(jj, job.GPUs.Min) {
				c.NoteStarted(jj, "", "")
			}
		}
	}
	return c.Plan("mover"), nil
}

func main() { policyplugin.Serve(mover{}) }
