package planner

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// SetQueues makes t the queue tree of the next rounds and submissions
// (nil: quota.Default(), one queue holding the whole cluster).
func (p *Planner) SetQueues(t *quota.Tree) { p.queueTree.Store(t) }

// ReplaceQueues makes t the queue tree, unless a queued or running job
// names a queue t lacks or gives children (structs.ErrOrphanedJobs, with
// the first few such jobs): a change of the queues never strands a job.
func (p *Planner) ReplaceQueues(ctx context.Context, t *quota.Tree) error {
	jobs, err := p.activeJobs(ctx) // read only
	if err != nil {
		return fmt.Errorf("failed to list jobs: %w", err)
	}
	var orphans []string
	n := 0
	for _, j := range jobs {
		if q := queueOf(&j.Spec); !j.State.Terminal() && !t.HoldsJobs(q) {
			if n++; n <= 5 {
				orphans = append(orphans, fmt.Sprintf("%s (queue %s)", j.ID, q))
			}
		}
	}
	if n > 0 {
		return fmt.Errorf("failed to change the queues: %w: %d jobs, e.g. %s; keep their queues, or stop the jobs first",
			structs.ErrOrphanedJobs, n, strings.Join(orphans, ", "))
	}
	p.SetQueues(t)
	return nil
}

// Queues is the planner's queue tree.
func (p *Planner) Queues() *quota.Tree {
	if t := p.queueTree.Load(); t != nil {
		return t
	}
	return quota.Default()
}

// queueOf is the queue a jobspec names (records from before queues had
// none).
func queueOf(spec *jobspec.Spec) string {
	if spec.Queue == "" {
		return quota.DefaultQueue
	}
	return spec.Queue
}

// checkQueue refuses a job whose queue does not exist, holds queues
// rather than jobs, or could never hold the job's minimum; the error is an
// *structs.InputError pointing at the jobspec's queue attribute.
func (p *Planner) checkQueue(spec *jobspec.Spec, nodes []policy.Node) error {
	j := &policy.Job{Name: spec.Name, Queue: queueOf(spec), GPUs: requestOf(spec), Constraints: constraintsOf(spec)}
	err := p.Queues().CheckJob(j, nodes)
	var ae *quota.AdmitError
	if !errors.As(err, &ae) {
		return err
	}
	d := &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Queue refuses the job", Detail: ae.Msg + "."}
	if spec.QueueRange.Filename != "" {
		d.Subject = spec.QueueRange.Ptr()
	}
	return &structs.InputError{Msg: fmt.Sprintf("failed to queue job %s", spec.Name), Diags: hcl.Diagnostics{d}, Err: ae}
}

// planQueues asks the active policy for a plan within the queues' rules
// (planner/quota): the policy sees the jobs their queues may start, and
// its plan is trimmed to the queues' limits, with GPUs reclaimed for
// queues below their nominal quota; the GPUs held for moving jobs (held)
// count as their queues'. It also returns where each job left
// queued stands in its queue (worked out when called: Waits asks only
// when the API does), and who took the GPUs of the jobs reclaim shrank
// or stopped.
func (p *Planner) planQueues(ctx context.Context, snap *policy.Snapshot, held []quota.Held) (*policy.Plan, func() map[string]quota.Wait, map[string]quota.Taken, error) {
	view := quota.NewLedger(p.Queues(), snap, held...)
	plan, perr := p.Policies.Plan(ctx, view.Gate())
	if plan == nil {
		return nil, nil, nil, perr
	}
	enforced, err := view.Enforce(plan)
	if err != nil {
		p.Logger.Error("queue rules broke the plan; keeping only its stops and shrinks", "error", err)
	}
	return enforced, func() map[string]quota.Wait { return view.Waits(enforced) }, view.Reclaimed(), perr
}

