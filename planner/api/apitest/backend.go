// Package apitest holds test support for the planner API: an in-memory
// Backend whose jobs tests move through their states by hand, and an
// httptest server around it. The API's and the CLI's tests use it; the
// daemon's tests can use it as a reference for what the API expects.
package apitest

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hashicorp/hcl/v2"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
	"github.com/schedulearn/schedulearn/plugins/policy/builtin"
	"github.com/schedulearn/schedulearn/plugins/policy/host"
)

// Backend is a fake api.Backend: jobs live in memory and stay where
// Submit puts them (queued) until a test moves them with Start, Resize,
// Finish or Update, or an OnJob hook does on each read.
type Backend struct {
	mu       sync.Mutex
	jobs     map[string]*structs.Job
	order    []string
	nodes    []api.NodeInfo
	policies map[string]host.Factory
	active   structs.PolicyState
	calls    map[string]int
	seq      int
	// queueWindow is the window the last Queues call asked for.
	queueWindow time.Duration
	// tree is the queues SetQueues set last (nil: quota.Default()).
	tree *quota.Tree

	// Now is the fake's clock; time.Now when nil.
	Now func() time.Time
	// OnJob, when set, runs before every Job call (outside the fake's
	// lock) with the ID and how many times Job has been called for it,
	// counting this one: a script that moves a job along as a client
	// polls it.
	OnJob func(b *Backend, id string, call int)
	// QueueList, when set, is what Queues returns; nil: one queue,
	// "default", without a quota, holding every job.
	QueueList []structs.QueueStatus
	// staleAsOf, when set (Stale), is what job pages say they are as
	// of: the records a planner whose store does not answer read last.
	staleAsOf time.Time
	// Err, when set, is returned by every method (a failing planner).
	// Set it before serving, or with Fail.
	Err error
	// SetPolicyErr, when set, is returned by SetPolicy for known names
	// (a plugin that fails to launch); the old policy stays.
	SetPolicyErr error
	// CheckpointDirs are the planner's checkpoint_dirs, which Resume
	// answers checkpoints under (structs.Job.ResumeUnder); none: Resume
	// answers none.
	CheckpointDirs []string
	// Leader and Version are what Status reports.
	Leader, Version string
}

// NewBackend returns a fake with the builtin policies (FIFO active) and
// nodes (none when nil).
func NewBackend(nodes ...api.NodeInfo) *Backend {
	return &Backend{
		jobs:     map[string]*structs.Job{},
		nodes:    nodes,
		policies: host.Builtins(),
		active:   structs.PolicyState{Name: builtin.FIFOName, Changed: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)},
		calls:    map[string]int{},
		Leader:   "127.0.0.1:4680",
		Version:  "0.1.0-test",
	}
}

// Node returns a ready node with gpus free A100s, for NewBackend.
func Node(id, name string, gpus int) api.NodeInfo {
	return api.NodeInfo{
		ID: id, Name: name, Pool: "default", Status: "ready", Eligible: true,
		GPUModel: "NVIDIA A100-SXM4-40GB", GPUsTotal: gpus, GPUsFree: gpus,
	}
}

var _ api.Backend = (*Backend)(nil)

func (b *Backend) now() time.Time {
	if b.Now != nil {
		return b.Now()
	}
	return time.Now()
}

// Calls returns how many times each method was called, by name.
func (b *Backend) Calls() map[string]int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return maps.Clone(b.calls)
}

// enter counts a call and returns b.Err; callers hold b.mu.
func (b *Backend) enter(method string) error {
	b.calls[method]++
	return b.Err
}

// enterJob is enter, then the job with id (api.ErrNotFound when none); b.mu
// is held.
func (b *Backend) enterJob(method, id string) (*structs.Job, error) {
	if err := b.enter(method); err != nil {
		return nil, err
	}
	return b.lookup(id)
}

// lookup is the job with id, or api.ErrNotFound; b.mu is held.
func (b *Backend) lookup(id string) (*structs.Job, error) {
	j, ok := b.jobs[id]
	if !ok {
		return nil, fmt.Errorf("job %q: %w", id, api.ErrNotFound)
	}
	return j, nil
}

