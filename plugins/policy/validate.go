package policy

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Rule names a rule of Validate.
type Rule string

const (
	// RuleUnknownJob is broken when the plan names a job that is not in
	// the snapshot.
	RuleUnknownJob Rule = "unknown-job"
	// RuleUnknownNode is broken when an allocation names a node that is
	// not in the snapshot.
	RuleUnknownNode Rule = "unknown-node"
	// RuleGangSize is broken when a job's total is neither 0 nor a
	// multiple of PerWorker within [Min, Max] (or the request itself is
	// malformed).
	RuleGangSize Rule = "gang-size"
	// RuleWholeWorkers is broken when a job's count on a node is negative
	// or not a multiple of PerWorker (a worker's GPUs must be on one node).
	RuleWholeWorkers Rule = "whole-workers"
	// RuleCapacity is broken when a node would hold more GPUs than it has.
	RuleCapacity Rule = "capacity"
	// RuleConstraint is broken by GPUs added on a node that fails the
	// job's model, memory, pool, attribute or per-node constraints.
	RuleConstraint Rule = "constraint"
	// RuleAntiAffinity is broken by GPUs added on a node that holds a job
	// the job must not share a node with.
	RuleAntiAffinity Rule = "anti-affinity"
	// RuleOneModel is broken when a job gains GPUs and its target then
	// spans nodes of more than one GPU model (Node.GPUModel): a job runs
	// on one model at a time.
	RuleOneModel Rule = "one-model"
)

// Violation is one broken rule. Validate returns them joined
// (errors.Join); Violations takes them apart again.
type Violation struct {
	Rule Rule
	// Job is the job's ID; empty for a node's capacity.
	Job string
	// Node is the node's ID, where the rule concerns one.
	Node   string
	Detail string
}

func (v *Violation) Error() string {
	switch {
	case v.Job != "" && v.Node != "":
		return fmt.Sprintf("job %s on node %s: %s: %s", v.Job, v.Node, v.Rule, v.Detail)
	case v.Job != "":
		return fmt.Sprintf("job %s: %s: %s", v.Job, v.Rule, v.Detail)
	default:
		return fmt.Sprintf("node %s: %s: %s", v.Node, v.Rule, v.Detail)
	}
}

// Violations returns the violations in an error returned by Validate
// (wrapped or not); nil if there are none.
func Violations(err error) []*Violation {
	var out []*Violation
	var walk func(error)
	walk = func(e error) {
		// Every violation in the tree, where errors.As finds only the first.
		if v, ok := e.(*Violation); ok { //nolint:errorlint // walks the tree itself
			out = append(out, v)
			return
		}
		switch u := e.(type) { //nolint:errorlint // walks the tree itself
		case interface{ Unwrap() []error }:
			for _, x := range u.Unwrap() {
				walk(x)
			}
		case interface{ Unwrap() error }:
			if x := u.Unwrap(); x != nil {
				walk(x)
			}
		}
	}
	if err != nil {
		walk(err)
	}
	return out
}

// Validate checks plan p against snapshot s and returns every violation,
// joined, or nil. This is the gang rule and the placement rules in one place:
//
//   - every job in the plan is in the snapshot;
//   - each job holds 0 GPUs or a total within [Min, Max] that is a multiple
//     of PerWorker;
//   - each job's count on each node is a multiple of PerWorker (whole
//     workers), on a node of the snapshot;
//   - no node holds more than GPUs - Reserved, counting every job's target;
//   - GPUs a job gains on a node (target above its current count there)
//     honour its constraints (model, memory, pool, node attributes,
//     MaxGPUsPerNode) and anti-affinity. GPUs a running job already holds
//     are not judged again, so a node that changed pool under a running job
//     does not make every later plan invalid;
//   - a job that gains GPUs anywhere holds GPUs of one model only in its
//     target (one-model): never an A100 and a V100 in one job. A target
//     that only keeps or shrinks what the job holds is not judged again.
//
// A plan that passes costs one pass over the jobs and their allocations
// (see valid); only a plan that fails is checked again in full, to list
// every violation in a stable order.
func Validate(s *Snapshot, p *Plan) error {
	if s == nil || p == nil {
		return errors.New("failed to validate plan: nil snapshot or plan")
	}
	if valid(s, p) {
		return nil
	}
	return violations(s, p)
}

