package nomadjob

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
	nomadapi "github.com/hashicorp/nomad/api"

	"github.com/schedulearn/schedulearn/internal/drain"
	"github.com/schedulearn/schedulearn/planner"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// Nomad is the planner's Actuator on a Nomad cluster.
type Nomad struct {
	Client  *nomadapi.Client
	Options Options
	Logger  hclog.Logger
	// OutcomeTimeout bounds one Outcome (DefaultOutcomeTimeout when 0).
	OutcomeTimeout time.Duration
	// ApplyTimeout bounds a start or a stop, and a resize's first read
	// (DefaultApplyTimeout when 0).
	ApplyTimeout time.Duration
}

var (
	_ planner.Actuator  = (*Nomad)(nil)
	_ planner.RunLister = (*Nomad)(nil)
)

func (n *Nomad) query(ctx context.Context) *nomadapi.QueryOptions {
	return (&nomadapi.QueryOptions{Namespace: n.Options.Namespace}).WithContext(ctx)
}

func (n *Nomad) write(ctx context.Context) *nomadapi.WriteOptions {
	return (&nomadapi.WriteOptions{Namespace: n.Options.Namespace}).WithContext(ctx)
}

// Apply implements planner.Actuator. It records the Nomad job's ID in j,
// and at a start the job's modify index (NomadRunIndex: Outcome tells
// this run's launcher from an earlier one's by it).
//
// Every call to Nomad is bounded (a frozen server would hold the round,
// and every round after it): a start or a stop, a few calls, by
// ApplyTimeout; a resize's reads and writes each by the drain client's
// call timeout, and its drain by drainTimeout.
func (n *Nomad) Apply(ctx context.Context, j *structs.Job, target policy.Allocation) error {
	id := JobID(j)
	j.NomadJobID = id
	rctx, cancel := context.WithTimeout(ctx, cmp.Or(n.ApplyTimeout, DefaultApplyTimeout))
	defer cancel()
	current, err := n.registered(rctx, id)
	if err != nil {
		return err
	}
	if target.Total() > 0 && current != nil {
		if j.GPUs() == 0 && current.JobModifyIndex != nil {
			// A start that finds the job registered: its registration
			// went through but the answer was lost (say, past the
			// timeout); this run began there.
			j.NomadRunIndex = *current.JobModifyIndex
		}
		return n.resize(ctx, j, current, target)
	}
	ctx = rctx
	if target.Total() == 0 {
		if current == nil {
			return nil
		}
		// The launcher gets SIGTERM and its kill timeout to commit state.
		_, _, err := n.Client.Jobs().Deregister(id, false, n.write(ctx))
		if err != nil {
			return fmt.Errorf("failed to stop nomad job %s: %w", id, err)
		}
		n.deleteSecrets(ctx, j)
		return nil
	}
	if running, err := n.runningLauncher(ctx, id); err != nil {
		return err
	} else if running != "" {
		return fmt.Errorf("%w (%s)", planner.ErrRunEnding, running)
	}
	if err := n.writeSecrets(ctx, j); err != nil {
		return err
	}
	resp, _, err := n.Client.Jobs().Register(Build(j, target, n.Options), n.write(ctx))
	if err != nil {
		return fmt.Errorf("failed to register nomad job %s: %w", id, err)
	}
	j.NomadRunIndex = resp.JobModifyIndex
	return nil
}

// DefaultApplyTimeout bounds a start or a stop (Apply): three or four
// calls to Nomad, each well under a second from a server that answers.
const DefaultApplyTimeout = 30 * time.Second

// Runs implements planner.RunLister: the jobs (by the planner's job ID)
// whose Nomad jobs, named train-<id>, are not stopped and have a task
// group (the launcher, or workers left by a deregistration that failed)
// with allocations running, starting or queued, from one list of the
// Nomad jobs so named, within runsTimeout (a frozen Nomad would hold the
// planner's rounds).
func (n *Nomad) Runs(ctx context.Context) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, runsTimeout)
	defer cancel()
	q := n.query(ctx)
	q.Prefix = JobPrefix
	stubs, _, err := n.Client.Jobs().List(q)
	if err != nil {
		return nil, fmt.Errorf("failed to list nomad jobs %s*: %w", JobPrefix, err)
	}
	var ids []string
	for _, s := range stubs {
		if s.Stop || s.JobSummary == nil || !strings.HasPrefix(s.ID, JobPrefix) {
			continue
		}
		for _, g := range s.JobSummary.Summary {
			if g.Running+g.Starting+g.Queued > 0 {
				ids = append(ids, strings.TrimPrefix(s.ID, JobPrefix))
				break
			}
		}
	}
	return ids, nil
}

