package planner

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
	"unsafe"

	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/structs"
	"github.com/schedulearn/schedulearn/plugins/policy"
)

// snapshot is what the policy sees this round. The store is the truth for
// what each job holds; GPUs on nodes that are gone (down, drained, no longer
// offering GPUs) are dropped, so the policy never plans on a lost node.
func snapshot(now time.Time, nodes []policy.Node, jobs []*structs.Job) *policy.Snapshot {
	return (*snapCache)(nil).snapshot(now, nodes, jobs, slices.ContainsFunc(jobs, namesJobs), nil, nil)
}

// namesJobs reports whether a selector of job j names jobs (by name or
// ID): the snapshot then resolves the names to IDs.
func namesJobs(j *structs.Job) bool {
	return len(j.Spec.Affinity.Jobs) > 0 || len(j.Spec.AntiAffinity.Jobs) > 0
}

// snapCache is the last round's snapshot beside the records it was made
// from, for a store whose records never change once stored
// (store.SharedLister): a job's view is the same as long as its record
// and the nodes are, but for what the time changes (timed), so the next
// round copies it and renews only that, instead of reading the record
// again (the snapshot was most of a round with thousands of queued jobs).
// Every job is viewed afresh while a selector names jobs by name (the IDs
// it stands for depend on the others).
//
// The views of the round before the last (spare, spareHeld) are kept to
// be written over by the next round, not allocated anew (100,000 views
// are 46 MB): a round's views are read after it only by the API's wait
// reasons (Planner.Waits), so they are overwritten only once that has
// let go of them (the unread of snapshot).
type snapCache struct {
	recs  []*structs.Job // the records of jobs, in the queue's order
	jobs  []policy.Job
	held  []viewTime // what renews each of jobs at a new time
	nodes []policy.Node
	named bool // a selector named jobs

	spare     []policy.Job // the views of the round before: jobs' buffer next round if unread
	spareHeld []viewTime

	// ran is whether each of recs is of a running job, as the round read
	// it (Planner.round sets it; nil: unknown), and placed whether it is
	// of one whose record says that Nomad has placed all of it
	// (lastUnplaced is ""), so that the next round need not read its
	// events again to tell (a cache miss a running job).
	ran, placed []bool
}

// recWalk goes through the last round's records (snapCache.recs) beside
// this round's, both in the queue's order, so that the round reads only
// the records that are new since (a record never changes once stored):
// with thousands of jobs queued, reading each record's state was a cache
// miss a job every round.
type recWalk struct {
	recs        []*structs.Job
	ran, placed []bool
	named       bool // a selector of the last round's named jobs, or nothing is known
	i           int
}

// walk starts a recWalk over the last round's records.
func (c *snapCache) walk() recWalk {
	if len(c.ran) != len(c.recs) || len(c.placed) != len(c.recs) {
		return recWalk{named: true}
	}
	return recWalk{recs: c.recs, ran: c.ran, placed: c.placed, named: c.named}
}

// known reports whether record j is one of the last round's (ok), and
// then whether its job ran, and whether it said Nomad had placed all of
// it (snapCache.placed). Records come in the queue's order.
func (w *recWalk) known(j *structs.Job) (ran, placed, ok bool) {
	for w.i < len(w.recs) && w.recs[w.i] != j && queueOrder(w.recs[w.i], j) < 0 {
		w.i++ // gone since (ended, or written anew: a new record)
	}
	if w.i < len(w.recs) && w.recs[w.i] == j {
		w.i++
		return w.ran[w.i-1], w.placed[w.i-1], true
	}
	return false, false, false
}

