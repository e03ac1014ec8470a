package command

import (
	"errors"
	"fmt"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/sim"
)

// errNoQueueBlocks is a -queues file without a queue block.
var errNoQueueBlocks = errors.New("no queue block")

// setQueues sets experiment e's queues from -queues v: "vc" for one per
// virtual cluster, else a planner config file whose queue blocks are read
// by the planner's own parser (planner/config); "" for none. A bad file's
// error holds its diagnostics (file:line:col).
func setQueues(e *sim.Experiment, v string, enforce bool) error {
	switch v {
	case "":
		return nil
	case "vc":
		e.QueuesVC = true
	default:
		cfg, diags := config.Load(v)
		if diags.HasErrors() {
			return fmt.Errorf("failed to read the queues: %s", hcldiag.Format(diags))
		}
		if len(cfg.Queues) == 0 {
			return fmt.Errorf("failed to read the queues: %s: %w (queue \"name\" { nominal = N })", v, errNoQueueBlocks)
		}
		e.QueueTree = cfg.QueueTree
	}
	e.QueuesOff = !enforce
	return nil
}
