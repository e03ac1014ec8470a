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
	// RuleUnknownJob: the plan names a job that is not in the snapshot.
	RuleUnknownJob Rule = "unknown-job"
	// RuleUnknownNode: an allocation names a node that is not in the snapshot.
	RuleUnknownNode Rule = "unknown-node"
	// RuleGangSize: a job's total is neither 0 nor a multiple of PerWorker
	// within [Min, Max] (or the request itself is malformed).
	RuleGangSize Rule = "gang-size"
	// RuleWholeWorkers: a job's count on a node is negative or not a multiple
	// of PerWorker (a worker's GPUs must be on one node).
	RuleWholeWorkers Rule = "whole-workers"
	// RuleCapacity: a node would hold more GPUs than it has.
	RuleCapacity Rule = "capacity"
	// RuleConstraint: GPUs added on a node that fails the job's model,
	// memory, pool, attribute or per-node constraints.
	RuleConstraint Rule = "constraint"
	// RuleAntiAffinity: GPUs added on a node that holds a job the job must
	// not share a node with.
	RuleAntiAffinity Rule = "anti-affinity"
	// RuleOneModel: a job gains GPUs and its target then spans nodes of
	// more than one GPU model (Node.GPUModel): a job runs on one model at
	// a time.
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
		if v, ok := e.(*Violation); ok {
			out = append(out, v)
			return
		}
		switch u := e.(type) {
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
	var errs []error
	add := func(rule Rule, job, node, format string, args ...any) {
		errs = append(errs, &Violation{Rule: rule, Job: job, Node: node, Detail: fmt.Sprintf(format, args...)})
	}

	nodes := make(map[string]*Node, len(s.Nodes))
	for i := range s.Nodes {
		nodes[s.Nodes[i].ID] = &s.Nodes[i]
	}
	jobs := make(map[string]*Job, len(s.Jobs))
	anti := false
	for i := range s.Jobs {
		jobs[s.Jobs[i].ID] = &s.Jobs[i]
		anti = anti || !s.Jobs[i].AntiAffinity.IsZero()
	}

	for _, id := range slices.Sorted(maps.Keys(p.Allocations)) {
		if jobs[id] == nil {
			add(RuleUnknownJob, id, "", "job is not in the snapshot")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.Reasons)) {
		if jobs[id] == nil && p.Allocations[id] == nil {
			add(RuleUnknownJob, id, "", "job has reasons but is not in the snapshot")
		}
	}

	used := make(map[string]int, len(s.Nodes))
	// onNode lists the jobs holding GPUs on each node, for anti-affinity.
	var onNode map[string][]*Job
	if anti {
		onNode = make(map[string][]*Job)
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		target := p.Target(j)
		w := j.GPUs.PerWorker
		if w <= 0 || j.GPUs.Min < 0 || j.GPUs.Max < j.GPUs.Min {
			add(RuleGangSize, j.ID, "", "malformed request min=%d max=%d per_worker=%d", j.GPUs.Min, j.GPUs.Max, w)
			w = 1
		}
		total := 0
		var models []string // the models of the target's nodes, for one-model
		gains := false
		for _, n := range target.Nodes() {
			g := target[n]
			if g > 0 {
				total += g
			}
			node := nodes[n]
			if node != nil && g > 0 && !slices.Contains(models, node.GPUModel) {
				models = append(models, node.GPUModel)
			}
			gains = gains || (node != nil && g > 0 && g > j.Allocation[n])
			switch {
			case node == nil:
				add(RuleUnknownNode, j.ID, n, "node is not in the snapshot")
				continue
			case g < 0:
				add(RuleWholeWorkers, j.ID, n, "%s is negative", GPUs(g))
				continue
			case g%w != 0:
				add(RuleWholeWorkers, j.ID, n, "%s is not a whole number of %d-GPU workers", GPUs(g), w)
			}
			used[n] += g
			if anti {
				onNode[n] = append(onNode[n], j)
			}
			if g <= j.Allocation[n] {
				continue // held already; not judged again
			}
			if why := j.Constraints.mismatch(node); why != "" {
				add(RuleConstraint, j.ID, n, "%s", why)
			}
			if c := j.Constraints.MaxGPUsPerNode; c > 0 && g > c {
				add(RuleConstraint, j.ID, n, "%s exceeds max_gpus_per_node %d", GPUs(g), c)
			}
		}
		if total != 0 && (total < j.GPUs.Min || total > j.GPUs.Max || total%w != 0) {
			add(RuleGangSize, j.ID, "", "%s is not 0 or a multiple of %d in [%d, %d]", GPUs(total), w, j.GPUs.Min, j.GPUs.Max)
		}
		if gains && len(models) > 1 {
			slices.Sort(models)
			add(RuleOneModel, j.ID, "", "GPUs of %d models (%s) in one job", len(models), strings.Join(models, ", "))
		}
	}

	for i := range s.Nodes {
		n := &s.Nodes[i]
		if have := n.GPUs - n.Reserved; used[n.ID] > have {
			add(RuleCapacity, "", n.ID, "%s planned, %d available (%d reserved)", GPUs(used[n.ID]), have, n.Reserved)
		}
	}

	if anti {
		for i := range s.Jobs {
			j := &s.Jobs[i]
			target := p.Target(j)
			for _, n := range target.Nodes() {
				if target[n] <= j.Allocation[n] {
					continue
				}
				for _, k := range onNode[n] {
					// Report a pair once when both jobs gain GPUs on n.
					kGains := p.Target(k)[n] > k.Allocation[n]
					if conflicts(j, k) && (!kGains || j.ID < k.ID) {
						add(RuleAntiAffinity, j.ID, n, "shares the node with job %s", k.ID)
					}
				}
			}
		}
	}
	return errors.Join(errs...)
}
