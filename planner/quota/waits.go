package quota

import (
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Wait is where a queued job stands in its queue after a round, and why
// it waits where its queue is the reason.
type Wait struct {
	Queue string
	// Position is the job's place among its queue's waiting jobs (from 1),
	// of Of, in the queue's order: priority, then submission. 0 for a job
	// whose queue is not configured.
	Position, Of int
	// Reason says why the queue holds the job back; "" when it does not
	// (the policy's reason, or placement, is then why it waits).
	Reason string
}

// Waits is, for each job that plan p (Enforce's) leaves queued, its Wait.
func (v *Ledger) Waits(p *policy.Plan) map[string]Wait {
	out := map[string]Wait{}
	byQueue := map[int][]int{}
	for i := range v.s.Jobs {
		j := &v.s.Jobs[i]
		if p.Target(j).Total() > 0 {
			continue
		}
		// The implicit tree's one queue is no queue the job named: the job
		// waits in the queue its jobspec names, which is not configured
		// (no place), not "2nd of 5 in default" beside its own (issue 28).
		if q := v.leaf[i]; q != -1 && !v.t.implicit {
			byQueue[q] = append(byQueue[q], i)
			continue
		}
		out[j.ID] = Wait{Queue: QueueOf(j), Reason: v.reason(j.ID)}
	}
	for q, js := range byQueue {
		slices.SortFunc(js, v.byQueueOrder)
		for k, i := range js {
			id := v.s.Jobs[i].ID
			out[id] = Wait{Queue: v.t.queues[q].name, Position: k + 1, Of: len(js), Reason: v.reason(id)}
		}
	}
	return out
}

// ofQueue names queue q after a job, " of queue vision"; "" for the
// implicit tree's one queue, which holds every job whatever queue its
// jobspec names, so that no reason says "of queue default" of a job whose
// queue is team2.
func (v *Ledger) ofQueue(q int) string {
	if v.t.implicit {
		return ""
	}
	return " of queue " + v.t.queues[q].name
}

// reason is why quota holds job id back: Enforce's word, else Gate's.
func (v *Ledger) reason(id string) string {
	if r, ok := v.why[id]; ok {
		return r
	}
	return v.held[id]
}