// violations is Validate's full check: every violation, joined, in a stable
// order (unknown jobs by ID; then per job in snapshot order, per node by
// ID; then capacity per node; then anti-affinity).
func violations(s *Snapshot, p *Plan) error {
	f := newFullCheck(s, p)
	f.unknownJobs()
	for i := range s.Jobs {
		f.job(&s.Jobs[i])
	}
	f.capacity()
	if f.anti {
		f.antiAffinity()
	}
	return errors.Join(f.errs...)
}

// fullCheck is violations under way: the snapshot's nodes and jobs by
// ID, whether some job has anti-affinity, what the plan puts on each node
// (used, and onNode, the jobs there, for anti-affinity only), and the
// violations found so far, in the order they are reported.
type fullCheck struct {
	s      *Snapshot
	p      *Plan
	nodes  map[string]*Node
	jobs   map[string]*Job
	anti   bool
	used   map[string]int
	onNode map[string][]*Job
	errs   []error
}

// newFullCheck indexes snapshot s's nodes and jobs for checking plan p.
func newFullCheck(s *Snapshot, p *Plan) *fullCheck {
	f := &fullCheck{s: s, p: p, nodes: make(map[string]*Node, len(s.Nodes)), jobs: make(map[string]*Job, len(s.Jobs)),
		used: make(map[string]int, len(s.Nodes))}
	for i := range s.Nodes {
		f.nodes[s.Nodes[i].ID] = &s.Nodes[i]
	}
	for i := range s.Jobs {
		f.jobs[s.Jobs[i].ID] = &s.Jobs[i]
		f.anti = f.anti || !s.Jobs[i].AntiAffinity.IsZero()
	}
	if f.anti {
		f.onNode = make(map[string][]*Job)
	}
	return f
}

// add records a violation of rule by job on node (either may be "").
func (f *fullCheck) add(rule Rule, job, node, format string, args ...any) {
	f.errs = append(f.errs, &Violation{Rule: rule, Job: job, Node: node, Detail: fmt.Sprintf(format, args...)})
}