// QueueStatus is every queue's quota and usage now, parents first, and,
// where window is above 0, the GPU-hours each used over the window up to
// now. It reads the live jobs, and for a window the jobs that held GPUs
// in it, not every job stored.
func (p *Planner) QueueStatus(ctx context.Context, window time.Duration) ([]structs.QueueStatus, error) {
	live, err := p.activeJobs(ctx) // read only
	if err != nil {
		return nil, fmt.Errorf("failed to list jobs: %w", err)
	}
	nodes, err := p.Cluster.Nodes(ctx)
	if err != nil {
		return nil, fmt.Errorf("failed to read cluster: %w", err)
	}
	// Only the jobs with an allocation need the policy's view (for the GPUs
	// each queue uses); the others count as waiting in their queue, which
	// at 100,000 queued jobs is most of them (a view each was 150 ms).
	t, now := p.Queues(), p.now()
	var holding, moving []*structs.Job
	waiting := map[string]int{}
	for _, j := range live {
		if len(j.Allocation) > 0 {
			holding = append(holding, j)
			continue
		}
		if waitsToMove(j) {
			// The GPUs it moves to are its queue's (holdTargets), as in
			// the round; until the next round, also where the round will
			// find its hold over.
			moving = append(moving, j)
		}
		waiting[t.QueueFor(queueOf(&j.Spec))]++
	}
	nodes, held := holdTargets(nodes, moving, holding)
	var out []structs.QueueStatus
	for _, s := range quota.NewLedger(t, snapshot(now, nodes, holding), held...).Status() {
		qs := structs.QueueStatus{Name: s.Name, Parent: s.Parent, Children: s.Children, Weight: s.Weight,
			Running: s.Running, Waiting: s.Waiting}
		for _, g := range s.GPUs {
			qs.GPUs = append(qs.GPUs, structs.QueueGPUs{Model: g.Model, Nominal: bounded(g.Nominal),
				BorrowingLimit: bounded(g.BorrowingLimit), LendingLimit: bounded(g.LendingLimit), Used: g.Used, Borrowed: g.Borrowed})
		}
		out = append(out, qs)
	}
	addWaiting(out, waiting)
	if window > 0 {
		since := now.Add(-window)
		held, err := p.Store.ListJobsPage(ctx, structs.JobQuery{HeldSince: since})
		if err != nil {
			return nil, fmt.Errorf("failed to list jobs: %w", err)
		}
		p.windowUsage(out, held.Jobs, since, now)
	}
	return out, nil
}

// addWaiting adds to each leaf queue of out (parents first) the jobs
// waiting in it, by name, and to its ancestors; a job whose queue is not
// a leaf of out waits in none, as quota.Ledger counts it.
func addWaiting(out []structs.QueueStatus, waiting map[string]int) {
	index := make(map[string]int, len(out))
	for i := range out {
		index[out[i].Name] = i
	}
	for name, n := range waiting {
		i, ok := index[name]
		if !ok || len(out[i].Children) > 0 {
			continue
		}
		for ok {
			out[i].Waiting += n
			i, ok = index[out[i].Parent]
		}
	}
}

// windowUsage sets each queue's GPU-hours over [since, until] from the
// jobs' GPU histories: a job holds a change's GPUs from its time to the
// next change's (the last one's until now, or until the job ended where
// its history does not say so). A job whose queue is not configured
// counts for none.
func (p *Planner) windowUsage(out []structs.QueueStatus, jobs []*structs.Job, since, until time.Time) {
	hours := map[string]float64{}
	t := p.Queues()
	for _, j := range jobs {
		var h float64
		for i, c := range j.History {
			end := until
			if i+1 < len(j.History) {
				end = j.History[i+1].Time
			} else if j.State.Terminal() && !j.Finished.IsZero() {
				end = j.Finished
			}
			from, to := maxTime(c.Time, since), minTime(end, until)
			if c.GPUs > 0 && to.After(from) {
				h += float64(c.GPUs) * to.Sub(from).Hours()
			}
		}
		if h > 0 {
			hours[t.QueueFor(queueOf(&j.Spec))] += h
		}
	}
	index := make(map[string]int, len(out))
	for i := range out {
		index[out[i].Name] = i
		out[i].Window = &structs.QueueWindow{Since: since, Until: until, GPUHours: hours[out[i].Name]}
	}
	// Parents come first: add each queue's hours to its parent, children
	// before parents.
	for i := len(out) - 1; i >= 0; i-- {
		if k, ok := index[out[i].Parent]; ok {
			out[k].Window.GPUHours += out[i].Window.GPUHours
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

// bounded is n, or nil where it is quota.Unlimited.
func bounded(n int) *int {
	if n >= quota.Unlimited {
		return nil
	}
	return &n
}