// Submit queues the job. A job asking for more GPUs than the largest node
// has is an *api.InputError pointing at the job's training block (when the
// fake has nodes).
//
// An idempotency key already held by a job returns that job (structs.Replay).
func (b *Backend) Submit(_ context.Context, spec *jobspec.Spec, source string, idem *structs.Idempotency) (*structs.Job, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Submit"); err != nil {
		return nil, false, err
	}
	if idem != nil {
		for _, j := range b.jobs {
			if j.Idempotency != nil && j.Idempotency.Key == idem.Key {
				j, err := structs.Replay(clone(j), idem)
				return j, err == nil, err
			}
		}
	}
	if largest := b.largestNode(); len(b.nodes) > 0 && spec.GPUs.Min > largest {
		return nil, false, &api.InputError{Diags: hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Not enough GPUs in the cluster",
			Detail:   fmt.Sprintf("The job needs at least %s; the largest node has %d.", policy.GPUs(spec.GPUs.Min), largest),
			Subject:  spec.Range.Ptr(),
		}}}
	}
	b.seq++
	now := b.now()
	j := &structs.Job{
		ID:        fmt.Sprintf("%s-%08x", spec.Name, b.seq),
		Spec:      *spec,
		Source:    source,
		State:     structs.JobQueued,
		Submitted: now,
		Events:    []structs.Event{{Time: now, Type: "submitted", Message: "Job submitted; queued"}},
		Version:   1,
	}
	if f := b.policies[b.active.Name]; f != nil && f().PluginInfo().IgnoresPriority && spec.Priority != jobspec.DefaultPriority {
		j.WarnOnce(now, structs.PriorityIgnored(b.active.Name, spec.Priority))
	}
	if idem != nil {
		c := *idem
		j.Idempotency = &c
	}
	b.jobs[j.ID] = j
	b.order = append(b.order, j.ID)
	return clone(j), false, nil
}

func (b *Backend) largestNode() int {
	n := 0
	for _, node := range b.nodes {
		n = max(n, node.GPUsTotal)
	}
	return n
}

// Job returns the job, after running OnJob.
func (b *Backend) Job(_ context.Context, id string) (*structs.Job, error) {
	b.mu.Lock()
	err := b.enter("Job")
	b.calls["Job:"+id]++
	call := b.calls["Job:"+id]
	hook := b.OnJob
	b.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if hook != nil {
		hook(b, id, call)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	j, err := b.lookup(id)
	if err != nil {
		return nil, err
	}
	return clone(j), nil
}

// Jobs returns the jobs in submission order.
func (b *Backend) Jobs(context.Context) ([]*structs.Job, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Jobs"); err != nil {
		return nil, err
	}
	out := make([]*structs.Job, 0, len(b.order))
	for _, id := range b.order {
		out = append(out, clone(b.jobs[id]))
	}
	return out, nil
}

// JobPage pages the jobs as the stores do (structs.PageOf), in the order
// of their keys (Submitted, ID).
func (b *Backend) JobPage(_ context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("JobPage"); err != nil {
		return nil, err
	}
	sums := make([]structs.JobSummary, 0, len(b.order))
	for _, id := range b.order {
		sums = append(sums, structs.SummaryOf(b.jobs[id]))
	}
	slices.SortFunc(sums, func(a, b structs.JobSummary) int { return a.Compare(b.JobKey) })
	p := structs.PageOf(len(sums), func(i int) *structs.JobSummary { return &sums[i] }, &q)
	out := &structs.JobPage{Total: p.Total, Before: p.Before, Next: p.Next, StaleAsOf: b.staleAsOf}
	for _, i := range p.Index {
		out.Jobs = append(out.Jobs, clone(b.jobs[sums[i].ID]))
	}
	return out, nil
}

// Stop stops a queued or running job; an ended one is api.ErrConflict.
func (b *Backend) Stop(_ context.Context, id string) (*structs.Job, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, err := b.enterJob("Stop", id)
	if err != nil {
		return nil, err
	}
	if j.State.Terminal() {
		return nil, fmt.Errorf("job %q has already ended (%s): %w", id, j.State, api.ErrConflict)
	}
	b.finish(j, structs.JobStopped, "Stopped by a user")
	return clone(j), nil
}

// ReportProgress records the reports in the job (structs.Job.AddProgress),
// in any state, as the planner does.
func (b *Backend) ReportProgress(_ context.Context, id string, reports []api.ProgressReport) (*structs.BatchAdvice, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, err := b.enterJob("ReportProgress", id)
	if err != nil {
		return nil, err
	}
	if err := j.AddProgress(reports, b.now()); err != nil {
		return nil, api.Inputf("%v", err)
	}
	j.Version++
	if j.Batch == nil {
		return nil, nil
	}
	a := *j.Batch
	return &a, nil
}

