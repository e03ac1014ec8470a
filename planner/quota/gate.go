package quota

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// waiting is queue q's queued jobs (indices into s.Jobs) in the queue's
// order: priority first (higher first), then submission, then ID.
func (v *Ledger) waiting() map[int][]int {
	out := map[int][]int{}
	for i := range v.s.Jobs {
		if q := v.leaf[i]; q != -1 && v.gpus[i] == 0 {
			out[q] = append(out[q], i)
		}
	}
	for _, js := range out {
		// The snapshot's order (submission) already is the queue's where
		// the jobs share a priority: a pass spares the sort.
		if !slices.IsSortedFunc(js, v.byQueueOrder) {
			slices.SortFunc(js, v.byQueueOrder)
		}
	}
	return out
}

// byQueueOrder orders jobs within a queue: priority, then submission.
func (v *Ledger) byQueueOrder(a, b int) int {
	x, y := &v.s.Jobs[a], &v.s.Jobs[b]
	return cmp.Or(cmp.Compare(y.Priority, x.Priority), x.Submitted.Compare(y.Submitted), cmp.Compare(x.ID, y.ID))
}

// Gate returns the snapshot the policy plans on this round: s without the
// queued jobs their queues may not start. A queued job is shown when its
// minimum fits in what its queue may still take: up to its nominal quota
// (reclaiming from borrowers if need be), or more while it may borrow.
// Within a queue, higher priorities come first: a job is shown only when
// it fits beside the minimums of the shown jobs of higher priority;
// among jobs of one priority, each that fits is shown and the policy
// orders them. Running jobs are always shown (the policy may resize them;
// Enforce keeps the plan within the limits).
func (v *Ledger) Gate() *policy.Snapshot {
	e := v.effective(v.cur)
	if v.allFit(e) {
		return v.s
	}
	for q, js := range v.waiting() {
		avail := make([]int, len(v.res))
		for r := range v.res {
			avail[r] = max(v.headroom(v.cur, e, q, r), v.nominal[q][r]-v.cur[q][r])
		}
		for lo := 0; lo < len(js); {
			hi := lo
			for hi < len(js) && v.s.Jobs[js[hi]].Priority == v.s.Jobs[js[lo]].Priority {
				hi++
			}
			next := slices.Clone(avail)
			for _, i := range js[lo:hi] {
				j := &v.s.Jobs[i]
				allowed := v.allowed(j)
				if fits(j, avail, allowed) {
					take(next, allowed, j.GPUs.Min)
					continue
				}
				v.held[j.ID] = v.describeWait(q, j, allowed, avail, e)
			}
			avail, lo = next, hi
		}
	}
	for i := range v.s.Jobs {
		j := &v.s.Jobs[i]
		if v.leaf[i] == -1 && v.gpus[i] == 0 {
			v.held[j.ID] = v.describeOrphan(j)
		}
	}
	if len(v.held) == 0 {
		return v.s
	}
	out := &policy.Snapshot{Now: v.s.Now, Nodes: v.s.Nodes, Jobs: make([]policy.Job, 0, len(v.s.Jobs)-len(v.held))}
	for i := range v.s.Jobs {
		if _, ok := v.held[v.s.Jobs[i].ID]; !ok {
			out.Jobs = append(out.Jobs, v.s.Jobs[i])
		}
	}
	if v.s.Vouched() { // fewer of the same jobs, on the same nodes
		out.Vouch()
	}
	return out
}

// allFit reports, for the default tree (one queue, one resource), that
// Gate holds no job back: every queued job may use some node, and their
// minimums together fit in what the queue may take. It spares a planner
// without queues the queue's order of thousands of queued jobs each
// round; false means Gate must look job by job. NewLedger has read the
// queued jobs (fit, need): as every minimum is >= 0, their sum fits
// exactly when every running sum in the queue's order does.
func (v *Ledger) allFit(e [][]int) bool {
	if !v.fit {
		return false
	}
	return v.need <= max(v.headroom(v.cur, e, 0, 0), v.nominal[0][0]-v.cur[0][0])
}

// describeWait says why job j of queue q waits on its queue: where the
// queue stands against its nominal quota, and what it may still borrow.
func (v *Ledger) describeWait(q int, j *policy.Job, allowed []bool, avail []int, e [][]int) string {
	st := v.subtree(v.cur)
	var parts []string
	for r, m := range v.res {
		if !allowed[r] {
			continue
		}
		room := v.headroom(v.cur, e, q, r)
		borrow := max(0, room-max(0, v.nominal[q][r]-v.cur[q][r]))
		if v.nominal[q][r] >= Unlimited {
			parts = append(parts, fmt.Sprintf("queue %s at %s%s (no quota)", v.t.queues[q].name, policy.GPUs(st[q][r]), modelSuffix(m)))
			continue
		}
		parts = append(parts, fmt.Sprintf("queue %s at %d of %s%s; may borrow %d more",
			v.t.queues[q].name, st[q][r], policy.GPUs(v.nominal[q][r]), modelSuffix(m), borrow))
	}
	why := fmt.Sprintf("needs %s; %s", policy.GPUs(j.GPUs.Min), strings.Join(parts, "; "))
	left := 0
	for r, a := range avail {
		if allowed[r] {
			left += max(0, a)
		}
	}
	total := 0
	for r := range v.res {
		if allowed[r] {
			total += max(v.headroom(v.cur, e, q, r), v.nominal[q][r]-v.cur[q][r])
		}
	}
	if left < total {
		why += fmt.Sprintf("; %d of the %d it may take are held for higher-priority jobs of the queue", total-left, total)
	}
	for x := v.t.queues[q].parent; x != -1; x = v.t.queues[x].parent {
		for r := range v.res {
			if allowed[r] && e[x][r] >= v.limit[x][r] {
				why += fmt.Sprintf("; parent queue %s at its limit of %s%s", v.t.queues[x].name, policy.GPUs(v.limit[x][r]), modelSuffix(v.res[r]))
			}
		}
	}
	return why
}

// describeOrphan says why a job whose queue the tree lacks waits.
func (v *Ledger) describeOrphan(j *policy.Job) string {
	name := QueueOf(j)
	if q, ok := v.t.index[name]; ok && len(v.t.queues[q].children) > 0 {
		return fmt.Sprintf("queue %s now holds other queues, not jobs: the job waits until it is a leaf queue again", name)
	}
	return fmt.Sprintf("queue %s is not configured: the job waits until it is", name)
}
