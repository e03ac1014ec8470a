package quota

import (
	"fmt"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// CheckJob says why job j could never run in its queue, if it could not:
// the queue does not exist, it holds other queues rather than jobs, or the
// job's minimum is above what the queue may hold with every other queue
// idle (its nominal quota plus borrowing limit, bounded up the tree, less
// what other queues never lend). nodes are the cluster's now. The error is
// an *AdmitError.
//
// The default tree (no queues configured) has the one queue "default": a
// job naming another is refused too, so that a queue name that exists
// nowhere is never taken (it would be a label of the job's metrics, and
// words of its status, that no configuration bounds). Records stored
// before this rule keep their queue, held by "default".
func (t *Tree) CheckJob(j *policy.Job, nodes []policy.Node) error {
	if named := QueueOf(j); t.implicit && named != DefaultQueue {
		return &AdmitError{Queue: named, Err: ErrUnknownQueue,
			Msg: fmt.Sprintf("queue %q does not exist: the planner configures no queues, so its one queue is %q (leave queue out, or name %q; queues are configured with queue blocks in the planner's config)",
				named, DefaultQueue, DefaultQueue)}
	}
	name := t.queueFor(QueueOf(j))
	q, ok := t.index[name]
	if !ok {
		return &AdmitError{Queue: name, Err: ErrUnknownQueue,
			Msg: fmt.Sprintf("queue %q does not exist; the planner's queues for jobs are %s", name, strings.Join(t.Leaves(), ", "))}
	}
	if kids := t.queues[q].children; len(kids) > 0 {
		names := make([]string, len(kids))
		for i, c := range kids {
			names[i] = t.queues[c].name
		}
		return &AdmitError{Queue: name, Err: ErrParentQueue,
			Msg: fmt.Sprintf("queue %q holds queues (%s), not jobs: name one of them", name, strings.Join(names, ", "))}
	}
	v := NewLedger(t, &policy.Snapshot{Nodes: nodes})
	u := v.matrix()
	e := v.effective(u)
	allowed := v.allowed(j)
	most := 0
	for r := range v.res {
		if allowed[r] {
			most += v.headroom(u, e, q, r)
		}
	}
	if most >= j.GPUs.Min {
		return nil
	}
	return &AdmitError{Queue: name, Err: ErrOverLimit,
		Msg: fmt.Sprintf("job %s needs at least %s but queue %q may never hold more than %d of those it may use (%s)",
			j.Name, policy.GPUs(j.GPUs.Min), name, most, v.describeLimit(q, allowed))}
}

// describeLimit says what bounds queue q: its nominal quota and borrowing
// limit, over the allowed resources.
func (v *Ledger) describeLimit(q int, allowed []bool) string {
	var parts []string
	for r, m := range v.res {
		if !allowed[r] {
			continue
		}
		b := v.limit[q][r] - v.nominal[q][r]
		bs := "unlimited"
		if b < Unlimited {
			bs = fmt.Sprint(b)
		}
		parts = append(parts, fmt.Sprintf("nominal %s%s, borrowing limit %s", amount(v.nominal[q][r]), modelSuffix(m), bs))
	}
	if p := v.t.queues[q].parent; p != -1 {
		parts = append(parts, fmt.Sprintf("inside %s", v.t.queues[p].name))
	}
	return strings.Join(parts, "; ")
}

func amount(n int) string {
	if n >= Unlimited {
		return "unlimited"
	}
	return fmt.Sprint(n)
}

// Leaves are the queues that hold jobs (those without children), in the
// tree's order.
func (t *Tree) Leaves() []string {
	var out []string
	for _, i := range t.order {
		if len(t.queues[i].children) == 0 {
			out = append(out, t.queues[i].name)
		}
	}
	return out
}

// HoldsJobs reports whether the tree has a queue of that name without
// children (one that jobs may name); the default tree holds any.
func (t *Tree) HoldsJobs(name string) bool { return t.leafOf(name) != -1 }

// leafOf is the index of the queue without children that name is (as
// queueFor takes it), -1 where there is none.
func (t *Tree) leafOf(name string) int {
	if q, ok := t.index[t.queueFor(name)]; ok && len(t.queues[q].children) == 0 {
		return q
	}
	return -1
}