// Resume is the job's checkpoint under CheckpointDirs, as the planner
// answers it; nil when none.
func (b *Backend) Resume(_ context.Context, id string) (*structs.Resume, time.Time, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	j, err := b.enterJob("Resume", id)
	if err != nil {
		return nil, time.Time{}, err
	}
	return j.ResumeUnder(b.CheckpointDirs), time.Time{}, nil
}

// Policies lists the builtins, sorted by name.
func (b *Backend) Policies(context.Context) ([]api.PolicyInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Policies"); err != nil {
		return nil, err
	}
	var out []api.PolicyInfo
	for _, name := range slices.Sorted(maps.Keys(b.policies)) {
		info := b.policies[name]().PluginInfo()
		out = append(out, api.PolicyInfo{
			Name: name, Version: info.Version, Description: info.Description,
			Kind: api.PolicyBuiltin, Active: name == b.active.Name,
		})
	}
	return out, nil
}

// SetPolicy switches the active policy, checking config with the real
// policy's SetConfig.
func (b *Backend) SetPolicy(_ context.Context, name string, config map[string]string) (*structs.PolicyState, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("SetPolicy"); err != nil {
		return nil, err
	}
	factory, ok := b.policies[name]
	if !ok {
		return nil, api.Inputf("unknown policy %q (known: %v)", name, slices.Sorted(maps.Keys(b.policies)))
	}
	if b.SetPolicyErr != nil {
		b.active.LastError = b.SetPolicyErr.Error()
		return nil, b.SetPolicyErr
	}
	if err := factory().SetConfig(config); err != nil {
		return nil, api.Inputf("invalid configuration for policy %q: %v", name, err)
	}
	b.active = structs.PolicyState{Name: name, Config: maps.Clone(config), Changed: b.now()}
	st := b.active
	return &st, nil
}

// QueueWindow is the window the last Queues call asked for.
func (b *Backend) QueueWindow() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.queueWindow
}

// Queues returns QueueList, or the one queue "default" holding every job.
// Where window is above 0, each queue without a Window gets one over the
// window up to now, with no GPU-hours (set them in QueueList).
func (b *Backend) Queues(_ context.Context, window time.Duration) ([]structs.QueueStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Queues"); err != nil {
		return nil, err
	}
	b.queueWindow = window
	if b.QueueList != nil {
		out := slices.Clone(b.QueueList)
		for i := range out {
			if window > 0 && out[i].Window == nil {
				now := b.now()
				out[i].Window = &structs.QueueWindow{Since: now.Add(-window), Until: now}
			}
		}
		return out, nil
	}
	q := structs.QueueStatus{Name: "default", Weight: 1, GPUs: []structs.QueueGPUs{{}}}
	for _, id := range b.order {
		j := b.jobs[id]
		switch j.State {
		case structs.JobRunning:
			q.Running++
			q.GPUs[0].Used += j.GPUs()
		case structs.JobQueued:
			q.Waiting++
		}
	}
	if window > 0 {
		now := b.now()
		q.Window = &structs.QueueWindow{Since: now.Add(-window), Until: now}
	}
	return []structs.QueueStatus{q}, nil
}

// QueueTree is the queues SetQueues set last, or quota.Default()
// (metrics.Source).
func (b *Backend) QueueTree() *quota.Tree {
	b.mu.Lock()
	defer b.mu.Unlock()
	return cmp.Or(b.tree, quota.Default())
}

