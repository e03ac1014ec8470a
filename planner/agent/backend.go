package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
	"github.com/schedulearn/schedulearn/planner/api"
	"github.com/schedulearn/schedulearn/planner/cluster"
	"github.com/schedulearn/schedulearn/planner/config"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
	"github.com/schedulearn/schedulearn/planner/structs"
)

// backend serves the API from the agent. Reads come from the store, so any
// planner answers them; writes that act on Nomad or the policy are the
// leader's. Submissions only add a record, so a standby takes them too.
// Errors pass through as the store and the planner return them: they are
// the planner's own (structs.ErrNotFound and friends), which the API maps
// onto status codes.
type backend struct{ a *Agent }

var _ api.Backend = (*backend)(nil)

// DefaultSubmitTimeout bounds a submission: a read of the cluster (itself
// bounded by cluster.DefaultTimeout) and the store's writes. A frozen
// Consul agent takes the store's request and never answers, and its
// servers' RPCs time out after a minute: past the bound the API answers
// 503, saying so, rather than hold the client until it gives up.
const DefaultSubmitTimeout = 2 * cluster.DefaultTimeout

// Submit stores the job, within submitTimeout.
func (b *backend) Submit(ctx context.Context, spec *jobspec.Spec, source string, idem *structs.Idempotency) (*structs.Job, bool, error) {
	bounded, cancel := context.WithTimeout(ctx, b.a.submitTimeout)
	defer cancel()
	j, replayed, err := b.a.planner.Submit(bounded, spec, source, idem)
	if err != nil && ctx.Err() == nil && errors.Is(bounded.Err(), context.DeadlineExceeded) {
		again := "submit it again"
		if idem != nil {
			again = "submitting it again with the same " + api.IdempotencyHeader + " is safe"
		}
		return nil, false, fmt.Errorf("the %s store or the cluster did not answer within %s, so the job may not be stored (%s): %w: %w",
			b.a.cfg.Store.Backend, b.a.submitTimeout, again, api.ErrUnavailable, err)
	}
	return j, replayed, err
}

// Job and Jobs answer from the records read last while the store does
// not answer (lastKnown).
func (b *backend) Job(ctx context.Context, id string) (*structs.Job, error) {
	return b.a.known.job(ctx, id, b.a.store.GetJob)
}

func (b *backend) Jobs(ctx context.Context) ([]*structs.Job, error) {
	return b.a.known.list(ctx, b.a.store.ListJobs)
}

func (b *backend) JobPage(ctx context.Context, q structs.JobQuery) (*structs.JobPage, error) {
	return b.a.known.page(ctx, q, b.a.store.ListJobsPage)
}

func (b *backend) Stop(ctx context.Context, id string) (*structs.Job, error) {
	if !b.a.isLeading() {
		return nil, b.a.errNotLeader()
	}
	ctx = b.a.fenced(ctx)
	return b.a.planner.Stop(ctx, id)
}

// ReportProgress records a job's progress reports. Like a submission it
// only writes a record, so a standby takes it too; the store's optimistic
// concurrency (retried by the planner) keeps it from clobbering the
// leader's writes.
func (b *backend) ReportProgress(ctx context.Context, id string, reports []api.ProgressReport) (*structs.BatchAdvice, error) {
	return b.a.planner.ReportProgressAdvice(ctx, id, reports)
}

// Resume reads the job as Job does (bounded, the last known record while
// the store does not answer) and answers the planner's resume point for
// it, and, for a record kept, as of when (the API marks the answer: a
// script keeps the checkpoint it names while it deletes older ones, and
// the SDK's planner_resume_point refuses a marked answer, whose record may
// name one the store no longer holds; resume() at a worker's start takes
// it). Any planner answers it, as a read.
func (b *backend) Resume(ctx context.Context, id string) (*structs.Resume, time.Time, error) {
	j, asOf, err := b.a.known.jobAsOf(ctx, id, b.a.store.GetJob)
	if err != nil {
		return nil, time.Time{}, err
	}
	return b.a.planner.ResumePoint(j), asOf, nil
}

func (b *backend) Policies(ctx context.Context) ([]api.PolicyInfo, error) {
	names, err := b.a.planner.Policies.Available()
	if err != nil {
		return nil, err
	}
	active, _ := b.a.planner.Policies.Active()
	if !slices.Contains(names, active) {
		names = append(names, active)
	}
	var out []api.PolicyInfo
	for _, name := range names {
		info, builtin, err := b.a.planner.Policies.Describe(name)
		if err != nil {
			return nil, err
		}
		kind := api.PolicyExternal
		if builtin {
			kind = api.PolicyBuiltin
		}
		out = append(out, api.PolicyInfo{Name: name, Version: info.Version, Description: info.Description, Kind: kind, Active: name == active})
	}
	return out, nil
}

