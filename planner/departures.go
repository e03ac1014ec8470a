package planner

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// EventNodeLost is the event of a job that lost GPUs to a node leaving.
const EventNodeLost = "node-lost"

// releaseDeparted takes the GPUs on departed nodes from the running jobs
// holding them: the actuator shrinks each job to what it holds elsewhere
// (in place; a job left with nothing is stopped and queued again), and the
// job's record says which node went and why. The policy then re-plans
// with what is left, and a node that comes back is offered again like any
// other. It returns the errors of the jobs it could not shrink; the next
// round tries them again.
func (p *Planner) releaseDeparted(ctx context.Context, d Departures, live []*structs.Job, now time.Time) []error {
	gone, err := d.Departed(ctx)
	if err != nil {
		return []error{fmt.Errorf("failed to read departed nodes: %w", err)}
	}
	if len(gone) == 0 {
		return nil
	}
	var errs []error
	for i, j := range live {
		if j.State != structs.JobRunning {
			continue
		}
		var lost []string
		for node, g := range j.Allocation {
			if _, ok := gone[node]; ok && g > 0 {
				lost = append(lost, node)
			}
		}
		if len(lost) == 0 {
			continue
		}
		slices.Sort(lost)
		keep := policy.Allocation{}
		lostGPUs := 0
		var why []string
		for node, g := range j.Allocation {
			if slices.Contains(lost, node) {
				lostGPUs += g
				continue
			}
			keep[node] = g
		}
		for _, node := range lost {
			why = append(why, gone[node])
		}
		j = j.Clone() // the store's own where shared; the round reads the change
		live[i] = j
		if err := p.Actuator.Apply(ctx, j, keep); err != nil {
			errs = append(errs, fmt.Errorf("failed to release the departed nodes of job %s: %w", j.ID, err))
			continue
		}
		reason := strings.Join(why, "; ")
		msg := fmt.Sprintf("%s: %s lost, %d left", reason, policy.GPUs(lostGPUs), keep.Total())
		if keep.Total() == 0 {
			msg += "; the job is queued again"
		} else {
			msg += "; training goes on"
		}
		carry := actuated(j)
		err := p.update(ctx, j, func(j *structs.Job) error {
			carry(j)
			accrue(j, now)
			j.Allocation = maps.Clone(map[string]int(keep))
			if keep.Total() == 0 {
				j.State = structs.JobQueued
			}
			j.AddChange(structs.GPUChange{Time: now, GPUs: keep.Total(), Nodes: j.Allocation, Reason: reason})
			j.AddEvents(structs.Event{Time: now, Type: EventNodeLost, Message: msg})
			return nil
		})
		if err != nil {
			errs = append(errs, fmt.Errorf("failed to record the node loss of job %s: %w", j.ID, err))
			continue
		}
		p.Logger.Warn("job lost nodes", "job", j.ID, "nodes", lost, "reason", reason, "gpus", keep.Total())
	}
	return errs
}