// snapshot is snapshot(now, nodes, jobs), copying from c (nil: none) what
// it can; c then keeps the result for the next round. named says whether
// a selector of one of jobs names jobs (namesJobs: the caller's pass over
// the records tells, so that this one reads only the records it views
// anew). unread (nil: none) reports whether nobody reads the views of a
// buffer any more, so that this round may write over them. ratios are what
// jobs of each application showed between GPU models (modelPriors; nil:
// none), from which a job's speed on a model it has not run on is
// estimated (byModel).
func (c *snapCache) snapshot(now time.Time, nodes []policy.Node, jobs []*structs.Job, named bool, unread func([]policy.Job) bool,
	ratios map[priorKey]float64) *policy.Snapshot {
	known := make(map[string]int32, len(nodes)) // node ID -> index in nodes
	for i, n := range nodes {
		known[n.ID] = int32(i)
	}
	largest := largestNode(nodes)
	v := views{known: known, largest: largest, models: clusterModels(nodes), ratios: ratios}
	var idsByName map[string][]string // only when a selector names jobs
	if named {
		idsByName = map[string][]string{}
		for _, j := range jobs {
			idsByName[j.Spec.Name] = append(idsByName[j.Spec.Name], j.ID)
		}
	}
	v.idsByName = idsByName
	var prev []*structs.Job
	if c != nil && !c.named && idsByName == nil && sameNodes(c.nodes, nodes) {
		prev = c.recs
	}
	s := &policy.Snapshot{Now: now, Nodes: nodes}
	var held []viewTime
	if c != nil && unread != nil && cap(c.spare) >= len(jobs) && len(jobs) > 0 && unread(c.spare) {
		// Every view and count below is set anew: copied whole, or by
		// policyJob and the held count it returns.
		s.Jobs, held = c.spare[:len(jobs)], c.spareHeld[:len(jobs)]
	} else if c != nil { // with room for more jobs in a later round
		s.Jobs = make([]policy.Job, len(jobs), len(jobs)+len(jobs)/8)
		held = make([]viewTime, len(jobs), cap(s.Jobs))
	} else {
		s.Jobs = make([]policy.Job, len(jobs))
	}
	i := 0 // in prev: both lists are in the queue's order
	for k := 0; k < len(jobs); {
		j := jobs[k]
		for i < len(prev) && prev[i] != j && queueOrder(prev[i], j) < 0 {
			i++ // gone since (ended, or written anew: a new record)
		}
		if i < len(prev) && prev[i] == j {
			// A run of the same records as last round's: copied at once.
			n := 1
			for k+n < len(jobs) && i+n < len(prev) && prev[i+n] == jobs[k+n] {
				n++
			}
			copyViews(s.Jobs[k:k+n], c.jobs[i:i+n])
			copy(held[k:k+n], c.held[i:i+n])
			for m := range n {
				switch t := c.held[i+m]; {
				case t.gpus == 0: // a queued job's view does not change with the time
				case t.plain: // timed's sum, without a read of the record
					v := &s.Jobs[k+m]
					v.AttainedGPUSeconds = structs.Attained(t.attained, int(t.gpus), v.LastResized, now)
				default:
					timed(&s.Jobs[k+m], jobs[k+m], now, int(t.gpus))
				}
			}
			k, i = k+n, i+n
			continue
		}
		h := v.policyJob(&s.Jobs[k], j, now)
		if held != nil {
			held[k] = viewTime{gpus: int32(h), plain: plain(j), attained: j.AttainedGPUSeconds}
		}
		k++
	}
	if len(known) == len(nodes) {
		// Unique IDs (the store's keys), and each view's Held made by
		// policyJob from its allocation on these nodes, or copied with
		// the view from the last round's on the same nodes (sameNodes).
		s.Vouch()
	}
	if c != nil {
		*c = snapCache{recs: jobs, jobs: s.Jobs, held: held, nodes: nodes, named: idsByName != nil,
			spare: c.jobs, spareHeld: c.held}
	}
	return s
}

// copyViews copies src into dst, at most copyRun views at a time: on
// amd64, memmove writes a copy of 1 MiB or more with non-temporal stores,
// which bypass the caches, so that the round's next passes over the views
// (the queues' view, the policy's board, the plan's check) would read
// each of thousands of copied views from memory again.
func copyViews(dst, src []policy.Job) {
	for len(src) > 0 {
		n := copy(dst, src[:min(len(src), copyRun)])
		dst, src = dst[n:], src[n:]
	}
}

// copyRun is the most views copyViews copies at once: 512 KiB of them.
const copyRun = 512 << 10 / int(unsafe.Sizeof(policy.Job{}))

// viewTime is what renews a job's copied view at a new time (timed):
// the GPUs it holds on the nodes (0: queued, its view does not change
// with the time), and whether its record is plain, for which timed
// changes only the attained service, from the record's (attained): then
// the record is not read again (a cache miss each of thousands of
// running jobs every round).
type viewTime struct {
	gpus     int32
	plain    bool
	attained float64
}

// plain reports whether timed changes nothing of job j's view but its
// attained service: the job has no target, no progress, no outlook and
// no admission.
func plain(j *structs.Job) bool {
	return j.Spec.Target == nil && j.Progress == nil && j.Outlook == nil &&
		(j.Admission == nil || j.Admission.Decision == structs.AdmissionUnknown)
}

// queueOrder is the order of the stores' active jobs: submission, then ID.
func queueOrder(a, b *structs.Job) int {
	if x := a.Submitted.Compare(b.Submitted); x != 0 {
		return x
	}
	return strings.Compare(a.ID, b.ID)
}