// unknownJobs reports the plan's entries for jobs the snapshot lacks, by
// ID: allocations first, then reasons (a job with both is reported once).
func (f *fullCheck) unknownJobs() {
	for _, id := range slices.Sorted(maps.Keys(f.p.Allocations)) {
		if f.jobs[id] == nil {
			f.add(RuleUnknownJob, id, "", "job is not in the snapshot")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(f.p.Reasons)) {
		if f.jobs[id] == nil && f.p.Allocations[id] == nil {
			f.add(RuleUnknownJob, id, "", "job has reasons but is not in the snapshot")
		}
	}
}

// job checks job j's target, node by node in ID order (see placement),
// then as a whole: its total (the gang rule) and, where it gains GPUs
// anywhere, its GPU models (one-model).
func (f *fullCheck) job(j *Job) {
	target := f.p.Target(j)
	w := f.workerSize(j)
	total := 0
	var models []string // the models of the target's nodes, for one-model
	gains := false
	for _, n := range target.Nodes() {
		g := target[n]
		if g > 0 {
			total += g
		}
		if node := f.nodes[n]; node != nil && g > 0 {
			if !slices.Contains(models, node.GPUModel) {
				models = append(models, node.GPUModel)
			}
			gains = gains || g > j.Allocation[n]
		}
		f.placement(j, n, g, w)
	}
	if !gangOK(j, total, w) {
		f.add(RuleGangSize, j.ID, "", "%s is not 0 or a multiple of %d in [%d, %d]", GPUs(total), w, j.GPUs.Min, j.GPUs.Max)
	}
	if gains && len(models) > 1 {
		slices.Sort(models)
		f.add(RuleOneModel, j.ID, "", "GPUs of %d models (%s) in one job", len(models), strings.Join(models, ", "))
	}
}

// workerSize is job j's GPUs per worker. A malformed request is a
// violation, and 1 then, so that its target is still checked.
func (f *fullCheck) workerSize(j *Job) int {
	if malformed(j) {
		f.add(RuleGangSize, j.ID, "", "malformed request min=%d max=%d per_worker=%d", j.GPUs.Min, j.GPUs.Max, j.GPUs.PerWorker)
		return 1
	}
	return j.GPUs.PerWorker
}

// placement checks job j's g GPUs on node n, with w GPUs a worker: a node
// of the snapshot, whole workers, and, where j gains GPUs there, its
// constraints (GPUs it holds already are not judged again). It counts
// them into the node's use, for capacity and anti-affinity.
func (f *fullCheck) placement(j *Job, n string, g, w int) {
	node := f.nodes[n]
	switch {
	case node == nil:
		f.add(RuleUnknownNode, j.ID, n, "node is not in the snapshot")
		return
	case g < 0:
		f.add(RuleWholeWorkers, j.ID, n, "%s is negative", GPUs(g))
		return
	case g%w != 0:
		f.add(RuleWholeWorkers, j.ID, n, "%s is not a whole number of %d-GPU workers", GPUs(g), w)
	}
	f.used[n] += g
	if f.anti {
		f.onNode[n] = append(f.onNode[n], j)
	}
	if g <= j.Allocation[n] {
		return // held already; not judged again
	}
	if why := j.Constraints.mismatch(node); why != "" {
		f.add(RuleConstraint, j.ID, n, "%s", why)
	}
	if c := j.Constraints.MaxGPUsPerNode; c > 0 && g > c {
		f.add(RuleConstraint, j.ID, n, "%s exceeds max_gpus_per_node %d", GPUs(g), c)
	}
}

// capacity reports, in snapshot order, each node the plan gives more GPUs
// than it has unreserved.
func (f *fullCheck) capacity() {
	for i := range f.s.Nodes {
		n := &f.s.Nodes[i]
		if have := n.GPUs - n.Reserved; f.used[n.ID] > have {
			f.add(RuleCapacity, "", n.ID, "%s planned, %d available (%d reserved)", GPUs(f.used[n.ID]), have, n.Reserved)
		}
	}
}

// antiAffinity reports each job that gains GPUs on a node beside a job
// it conflicts with, in snapshot order, per node by ID.
func (f *fullCheck) antiAffinity() {
	for i := range f.s.Jobs {
		j := &f.s.Jobs[i]
		target := f.p.Target(j)
		for _, n := range target.Nodes() {
			if target[n] > j.Allocation[n] {
				f.neighbours(j, n)
			}
		}
	}
}

// neighbours reports the jobs on node n that job j, which gains GPUs
// there, conflicts with; a pair once where both gain GPUs on n.
func (f *fullCheck) neighbours(j *Job, n string) {
	for _, k := range f.onNode[n] {
		kGains := f.p.Target(k)[n] > k.Allocation[n]
		if conflicts(j, k) && (!kGains || j.ID < k.ID) {
			f.add(RuleAntiAffinity, j.ID, n, "shares the node with job %s", k.ID)
		}
	}
}

// malformed reports whether job j's request cannot be met by any count:
// no GPUs a worker, a negative min, or a max below it. Both checks judge
// a malformed request first.
func malformed(j *Job) bool {
	return j.GPUs.PerWorker <= 0 || j.GPUs.Min < 0 || j.GPUs.Max < j.GPUs.Min
}

// gangOK reports whether job j may hold total GPUs at w a worker: none,
// or whole workers within its range (the gang rule).
func gangOK(j *Job, total, w int) bool {
	return total == 0 || total >= j.GPUs.Min && total <= j.GPUs.Max && total%w == 0
}
