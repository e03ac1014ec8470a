package quota

import (
	"fmt"
	"maps"
	"slices"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// prioritize keeps priority first within each queue: where the plan
// starts a job while a job of higher priority in the same queue stays
// queued, and the higher one fits (by best fit, within the bounds) once
// the lower one's start is taken back, the higher one starts at its
// minimum instead. Lower starts are tried lowest priority first, higher
// jobs highest priority first.
func (e *enforcer) prioritize() {
	v := e.v
	started, waiting := map[int][]int{}, map[int][]int{}
	for i := range v.s.Jobs {
		q := v.leaf[i]
		if q == -1 || v.gpus[i] > 0 {
			continue
		}
		if e.tgt[i].Total() > 0 {
			started[q] = append(started[q], i)
		} else {
			waiting[q] = append(waiting[q], i)
		}
	}
	unbounded := make([]int, len(v.res))
	for r := range unbounded {
		unbounded[r] = 2 * Unlimited
	}
	for _, q := range slices.Sorted(maps.Keys(started)) {
		hs := waiting[q]
		if len(hs) == 0 {
			continue
		}
		ls := started[q]
		slices.SortFunc(hs, v.byQueueOrder)
		slices.SortFunc(ls, func(a, b int) int { return v.byQueueOrder(b, a) })
		for _, l := range ls {
			for x, h := range hs {
				if h == -1 || v.s.Jobs[h].Priority <= v.s.Jobs[l].Priority {
					continue
				}
				prev := e.tgt[l]
				e.set(l, nil)
				a := e.place(h, unbounded)
				if a != nil {
					next := clone(e.u)
					v.add(next, q, a, 1)
					if _, bad := v.breach(next); bad {
						a = nil
					}
				}
				if a == nil {
					e.set(l, prev)
					continue
				}
				e.set(h, a)
				lj, hj := &v.s.Jobs[l], &v.s.Jobs[h]
				delete(e.out.Reasons, lj.ID)
				its := " of its queue"
				if v.t.implicit {
					its = ""
				}
				v.why[lj.ID] = fmt.Sprintf("not started: job %s%s has a higher priority (%d > %d) and takes the GPUs", hj.ID, v.ofQueue(q), hj.Priority, lj.Priority)
				e.out.Reasons[hj.ID] = []string{fmt.Sprintf("started at %s before job %s%s, which has a lower priority (%d < %d)", policy.GPUs(a.Total()), lj.ID, its, lj.Priority, hj.Priority)}
				hs[x] = -1
				break
			}
		}
	}
}
