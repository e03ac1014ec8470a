package quota

// Status is one queue's state over a snapshot.
type Status struct {
	Name     string
	Parent   string
	Children []string
	Weight   float64
	// Running counts the queue's jobs holding GPUs, Waiting its queued
	// ones (a parent: its children's).
	Running, Waiting int
	// GPUs is the queue's quota and usage per resource: one entry with
	// Model AnyModel, or one per GPU model where quotas are per model.
	GPUs []ResourceStatus
}

// ResourceStatus is a queue's quota and usage of one resource.
type ResourceStatus struct {
	Model string
	// Nominal, BorrowingLimit and LendingLimit are as configured, or as
	// derived (a parent's nominal quota from its children's); Unlimited
	// where there is none.
	Nominal, BorrowingLimit, LendingLimit int
	// Used is what the queue's jobs hold, and what is held for them
	// outside the snapshot (NewLedger's held) (a parent: its children's);
	// Borrowed the part above the nominal quota.
	Used, Borrowed int
}

// Status is every queue's state, in the tree's order (parents first).
func (v *Ledger) Status() []Status {
	st := v.subtree(v.cur)
	running, waiting := make([]int, len(v.t.queues)), make([]int, len(v.t.queues))
	for i := range v.s.Jobs {
		for q := v.leaf[i]; q != -1; q = v.t.queues[q].parent {
			if v.gpus[i] > 0 {
				running[q]++
			} else {
				waiting[q]++
			}
		}
	}
	out := make([]Status, 0, len(v.t.order))
	for _, q := range v.t.order {
		tq := &v.t.queues[q]
		s := Status{Name: tq.name, Weight: tq.weight, Running: running[q], Waiting: waiting[q]}
		if tq.parent != -1 {
			s.Parent = v.t.queues[tq.parent].name
		}
		for _, c := range tq.children {
			s.Children = append(s.Children, v.t.queues[c].name)
		}
		for r, m := range v.res {
			b := v.limit[q][r] - v.nominal[q][r]
			s.GPUs = append(s.GPUs, ResourceStatus{Model: m, Nominal: min(v.nominal[q][r], Unlimited),
				BorrowingLimit: min(b, Unlimited), LendingLimit: min(lookup(tq.lend, m, Unlimited), Unlimited),
				Used: st[q][r], Borrowed: max(0, st[q][r]-v.nominal[q][r])})
		}
		out = append(out, s)
	}
	return out
}