// SetQueues parses source as the planner does (config.ParseQueues), and
// refuses, as the planner does, queues that a queued or running job's
// queue is not a leaf of (ErrConflict wrapping structs.ErrOrphanedJobs).
// Otherwise QueueList becomes the new queues, by name only (weight 1, no
// quotas): the fake keeps no quota tree.
func (b *Backend) SetQueues(_ context.Context, source, filename string) ([]structs.QueueStatus, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("SetQueues"); err != nil {
		return nil, err
	}
	tree, diags := config.ParseQueues([]byte(source), filename)
	if diags.HasErrors() {
		return nil, &api.InputError{Msg: "invalid queues: " + hcldiag.Format(diags), Diags: diags}
	}
	for _, id := range b.order {
		if j := b.jobs[id]; !j.State.Terminal() && !tree.HoldsJobs(cmp.Or(j.Spec.Queue, quota.DefaultQueue)) {
			return nil, fmt.Errorf("%w: %w: job %s (queue %s)", api.ErrConflict, structs.ErrOrphanedJobs, id, j.Spec.Queue)
		}
	}
	b.QueueList, b.tree = nil, tree
	for _, name := range tree.Names() {
		b.QueueList = append(b.QueueList, structs.QueueStatus{Name: name, Weight: 1, GPUs: []structs.QueueGPUs{{}}})
	}
	return slices.Clone(b.QueueList), nil
}

// Nodes returns the nodes, with GPUsUsed, GPUsFree and Jobs computed from
// the running jobs' allocations.
func (b *Backend) Nodes(context.Context) ([]api.NodeInfo, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Nodes"); err != nil {
		return nil, err
	}
	out := make([]api.NodeInfo, 0, len(b.nodes))
	for _, n := range b.nodes {
		n.Jobs = map[string]int{}
		n.GPUsUsed = 0
		for _, id := range b.order {
			if g := b.jobs[id].Allocation[n.ID]; g > 0 {
				n.Jobs[id] = g
				n.GPUsUsed += g
			}
		}
		n.GPUsFree = max(0, n.GPUsTotal-n.GPUsUsed)
		if len(n.Jobs) == 0 {
			n.Jobs = nil
		}
		out = append(out, n)
	}
	return out, nil
}

// Status reports Leader, Version and the active policy.
func (b *Backend) Status(context.Context) (*api.Status, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := b.enter("Status"); err != nil {
		return nil, err
	}
	return &api.Status{Leader: b.Leader, IsLeader: true, Version: b.Version, Policy: b.active}, nil
}

// Fail makes every later call return err (nil: succeed again); safe to
// call from an OnJob hook while clients are calling.
func (b *Backend) Fail(err error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.Err = err
}

// Stale makes job pages say they are the records read at asOf (a store
// that does not answer); zero: the store answers again.
func (b *Backend) Stale(asOf time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.staleAsOf = asOf
}

// Update changes a stored job with fn (and bumps its version).
func (b *Backend) Update(id string, fn func(j *structs.Job)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if j, ok := b.jobs[id]; ok {
		fn(j)
		j.Version++
	}
}

// Start runs a queued job with alloc (GPUs per node), as the active
// policy would.
func (b *Backend) Start(id string, alloc map[string]int, reason string) {
	b.Update(id, func(j *structs.Job) {
		now := b.now()
		b.resize(j, alloc, reason, now)
		j.State = structs.JobRunning
		j.Started = now
		j.NomadJobID = "train-" + j.ID
		j.AddEvents(structs.Event{Time: now, Type: "started", Message: fmt.Sprintf("Registered Nomad job %q", j.NomadJobID)})
	})
}

// Resize gives a running job a new allocation.
func (b *Backend) Resize(id string, alloc map[string]int, reason string) {
	b.Update(id, func(j *structs.Job) { b.resize(j, alloc, reason, b.now()) })
}

// Finish ends a job in state (complete, failed or stopped).
func (b *Backend) Finish(id string, state structs.JobState, message string) {
	b.Update(id, func(j *structs.Job) { b.finish(j, state, message) })
}

func (b *Backend) resize(j *structs.Job, alloc map[string]int, reason string, now time.Time) {
	j.Allocation = maps.Clone(alloc)
	j.AddChange(structs.GPUChange{
		Time: now, GPUs: j.GPUs(), Nodes: maps.Clone(alloc), Policy: b.active.Name, Reason: reason,
	})
}

func (b *Backend) finish(j *structs.Job, state structs.JobState, message string) {
	now := b.now()
	if j.GPUs() > 0 {
		b.resize(j, nil, string(state), now)
	}
	j.State = state
	j.Finished = now
	j.AddEvents(structs.Event{Time: now, Type: string(state), Message: message})
	if state == structs.JobComplete {
		zero := 0
		j.ExitCode = &zero
	}
}

// clone copies a job deeply enough that callers cannot change the store.
func clone(j *structs.Job) *structs.Job { return j.Clone() }

// IDs returns the jobs' IDs in submission order.
func (b *Backend) IDs() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.order)
}