// sameNodes reports whether a and b are the same nodes as a snapshot's
// jobs see them (IDs and GPUs: what heldOn and largestNode read).
func sameNodes(a, b []policy.Node) bool {
	return slices.EqualFunc(a, b, func(x, y policy.Node) bool { return x.ID == y.ID && x.GPUs == y.GPUs })
}

// views is what a round's views of jobs are made on (policyJob).
type views struct {
	known   map[string]int32 // node ID -> index in the nodes
	largest int              // the GPUs of the largest node
	// models are the cluster's GPU models, where there are at least two
	// (clusterModels), and ratios what jobs showed between them.
	models []string
	ratios map[priorKey]float64
	// idsByName is the IDs of each job name when a selector names jobs.
	idsByName map[string][]string
}

// policyJob sets *pj to job j as the policy sees it at now, on the nodes
// of v, and returns the GPUs it holds there. Its goodput by GPU model
// (ByModel) is set here, not by timed: it changes with the record (its
// progress), not with the time, and a copied view keeps it.
func (v *views) policyJob(pj *policy.Job, j *structs.Job, now time.Time) int {
	known, largest, idsByName := v.known, v.largest, v.idsByName
	alloc, held := heldOn(j.Allocation, known)
	state := policy.Queued
	if held > 0 {
		state = policy.Running
	}
	req := requestOf(&j.Spec)
	if j.Spec.GPUs.Auto {
		req.Max = autoMax(j, largest)
	}
	*pj = policy.Job{
		ID:           j.ID,
		Name:         j.Spec.Name,
		User:         j.Spec.User,
		Queue:        queueOf(&j.Spec),
		Priority:     j.Spec.Priority,
		Submitted:    j.Submitted,
		State:        state,
		GPUs:         req,
		Constraints:  constraintsOf(&j.Spec),
		AntiAffinity: selector(j.Spec.AntiAffinity, idsByName),
		Affinity:     selector(j.Spec.Affinity, idsByName),
		Labels:       j.Spec.Labels,
		Locality:     localityOf(&j.Spec),
		Allocation:   alloc,
		Held:         slotsOf(alloc, known),
		LastResized:  j.LastChange(),
		Restarts:     max(j.AllHistory()-1, 0),
	}
	timed(pj, j, now, held)
	// Tables the simulator gives (Outlook.ByModel, its job models) are
	// taken as they are; else the estimate from the measured rates.
	if v.models != nil && (j.Outlook == nil || j.Outlook.ByModel == nil) {
		pj.ByModel = byModel(j, v.models, req.Max, v.ratios)
	}
	return held
}

// timed sets what of job j's view pj changes with the time alone (its
// record and the nodes the same): the attained service, the progress and
// the speedup, at now, for a job holding held GPUs on the nodes. The rest
// of pj must be set. A record it reads more of than the attained service
// must not be plain (see plain, and viewTime: the snapshot renews a plain
// job's copied view without it).
func timed(pj *policy.Job, j *structs.Job, now time.Time, held int) {
	pj.AttainedGPUSeconds = structs.Attained(j.AttainedGPUSeconds, held, pj.LastResized, now)
	pj.Progress, pj.Speedup = policy.Progress{}, nil
	if t := j.Spec.Target; t != nil {
		pj.Progress = policy.Progress{Metric: t.Metric, Target: t.Goal, Deadline: j.Deadline()}
		if t.Tier1 != nil {
			pj.Progress.Tier1 = *t.Tier1
		}
	}
	progressOf(&pj.Progress, j.Progress)
	applyOutlook(pj, j, now)
	applyAdmission(pj, j)
}

// accrue adds to record j's attained service the GPUs it holds since its
// last change, up to now: what a write that changes its GPUs or ends it
// first does.
func accrue(j *structs.Job, now time.Time) {
	j.AttainedGPUSeconds = j.AttainedAt(now)
}

// heldOn is the part of allocation a on known nodes, and its GPUs: a
// itself when all of it is (a policy must not modify its snapshot, and a
// stored record's map is never changed), else a copy; nil when none (a
// queued job, as for a policy's own).
func heldOn(a map[string]int, known map[string]int32) (policy.Allocation, int) {
	held, whole := 0, true
	for node, g := range a {
		if _, ok := known[node]; ok && g > 0 {
			held += g
		} else {
			whole = false
		}
	}
	switch {
	case held == 0:
		return nil, 0
	case whole:
		return policy.Allocation(a), held
	}
	out := policy.Allocation{}
	for node, g := range a {
		if _, ok := known[node]; ok && g > 0 {
			out[node] = g
		}
	}
	return out, held
}