func (b *backend) SetPolicy(ctx context.Context, name string, config map[string]string) (*structs.PolicyState, error) {
	if !b.a.isLeading() {
		return nil, b.a.errNotLeader()
	}
	ctx = b.a.fenced(ctx)
	names, err := b.a.planner.Policies.Available()
	if err != nil {
		return nil, err
	}
	if !slices.Contains(names, name) {
		return nil, structs.Inputf("unknown policy %q; the planner can run: %v", name, names)
	}
	st, err := b.a.planner.SetPolicy(ctx, name, config)
	if err != nil {
		if _, builtin, _ := b.a.planner.Policies.Describe(name); builtin {
			// A builtin that refuses its config: the request is wrong.
			return nil, structs.Inputf("%v", err)
		}
		return nil, err
	}
	return st, nil
}

// QueueTree is the planner's queues (metrics.Source: the labels of the
// jobs gauge).
func (b *backend) QueueTree() *quota.Tree { return b.a.planner.Queues() }

func (b *backend) Queues(ctx context.Context, window time.Duration) ([]structs.QueueStatus, error) {
	return b.a.planner.QueueStatus(ctx, window)
}

// SetQueues makes the request's queue blocks the leader's queues until
// the next reload or restart, when the config file's apply again (see
// docs/policies.md). A standby refuses it: its queues are not the ones
// the rounds use.
func (b *backend) SetQueues(ctx context.Context, source, filename string) ([]structs.QueueStatus, error) {
	if !b.a.isLeading() {
		return nil, b.a.errNotLeader()
	}
	tree, diags := config.ParseQueues([]byte(source), filename)
	if diags.HasErrors() {
		return nil, &structs.InputError{Msg: "invalid queues: " + hcldiag.Format(diags), Diags: diags}
	}
	if err := b.a.planner.ReplaceQueues(ctx, tree); err != nil {
		if errors.Is(err, structs.ErrOrphanedJobs) {
			return nil, fmt.Errorf("%w: %w", structs.ErrConflict, err)
		}
		return nil, err
	}
	b.a.logger.Info("queues changed through the API; the config file's apply again at the next reload", "queues", strings.Join(tree.Names(), ","))
	return b.a.planner.QueueStatus(ctx, 0)
}

// knownNodes is a cluster that answers what it last read when a read
// fails (cluster.View).
type knownNodes interface {
	Known(ctx context.Context) (cluster.Reading, error)
}

// readNodes reads the cluster; a cluster.View answers what it last read,
// with how old it is, while Nomad or Consul fail.
func (b *backend) readNodes(ctx context.Context) (cluster.Reading, error) {
	if k, ok := b.a.planner.Cluster.(knownNodes); ok {
		return k.Known(ctx)
	}
	nodes, err := b.a.planner.Cluster.Nodes(ctx)
	return cluster.Reading{Nodes: nodes}, err
}

func (b *backend) Nodes(ctx context.Context) ([]api.NodeInfo, error) {
	r, err := b.readNodes(ctx)
	if err != nil {
		return nil, err
	}
	// Only running jobs hold GPUs (a job requeued gives them all back).
	running, err := b.a.store.ListJobsPage(ctx, structs.JobQuery{States: []structs.JobState{structs.JobRunning}})
	if err != nil {
		return nil, err
	}
	jobs := running.Jobs
	out := make([]api.NodeInfo, 0, len(r.Nodes))
	for _, n := range r.Nodes {
		info := api.NodeInfo{ID: n.ID, Name: n.Name, Pool: n.Pool, Status: "ready", Eligible: true, GPUModel: n.GPUModel, GPUsTotal: n.GPUs,
			AsOf: r.AsOf, StaleSince: r.StaleSince, Stale: r.Stale}
		for _, j := range jobs {
			if g := j.Allocation[n.ID]; g > 0 && !j.State.Terminal() {
				if info.Jobs == nil {
					info.Jobs = map[string]int{}
				}
				info.Jobs[j.ID] = g
				info.GPUsUsed += g
			}
		}
		info.GPUsFree = max(0, n.GPUs-n.Reserved-info.GPUsUsed)
		out = append(out, info)
	}
	return out, nil
}

// Status answers within statusTimeout whatever Consul does: the leader's
// address and the stored policy's times are left out when it does not say.
func (b *backend) Status(ctx context.Context) (*api.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, statusTimeout)
	defer cancel()
	name, config := b.a.planner.Policies.Active()
	st := &api.Status{Leader: b.a.leaderAddr(ctx), IsLeader: b.a.isLeading(), Version: Version,
		Policy: structs.PolicyState{Name: name, Config: config}}
	if stored, err := b.a.store.GetPolicy(ctx); err == nil {
		st.Policy.Changed = stored.Changed
		st.Policy.LastError = stored.LastError
	}
	if err := b.a.planner.Policies.LastError(); err != nil {
		st.Policy.LastError = err.Error()
	}
	return st, nil
}
