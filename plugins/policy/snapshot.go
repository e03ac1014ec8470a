package policy

import (
	"fmt"
	"maps"
	"math"
	"reflect"
	"slices"
	"strings"
	"time"
)

// Snapshot is what a policy sees in one scheduling round: the nodes, every
// queued and running job, and the current time. A policy must not modify it.
//
// A snapshot is consistent: node and job IDs are unique, a job's allocation
// names only nodes of the snapshot, and no node holds more GPUs than it has
// (Reserved plus every job's allocation). place.NewBoard, and so every
// builtin, rejects a snapshot that is not.
type Snapshot struct {
	// Now is the time of the round. Policies use it instead of the clock, so
	// that the simulator can replay a trace.
	Now   time.Time `json:"now"`
	Nodes []Node    `json:"nodes"`
	Jobs  []Job     `json:"jobs"`

	// The Jobs and Nodes its maker vouched for (Vouch): their first
	// elements and lengths, so that a snapshot made from this one with
	// other jobs or nodes (a copy of the struct) is not taken as vouched.
	vouched bool
	vjobs   *Job
	vnodes  *Node
	vn, vm  int
}

// Slot is a job's GPUs on one node, named by its index in Snapshot.Nodes.
type Slot struct {
	Node int32
	GPUs int
}

// Vouch says that the snapshot's maker vouches for it (the planner does
// for its own): its job IDs are unique and not empty, its jobs are in
// submission order (Submitted, then ID), and each job's Held is its
// Allocation, by node index, in the order of Nodes, with no entry of 0
// GPUs or fewer and no node the snapshot lacks. Then place.NewBoard,
// Validate and the planner's queues read every running job's GPUs from
// Held (arrays) instead of its Allocation (a map each), and NewBoard
// neither looks for repeated IDs nor checks the order: at 100,000 jobs
// those passes were most of a round.
// Nothing else is trusted: a plan is checked in full (Validate), and an
// external plugin gets no Held (it is not sent) nor a vouched snapshot.
// The Jobs and Nodes must not change afterwards (as for any snapshot).
func (s *Snapshot) Vouch() {
	s.vouched, s.vjobs, s.vnodes, s.vn, s.vm = true, nil, nil, len(s.Jobs), len(s.Nodes)
	if len(s.Jobs) > 0 {
		s.vjobs = &s.Jobs[0]
	}
	if len(s.Nodes) > 0 {
		s.vnodes = &s.Nodes[0]
	}
}

// Vouched reports whether the snapshot's maker vouched for its Jobs and
// Nodes as they are (Vouch): then each job's Held may be read for its
// Allocation, and its job IDs are unique.
func (s *Snapshot) Vouched() bool {
	if !s.vouched || s.vn != len(s.Jobs) || s.vm != len(s.Nodes) {
		return false
	}
	return (len(s.Jobs) == 0 || s.vjobs == &s.Jobs[0]) && (len(s.Nodes) == 0 || s.vnodes == &s.Nodes[0])
}

// Node is one GPU machine (a Nomad client node with the nvidia/gpu device).
type Node struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	// Pool is the worker pool (Nomad node pool or Consul-discovered pool).
	Pool string `json:"pool,omitempty"`
	// GPUModel is the Nomad device name, e.g. "A100-SXM4-40GB"; a node's
	// GPUs are assumed to be all of one model.
	GPUModel     string `json:"gpu_model,omitempty"`
	GPUMemoryMiB int    `json:"gpu_memory_mib,omitempty"`
	// GPUs is the number of healthy GPUs the scheduler may hand out.
	GPUs int `json:"gpus"`
	// Reserved is the number of those GPUs held by work that is not one of
	// the snapshot's jobs (other Nomad jobs). Free GPUs are
	// GPUs - Reserved - the sum of the jobs' allocations on the node.
	Reserved int `json:"reserved,omitempty"`
	// Attributes are node attributes and metadata (Nomad node.attr / meta,
	// datacenter, data-locality labels) that constraints can match.
	Attributes map[string]string `json:"attributes,omitempty"`
}

// JobState is whether a job currently holds GPUs.
type JobState string

const (
	// Queued jobs hold no GPUs.
	Queued JobState = "queued"
	// Running jobs hold the GPUs of their Allocation. A running job with an
	// empty allocation is treated as queued.
	Running JobState = "running"
)