// slotsOf is allocation a, which heldOn made (known nodes, counts above
// 0), by node index (known), in the nodes' order: the view's Held.
func slotsOf(a policy.Allocation, known map[string]int32) []policy.Slot {
	if len(a) == 0 {
		return nil
	}
	out := make([]policy.Slot, 0, len(a))
	for node, g := range a {
		out = append(out, policy.Slot{Node: known[node], GPUs: g})
	}
	slices.SortFunc(out, func(x, y policy.Slot) int { return cmp.Compare(x.Node, y.Node) })
	return out
}

// progressOf fills what the training script reported into the policy's
// view: the step, the throughput, and the value of the target's metric.
// Without a target, the metric is the one reported last. With a target
// whose metric the script has not reported, Value stays 0 (unknown) even
// if it reports others: a policy must not judge a loss against an
// accuracy goal (the job's events carry a warning for the user).
func progressOf(out *policy.Progress, in *structs.Progress) {
	if in == nil {
		return
	}
	out.Step = in.Step
	if in.SamplesPerSec != nil {
		out.Throughput = *in.SamplesPerSec
	}
	if out.Metric == "" && in.Metric != nil {
		out.Metric = in.Metric.Name
	}
	if v, ok := in.Metrics[out.Metric]; ok && out.Metric != "" {
		out.Value = v
	}
}

// requestOf is the gang rule's input for a jobspec.
func requestOf(spec *jobspec.Spec) policy.GPURequest {
	return policy.GPURequest{Min: spec.GPUs.Min, Max: spec.GPUs.Max, PerWorker: spec.GPUs.PerWorker}
}

// constraintsOf is the placement rules of a jobspec.
func constraintsOf(spec *jobspec.Spec) policy.Constraints {
	return policy.Constraints{GPUModel: spec.GPUs.Model, MinGPUMemoryMiB: spec.GPUs.MinMemoryMiB, Pool: spec.Pool}
}

// localityOf is the job's data sets' locality hints.
func localityOf(spec *jobspec.Spec) []map[string]string {
	var out []map[string]string
	for _, d := range spec.Data {
		if len(d.Prefer) > 0 {
			out = append(out, d.Prefer)
		}
	}
	return out
}

// localityMiss says, for a job placed on the nodes of alloc, which of its
// data sets' hints no node of the placement matches, and why ("" if every
// hint is met or there are none).
func localityMiss(spec *jobspec.Spec, alloc policy.Allocation, nodes []policy.Node) string {
	var missed []string
	for _, d := range spec.Data {
		if len(d.Prefer) == 0 {
			continue
		}
		held, matching := false, 0
		for i := range nodes {
			if !nodes[i].Matches(d.Prefer) {
				continue
			}
			matching++
			if alloc[nodes[i].ID] > 0 {
				held = true
			}
		}
		if held {
			continue
		}
		why := "no node holds it"
		switch {
		case matching == 1:
			why = "the node that holds it had no room for the job"
		case matching > 1:
			why = fmt.Sprintf("the %d nodes that hold it had no room for the job", matching)
		}
		missed = append(missed, fmt.Sprintf("data %q placed away from its data (%s)", d.Name, why))
	}
	return strings.Join(missed, "; ")
}

// selector turns a jobspec selector, which names jobs by the names users
// gave them (or by ID), into the policy's, which names them by ID.
func selector(sel jobspec.Selector, idsByName map[string][]string) policy.Selector {
	out := policy.Selector{Labels: sel.Labels}
	for _, name := range sel.Jobs {
		if ids, ok := idsByName[name]; ok {
			out.Jobs = append(out.Jobs, ids...)
		} else {
			out.Jobs = append(out.Jobs, name) // an ID, or a job not live now
		}
	}
	return out
}

// largestNode is the GPUs of the largest of nodes (0 for none).
func largestNode(nodes []policy.Node) int {
	largest := 0
	for _, n := range nodes {
		largest = max(largest, n.GPUs)
	}
	return largest
}

// applyAdmission puts job j's deadline admission into its view pj, and
// for an admitted job that has not run nor been estimated yet, the
// estimate it was admitted by.
func applyAdmission(pj *policy.Job, j *structs.Job) {
	a := j.Admission
	if a == nil || a.Decision == structs.AdmissionUnknown {
		return
	}
	pj.Progress.Admission = a.Decision
	if pj.Progress.RemainingWork == 0 && !pj.Progress.Reached && a.Work > 0 && pj.AttainedGPUSeconds == 0 {
		pj.Progress.RemainingWork = a.Work
		if pj.Speedup == nil {
			pj.Speedup = a.Speedup
		}
	}
}