// runsTimeout bounds Runs: one list of every train-* job (some megabytes at
// 20,000 jobs, well under a second from a Nomad that answers). A new
// leader sweeps before its first round, which waits this long at most.
const runsTimeout = 10 * time.Second

// runningLauncher names a launcher allocation of the stopped (or never
// registered) Nomad job id that runs, or may yet run (pending), "" when
// none does: registering the job again would start a second launcher
// beside it. An unknown one (its node cut off) is not waited for: it
// fences itself there, and its node may never come back.
func (n *Nomad) runningLauncher(ctx context.Context, id string) (string, error) {
	allocs, _, err := n.Client.Jobs().Allocations(id, true, n.query(ctx))
	if err != nil {
		if isNotFound(err) {
			return "", nil
		}
		return "", fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	for _, a := range allocs {
		if a.TaskGroup == LauncherGroup && runGoesOn(a.ClientStatus) {
			return fmt.Sprintf("launcher allocation %s on %s is %s", shortID(a.ID), cmp.Or(a.NodeName, shortID(a.NodeID)), a.ClientStatus), nil
		}
	}
	return "", nil
}

// runGoesOn says whether a launcher allocation of client status runs, or
// may yet (pending): neither ended nor unknown (its node cut off, where
// it fences itself).
func runGoesOn(status string) bool {
	return !drain.ClientTerminal(status) && status != nomadapi.AllocClientStatusUnknown
}

// registered returns the job as Nomad has it, or nil if there is none that
// runs (never registered, stopped, or dead).
func (n *Nomad) registered(ctx context.Context, id string) (*nomadapi.Job, error) {
	job, _, err := n.Client.Jobs().Info(id, n.query(ctx))
	if err != nil {
		if isNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("failed to read nomad job %s: %w", id, err)
	}
	if (job.Stop != nil && *job.Stop) || (job.Status != nil && *job.Status == "dead") {
		return nil, nil
	}
	return job, nil
}

// resize changes only the worker groups of the registered job, so the
// launcher's task is untouched and keeps running: growing adds workers
// (Horovod finds them through discovery); shrinking drains the workers that
// go, then lowers the counts, and Nomad stops exactly those
// (drain.Client.Resize, the one resize path).
func (n *Nomad) resize(ctx context.Context, j *structs.Job, current *nomadapi.Job, target policy.Allocation) error {
	have := workerCounts(current)
	want := workersOn(target, j.Spec.GPUs.PerWorker)

	next := *current
	next.TaskGroups = nil
	byNode := map[string]*nomadapi.TaskGroup{}
	for _, tg := range current.TaskGroups {
		if node, ok := strings.CutPrefix(*tg.Name, workerGroupStem); ok {
			byNode[node] = tg
			continue
		}
		next.TaskGroups = append(next.TaskGroups, tg)
	}
	for _, node := range slices.Sorted(mapsKeys(want, have)) {
		c := want[node]
		var tg *nomadapi.TaskGroup
		switch cur, ok := byNode[node]; {
		case !ok && c > 0:
			tg = workerGroup(j, node, c)
		case ok:
			// A copy: current keeps its counts, which say what drains.
			copied := *cur
			copied.Count = ptr(c)
			tg = &copied
		}
		if tg != nil {
			// A group scaled to 0 stays, so its allocations stop; it is
			// dropped at the next resize.
			if c == 0 && have[node] == 0 {
				continue
			}
			next.TaskGroups = append(next.TaskGroups, tg)
		}
	}
	d := &drain.Client{Nomad: n.Client, Namespace: n.Options.Namespace, LauncherGroup: LauncherGroup,
		Timeout: drainTimeout, Forced: func(job string, workers []string, err error) {
			n.Logger.Warn("drain cannot finish: the workers are stopped undrained (the run recovers from its last commit, or has ended with its launcher)",
				"job", job, "workers", workers, "error", err)
		}}
	_, err := d.Resize(ctx, current, &next)
	return err
}

// drainTimeout bounds a shrink's wait for the leaving workers (discovery
// drops them, they go idle): a round applies its changes one after
// another, so a run that does not let its workers go would hold every
// other job's change behind it. After it the workers are stopped anyway
// (drain.Client.Forced), as they are at once when the job's launcher is
// gone. A drain takes 1-5 s on the lab.
const drainTimeout = 2 * time.Minute

// DefaultOutcomeTimeout bounds one Outcome (a few reads, and for an ended
// job its deregistration): Nomad's client has no timeout of its own, and a
// round asks each running job's outcome first, so a frozen Nomad server
// would hold the round, and every round after it, until it answers.
const DefaultOutcomeTimeout = 5 * time.Second

// Outcome implements planner.Actuator: the job has ended when its launcher
// has; the launcher's exit code is the job's. The workers are then stopped.
// It answers within OutcomeTimeout.
func (n *Nomad) Outcome(ctx context.Context, j *structs.Job) (planner.Outcome, error) {
	ctx, cancel := context.WithTimeout(ctx, cmp.Or(n.OutcomeTimeout, DefaultOutcomeTimeout))
	defer cancel()
	id := JobID(j)
	allocs, _, err := n.Client.Jobs().Allocations(id, true, n.query(ctx))
	if err != nil {
		if isNotFound(err) {
			n.deleteSecrets(ctx, j)
			return planner.Outcome{Done: true, ExitCode: -1, Message: "the nomad job is gone"}, nil
		}
		return planner.Outcome{}, fmt.Errorf("failed to list allocations of %s: %w", id, err)
	}
	var launcher *nomadapi.AllocationListStub
	for _, a := range allocs {
		// A launcher created before this run's start is an earlier run's
		// (stopped, or preempted): until Nomad places this run's, its end
		// would read as this run's, and stop the new workers.
		if a.TaskGroup == LauncherGroup && (j.NomadRunIndex == 0 || a.CreateIndex > j.NomadRunIndex) && (launcher == nil || a.CreateIndex > launcher.CreateIndex) {
			launcher = a
		}
	}
	if launcher == nil {
		job, err := n.registered(ctx, id)
		if err != nil {
			return planner.Outcome{}, err
		}
		if job == nil {
			// Its secrets go with it, however it went.
			n.deleteSecrets(ctx, j)
			return planner.Outcome{Done: true, ExitCode: -1, Message: "the nomad job was stopped outside the planner"}, nil
		}
		return n.unplaced(ctx, j, allocs), nil
	}
	// A launcher whose node is cut off is unknown, never replaced (the
	// group's disconnect block): the run is over, and the launcher, fenced,
	// stops itself there.
	if runGoesOn(launcher.ClientStatus) {
		return n.unplaced(ctx, j, allocs), nil
	}
	out := Ended(launcher)
	// The workers serve the launcher only; they go with it.
	if _, _, err := n.Client.Jobs().Deregister(id, false, n.write(ctx)); err != nil {
		n.Logger.Warn("failed to stop the workers of an ended job", "job", id, "error", err)
	}
	n.deleteSecrets(ctx, j)
	return out, nil
}

// Ended is the outcome of a job whose launcher allocation has ended: the
// launcher task's exit code and last message, and whether the run ended
// for a reason of the cluster rather than of the training script
// (Outcome.Infrastructure, see infrastructure). A launcher whose node is
// cut off (unknown) has ended too.
func Ended(launcher *nomadapi.AllocationListStub) planner.Outcome {
	out := planner.Outcome{Done: true, ExitCode: -1, Message: "launcher " + launcher.ClientStatus}
	st := launcher.TaskStates[LauncherTask]
	if st != nil {
		for _, e := range st.Events {
			if e != nil && e.Type == nomadapi.TaskTerminated {
				out.ExitCode = e.ExitCode
				out.Message = e.DisplayMessage
			}
		}
		if out.ExitCode == -1 && launcher.ClientStatus == nomadapi.AllocClientStatusComplete {
			out.ExitCode = 0
		}
		if st.Failed && len(st.Events) > 0 && st.Events[len(st.Events)-1] != nil {
			out.Message = st.Events[len(st.Events)-1].DisplayMessage
		}
	}
	out.Infrastructure = infrastructure(launcher.ClientStatus, st, out)
	return out
}

// infrastructure says why a launcher's run ended for a reason of the
// cluster, "" when the training script's own exit ended it: the launcher
// exited drain.ExitInfrastructure (its workers' hosts, agents or network
// failed, or it was fenced); its allocation was lost (its node went down
// or away) or is unknown (its node is cut off); or its task failed without ever running the command: a
// driver or setup failure, a failed artifact download, or a failure with
// no Terminated event at all (the driver never started it).
func infrastructure(clientStatus string, st *nomadapi.TaskState, out planner.Outcome) string {
	switch {
	case clientStatus == nomadapi.AllocClientStatusLost:
		return "the launcher's allocation was lost (its node went down or away)"
	case clientStatus == nomadapi.AllocClientStatusUnknown:
		return "the launcher's node is cut off from the servers (its allocation is unknown; the launcher stops training there once fenced)"
	case out.ExitCode == drain.ExitInfrastructure:
		return fmt.Sprintf("launcher exited %d: %s", drain.ExitInfrastructure, out.Message)
	case st == nil || out.ExitCode != -1 || clientStatus != nomadapi.AllocClientStatusFailed:
		return ""
	}
	for _, e := range slices.Backward(st.Events) {
		if e == nil {
			continue
		}
		switch e.Type {
		case nomadapi.TaskDriverFailure, nomadapi.TaskSetupFailure, nomadapi.TaskArtifactDownloadFailed:
			return "the launcher never ran: " + strings.ToLower(e.Type) + ": " + eventText(e)
		}
	}
	return "the launcher failed without running its command: " + out.Message
}

// eventText is a task event's message, in Nomad's words.
func eventText(e *nomadapi.TaskEvent) string {
	for _, s := range []string{e.DisplayMessage, e.DriverError, e.SetupError, e.DownloadError, e.Message} {
		if s != "" {
			return s
		}
	}
	return "no message"
}

// unplaced is the outcome of running job j when Nomad has not placed every
// allocation the planner asked of it (its launcher, and a worker per
// PerWorker GPUs of j.Allocation on each node): why (Outcome.Unplaced,
// from the evaluation that failed to place them, while Nomad holds a
// blocked evaluation for the job), and what (the GPUs of each node, the
// launcher); the zero outcome when all are placed, or while Nomad has not
// evaluated a change yet. The planner does not model the nodes' CPU and
// memory: a worker it places where Nomad finds no room waits for room
// there.
func (n *Nomad) unplaced(ctx context.Context, j *structs.Job, allocs []*nomadapi.AllocationListStub) planner.Outcome {
	want := map[string]int{LauncherGroup: 1}
	for node, n := range workersOn(j.Allocation, j.Spec.GPUs.PerWorker) {
		want[WorkerGroup(node)] = n
	}
	have := map[string]int{}
	for _, a := range allocs {
		if a.DesiredStatus == nomadapi.AllocDesiredStatusRun && !drain.ClientTerminal(a.ClientStatus) {
			have[a.TaskGroup]++
		}
	}
	short := false
	names := map[string]string{} // the nodes' names, for Unplaced's words
	for g, c := range want {
		if have[g] >= c {
			continue
		}
		// The workers of a node that is down or cut off do not wait for
		// room there: the node is gone, which the planner's departures
		// say (node-lost), and they leave the job.
		if node, ok := strings.CutPrefix(g, workerGroupStem); ok {
			gone, name := n.nodeState(ctx, node)
			if gone {
				delete(want, g)
				continue
			}
			names[node] = name
		}
		short = true
	}
	if !short {
		return planner.Outcome{}
	}
	evals, _, err := n.Client.Jobs().Evaluations(JobID(j), n.query(ctx))
	if err != nil {
		n.Logger.Debug("failed to read the evaluations of a job short of allocations", "job", JobID(j), "error", err)
		return planner.Outcome{}
	}
	var failed *nomadapi.Evaluation
	blocked := false
	for _, e := range evals {
		blocked = blocked || e.Status == nomadapi.EvalStatusBlocked
		if len(e.FailedTGAllocs) > 0 && (failed == nil || e.CreateIndex > failed.CreateIndex) {
			failed = e
		}
	}
	if !blocked || failed == nil {
		return planner.Outcome{}
	}
	out := planner.Outcome{Unplaced: Unplaced(failed.FailedTGAllocs, want, have, names)}
	if out.Unplaced != "" {
		out.UnplacedGPUs, out.UnplacedLauncher = Missing(want, have, max(j.Spec.GPUs.PerWorker, 1))
	}
	return out
}

// Missing is what of a job Nomad has not placed: the GPUs on each node
// (by ID) of its workers short of want (per GPUs a worker), and whether
// its launcher is.
func Missing(want, have map[string]int, per int) (map[string]int, bool) {
	gpus := map[string]int{}
	for g, c := range want {
		if node, ok := strings.CutPrefix(g, workerGroupStem); ok && have[g] < c {
			gpus[node] = (c - have[g]) * per
		}
	}
	return gpus, have[LauncherGroup] < want[LauncherGroup]
}

// maxUnplaced bounds the message Unplaced makes (it goes into a job's events).
const maxUnplaced = 500

// nodeState says whether Nomad has the node down or disconnected (or no
// longer knows it), and its name ("" where not known); a node it cannot
// be asked about is not gone.
func (n *Nomad) nodeState(ctx context.Context, nodeID string) (gone bool, name string) {
	node, _, err := n.Client.Nodes().Info(nodeID, n.query(ctx))
	if err != nil {
		return isNotFound(err), ""
	}
	return node.Status == nomadapi.NodeStatusDown || node.Status == nomadapi.NodeStatusDisconnected, node.Name
}

// Unplaced says in one line which of a job's groups Nomad could not place
// and why, from an evaluation's failed placements (failed: by group), with
// the allocations the planner wants and Nomad runs of each group. A node
// is named by its name (names, by ID), as node list and the dashboard
// name it; by its short ID where names does not know it.
func Unplaced(failed map[string]*nomadapi.AllocationMetric, want, have map[string]int, names map[string]string) string {
	var parts []string
	for _, g := range slices.Sorted(maps.Keys(failed)) {
		m := failed[g]
		if m == nil || have[g] >= want[g] {
			continue
		}
		what := "the launcher"
		if node, ok := strings.CutPrefix(g, workerGroupStem); ok {
			what = fmt.Sprintf("%d of %d workers on node %s", want[g]-have[g], want[g], cmp.Or(names[node], shortID(node)))
		}
		parts = append(parts, what+": "+placementFailure(m))
	}
	if len(parts) == 0 {
		return ""
	}
	msg := "Nomad has not placed " + strings.Join(parts, "; ") + "; they wait for room there"
	return structs.Clip(msg, maxUnplaced)
}

// placementFailure is why Nomad's scheduler placed nothing, in Nomad's
// words (as `nomad job status` prints a failed placement).
func placementFailure(m *nomadapi.AllocationMetric) string {
	var why []string
	nodes := func(n int) string { return policy.Count(n, "node") }
	for _, d := range slices.Sorted(maps.Keys(m.DimensionExhausted)) {
		why = append(why, fmt.Sprintf("%s exhausted on %s", d, nodes(m.DimensionExhausted[d])))
	}
	for _, c := range slices.Sorted(maps.Keys(m.ConstraintFiltered)) {
		why = append(why, fmt.Sprintf("constraint %s filtered %s", c, nodes(m.ConstraintFiltered[c])))
	}
	for _, c := range slices.Sorted(maps.Keys(m.ClassExhausted)) {
		why = append(why, fmt.Sprintf("class %s exhausted on %s", c, nodes(m.ClassExhausted[c])))
	}
	for _, q := range m.QuotaExhausted {
		why = append(why, "quota exhausted: "+q)
	}
	if len(why) == 0 {
		why = append(why, fmt.Sprintf("%d of %s evaluated exhausted", m.NodesExhausted, nodes(m.NodesEvaluated)))
	}
	return strings.Join(why, ", ")
}

// shortID is a Nomad ID's first 8 characters, as Nomad's CLI prints it.
func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// writeSecrets writes j's secret variable (Secrets), with a new driver
// secret, for a new registration of its Nomad job.
func (n *Nomad) writeSecrets(ctx context.Context, j *structs.Job) error {
	items, err := Secrets(j, n.Options)
	if err != nil {
		return err
	}
	v := &nomadapi.Variable{Namespace: n.Options.Namespace, Path: SecretVariable(j), Items: items}
	if _, _, err := n.Client.Variables().Create(v, n.write(ctx)); err != nil {
		return fmt.Errorf("failed to write nomad variable %s (the planner's nomad token needs variables write on nomad/jobs/train-*): %w", v.Path, err)
	}
	return nil
}

// deleteSecrets deletes j's secret variable once its Nomad job is stopped;
// its tasks have read it already.
func (n *Nomad) deleteSecrets(ctx context.Context, j *structs.Job) {
	path := SecretVariable(j)
	if _, err := n.Client.Variables().Delete(path, n.write(ctx)); err != nil && !isNotFound(err) {
		n.Logger.Warn("failed to delete the secrets of a stopped job", "variable", path, "error", err)
	}
}

func isNotFound(err error) bool {
	var ue nomadapi.UnexpectedResponseError
	return errors.As(err, &ue) && ue.StatusCode() == 404
}

func mapsKeys(ms ...map[string]int) func(func(string) bool) {
	return func(yield func(string) bool) {
		seen := map[string]bool{}
		for _, m := range ms {
			for k := range m {
				if !seen[k] {
					seen[k] = true
					if !yield(k) {
						return
					}
				}
			}
		}
	}
}