// Job is one training job as the policy sees it.
type Job struct {
	ID   string `json:"id"`
	Name string `json:"name,omitempty"`
	User string `json:"user,omitempty"`
	// Queue is the job's queue (the planner's queue "name" blocks). Quota,
	// borrowing and reclaim between queues hold around every policy
	// (planner/quota), so a policy may ignore it.
	Queue string `json:"queue,omitempty"`
	// Priority is larger-is-more-important. The builtins ignore it (they are
	// strictly first come, first served); it is there for other policies.
	// Within a queue, the planner's quota layer admits by priority first.
	Priority  int       `json:"priority,omitempty"`
	Submitted time.Time `json:"submitted"`
	State     JobState  `json:"state"`

	GPUs        GPURequest  `json:"gpus"`
	Constraints Constraints `json:"constraints,omitzero"`
	// AntiAffinity selects jobs this job must not share a node with. The
	// relation is symmetric: if either job's selector matches the other,
	// neither may be placed on a node that holds the other.
	AntiAffinity Selector `json:"anti_affinity,omitzero"`
	// Affinity selects jobs whose nodes this job prefers (a soft rule).
	Affinity Selector `json:"affinity,omitzero"`
	// Labels are matched by other jobs' selectors.
	Labels map[string]string `json:"labels,omitempty"`
	// Locality lists node attribute sets the job prefers: its data sets'
	// locality hints (jobspec `data { prefer }`). A node that matches every
	// attribute of one set is preferred, like a node of an affine job (a
	// soft rule); see Node.Matches.
	Locality []map[string]string `json:"locality,omitempty"`

	// Allocation is the GPUs the job holds now, per node.
	Allocation Allocation `json:"allocation,omitempty"`
	// Held is Allocation by node index, in a snapshot whose maker vouched
	// for it (Snapshot.Vouch; read it only where Snapshot.Vouched says
	// so): one slot a node, in the order of Snapshot.Nodes. It is not
	// sent to external plugins.
	Held []Slot `json:"-"`
	// LastResized is when the allocation last changed (started, grown,
	// shrunk); zero if never.
	LastResized time.Time `json:"last_resized,omitzero"`
	// AttainedGPUSeconds is the GPU time the job has used so far.
	AttainedGPUSeconds float64 `json:"attained_gpu_seconds,omitempty"`
	// RestartSeconds is what a change of its allocation has cost the job,
	// as measured: the seconds from a change to its training going on
	// where it stopped (a checkpoint-restore, or an in-place resize), in
	// [0, MaxRestartSeconds]; 0 before any change was measured. The planner
	// measures it from the job's progress reports; the simulator gives its
	// job model's delay once the job has started.
	RestartSeconds float64 `json:"restart_seconds,omitempty"`
	// Restarts is how many times the job's GPUs changed after its first
	// start (resizes, moves, stops and starts again).
	Restarts int `json:"restarts,omitempty"`
	// Progress is what the training script reports; zero if nothing yet.
	Progress Progress `json:"progress,omitzero"`
	// Speedup is the job's goodput by GPU count in units of its goodput on
	// one GPU: Speedup[g-1] is the speedup with g GPUs packed onto as few
	// nodes as possible. Nil means unknown, and policies that use it treat
	// the job as scaling linearly (g GPUs do g times the work of one);
	// beyond the end of the table more GPUs add nothing. The simulator
	// fills it from its job models; the builtins other than goodput ignore
	// it.
	Speedup []float64 `json:"speedup,omitempty"`
	// ByModel is the job's goodput on each GPU model (Node.GPUModel) it has
	// a figure for, on clusters of more than one model: ByModel[m][g-1] is
	// its goodput with g GPUs of model m packed onto as few nodes as
	// possible, in one unit for all models of the job (so ByModel["A100"][0]
	// / ByModel["V100"][0] is how much faster one A100 is for this job);
	// the unit itself means nothing across jobs. A model missing from the
	// map is one the job has not been measured or estimated on. Nil on
	// clusters of one model and for jobs with no figure; policies that do
	// not place by model ignore it.
	ByModel map[string][]float64 `json:"by_model,omitempty"`
}

// MaxRestartSeconds bounds Job.RestartSeconds: a job measured to stall
// longer after a change counts as stalling an hour.
const MaxRestartSeconds = 3600.0

// GPURequest is the gang rule's input: a job holds 0 GPUs, or a total in
// [Min, Max] that is a multiple of PerWorker, with each worker's GPUs on one
// node. A fixed count is Min == Max; "auto" is resolved by the planner into a
// range before the policy sees it.
type GPURequest struct {
	Min       int `json:"min"`
	Max       int `json:"max"`
	PerWorker int `json:"per_worker"`
}

