package quota

import "maps"

// Taken is who took a job's GPUs back in a round's reclaim: the job that
// started within its queue's nominal quota and that queue, the borrowing
// queue they were taken from, and why, in words.
type Taken struct {
	Job   string
	Queue string
	From  string
	Why   string
}

// Reclaimed is the jobs Enforce's reclaim shrank in place or stopped, by
// job ID, with who took their GPUs.
func (v *Ledger) Reclaimed() map[string]Taken { return maps.Clone(v.taken) }