// Constraints are hard placement rules. Zero values mean "any".
type Constraints struct {
	GPUModel        string `json:"gpu_model,omitempty"`
	MinGPUMemoryMiB int    `json:"min_gpu_memory_mib,omitempty"`
	Pool            string `json:"pool,omitempty"`
	// NodeAttributes must all be equal to the node's attributes.
	NodeAttributes map[string]string `json:"node_attributes,omitempty"`
	// MaxGPUsPerNode caps the job's GPUs on any one node (0: no cap). Set it
	// to PerWorker to spread workers one per node (anti-affinity within the
	// job).
	MaxGPUsPerNode int `json:"max_gpus_per_node,omitempty"`
}

// Selector selects jobs: by ID, or by labels (all must match). The zero
// Selector selects nothing.
type Selector struct {
	Jobs   []string          `json:"jobs,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
}

// Progress is the training progress and target of a job, for policies that
// move GPUs toward jobs behind their targets (DQoES, TRADL).
type Progress struct {
	Metric string  `json:"metric,omitempty"`
	Value  float64 `json:"value,omitempty"`
	Target float64 `json:"target,omitempty"`
	// Tier1 is TRADL's first-tier target; zero if none.
	Tier1    float64   `json:"tier1,omitempty"`
	Deadline time.Time `json:"deadline,omitzero"`
	Step     int64     `json:"step,omitempty"`
	// Throughput is samples (or steps) per second at the current allocation.
	Throughput float64 `json:"throughput,omitempty"`
	// RemainingWork is the estimated work left until Value reaches Target,
	// in seconds on one GPU: at g GPUs the job needs RemainingWork /
	// Speedup[g-1] seconds (RemainingWork / g where Speedup is unknown).
	// Zero means unknown (no estimate yet, or no target); the planner
	// estimates it from the reported progress, the simulator knows it.
	RemainingWork float64 `json:"remaining_work,omitempty"`
	// Reached is true once Value has reached Target: the target is met and
	// its deadline no longer matters.
	Reached bool `json:"reached,omitempty"`
	// Admission is the planner's deadline admission of the job
	// (plugins/policy/admission): AdmissionAdmitted (it can meet its
	// deadline beside the jobs admitted before it, which it must not push
	// past theirs), AdmissionUnadmitted (it could not when it was
	// submitted: queued with a warning), or "" (not judged: no deadline, or
	// no estimate of its work yet).
	Admission string `json:"admission,omitempty"`
}

// Deadline admissions (Progress.Admission).
const (
	AdmissionAdmitted   = "admitted"
	AdmissionUnadmitted = "unadmitted"
)

// IsZero reports whether the selector selects nothing.
func (s Selector) IsZero() bool { return len(s.Jobs) == 0 && len(s.Labels) == 0 }

// Matches reports whether the selector selects job j.
func (s Selector) Matches(j *Job) bool {
	if slices.Contains(s.Jobs, j.ID) {
		return true
	}
	if len(s.Labels) == 0 {
		return false
	}
	for k, v := range s.Labels {
		if got, ok := j.Labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// Allows reports whether the constraints allow a job's GPUs on node n
// (MaxGPUsPerNode aside, which depends on a count). It is mismatch(n) ==
// "" without the words (allows): it is asked for every node, of every job
// submitted and of every constraint set each round.
func (c *Constraints) Allows(n *Node) bool { return c.allows(n) }

// mismatch says which constraint node n fails, or "" if none.
func (c *Constraints) mismatch(n *Node) string {
	if c.GPUModel != "" && c.GPUModel != n.GPUModel {
		return fmt.Sprintf("GPU model %q is not %q", n.GPUModel, c.GPUModel)
	}
	if c.MinGPUMemoryMiB > 0 && n.GPUMemoryMiB < c.MinGPUMemoryMiB {
		return fmt.Sprintf("GPU memory %d MiB is below %d MiB", n.GPUMemoryMiB, c.MinGPUMemoryMiB)
	}
	if c.Pool != "" && c.Pool != n.Pool {
		return fmt.Sprintf("pool %q is not %q", n.Pool, c.Pool)
	}
	for _, k := range slices.Sorted(maps.Keys(c.NodeAttributes)) {
		if got, ok := n.Attributes[k]; !ok || got != c.NodeAttributes[k] {
			return fmt.Sprintf("attribute %s=%q is not %q", k, got, c.NodeAttributes[k])
		}
	}
	return ""
}

// allows is mismatch(n) == "" without the words: no sorting, no
// formatting.
func (c *Constraints) allows(n *Node) bool {
	if c.GPUModel != "" && c.GPUModel != n.GPUModel {
		return false
	}
	if c.MinGPUMemoryMiB > 0 && n.GPUMemoryMiB < c.MinGPUMemoryMiB {
		return false
	}
	if c.Pool != "" && c.Pool != n.Pool {
		return false
	}
	for k, want := range c.NodeAttributes {
		if got, ok := n.Attributes[k]; !ok || got != want {
			return false
		}
	}
	return true
}

// conflicts reports whether jobs a and b must not share a node.
func conflicts(a, b *Job) bool {
	return a.ID != b.ID && (a.AntiAffinity.Matches(b) || b.AntiAffinity.Matches(a))
}

// Free returns each node's free GPUs: GPUs - Reserved - the sum of the jobs'
// allocations. It may be negative in an inconsistent snapshot.
func (s *Snapshot) Free() map[string]int {
	free := make(map[string]int, len(s.Nodes))
	for i := range s.Nodes {
		free[s.Nodes[i].ID] = s.Nodes[i].GPUs - s.Nodes[i].Reserved
	}
	for i := range s.Jobs {
		for n, g := range s.Jobs[i].Allocation {
			free[n] -= g
		}
	}
	return free
}

// Apply returns the snapshot that results from carrying out plan p at time
// now: each job's allocation becomes its target, its state follows (running
// if it holds GPUs, else queued), and LastResized becomes now where the
// allocation changed. s is not modified; the result shares its Nodes and
// unchanged allocations (treat both as read-only). The simulator steps with
// it.
func (s *Snapshot) Apply(p *Plan, now time.Time) *Snapshot {
	out := &Snapshot{Now: now, Nodes: s.Nodes, Jobs: make([]Job, len(s.Jobs))}
	copy(out.Jobs, s.Jobs)
	for i := range out.Jobs {
		j := &out.Jobs[i]
		target := p.Target(j)
		if target.Equal(j.Allocation) {
			continue
		}
		j.Allocation = target.Clone()
		j.Held = nil // out is not vouched for
		j.LastResized = now
		j.State = Queued
		if j.Allocation.Total() > 0 {
			j.State = Running
		}
	}
	return out
}

// Allocation is a job's GPUs per node ID. A node absent or mapped to 0 holds
// none of the job's GPUs; the empty (or nil) allocation is 0 GPUs.
type Allocation map[string]int

// Total returns the number of GPUs in the allocation.
func (a Allocation) Total() int {
	t := 0
	for _, g := range a {
		t += g
	}
	return t
}

// Nodes returns the IDs of the nodes holding GPUs, sorted.
func (a Allocation) Nodes() []string {
	out := make([]string, 0, len(a))
	for n, g := range a {
		if g != 0 {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Equal reports whether a and b hold the same GPUs on the same nodes
// (entries of 0 are ignored).
func (a Allocation) Equal(b Allocation) bool {
	if a.same(b) {
		return true
	}
	for n, g := range a {
		if b[n] != g {
			return false
		}
	}
	for n, g := range b {
		if a[n] != g {
			return false
		}
	}
	return true
}

// same reports whether a and b are one map (a plan shares a job's map
// with the snapshot where the job keeps its GPUs): then they are Equal
// without a look at their entries.
func (a Allocation) same(b Allocation) bool {
	return len(a) > 0 && len(a) == len(b) && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// Clone returns a copy without entries of 0; nil for an empty allocation.
func (a Allocation) Clone() Allocation {
	var out Allocation
	for n, g := range a {
		if g == 0 {
			continue
		}
		if out == nil {
			out = make(Allocation, len(a))
		}
		out[n] = g
	}
	return out
}

// SpeedupAt reads a speedup table (Job.Speedup) at g GPUs: g itself where
// the table is unknown or unusable (linear scaling), its last entry beyond
// its end, 0 for g < 1. An entry of 0 reads as the smallest positive
// number, so that dividing work by it never divides by zero.
func SpeedupAt(table []float64, g int) float64 {
	if g < 1 {
		return 0
	}
	if !UsableSpeedup(table) {
		return float64(g)
	}
	if s := table[min(g, len(table))-1]; s > 0 {
		return s
	}
	return math.SmallestNonzeroFloat64
}

// UsableSpeedup reports whether a speedup table (Job.Speedup) can be used:
// non-empty, finite and non-negative. Policies treat a job whose table is
// not usable as scaling linearly.
func UsableSpeedup(tab []float64) bool {
	if len(tab) == 0 {
		return false
	}
	for _, x := range tab {
		if x < 0 || math.IsNaN(x) || math.IsInf(x, 0) {
			return false
		}
	}
	return true
}

// Matches reports whether the node has every attribute of want: equal to
// the node's value, or to one of its comma-separated items (a node whose
// meta.datasets is "imagenet,coco" matches meta.datasets = "coco").
func (n *Node) Matches(want map[string]string) bool {
	for k, v := range want {
		got, ok := n.Attributes[k]
		if !ok {
			return false
		}
		if got != v && !slices.Contains(strings.Split(got, ","), v) {
			return false
		}
	}
	return len(want) > 0
}
