package quota

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	"github.com/schedulearn/schedulearn/plugins/policy"
)

// AnyModel is the key of an Amount that counts GPUs of every model (a
// queue's quota given as a number), or, in a per-model borrowing or
// lending limit, every model the Amount does not name.
const AnyModel = ""

// Unlimited stands for no bound: a borrowing or lending limit left out,
// the nominal quota of the implicit default queue. It is far above any
// cluster (2^40 GPUs), and sums of a few thousand of it stay in an int.
const Unlimited = 1 << 40

// Bounds on a queue tree.
const (
	// MaxQueues bounds the queues of one tree.
	MaxQueues = 1000
	// MaxGPUs bounds every quantity of a queue (as jobspec.MaxGPUs).
	MaxGPUs = 1 << 20
	// MinWeight and MaxWeight bound a queue's weight: shares (GPUs over
	// a weight) stay finite and comparable (a weight of 1e-320 made
	// them infinite).
	MinWeight = 0.001
	MaxWeight = 1e6
	// DefaultQueue is the queue of jobs that name none, and the one queue
	// of a planner that configures none.
	DefaultQueue = "default"
)

// Amount is a number of GPUs per GPU model (Nomad's device name, as
// policy.Node.GPUModel). The key AnyModel counts every model; nil is
// "not given".
type Amount map[string]int

// Def is one queue as configured.
type Def struct {
	Name string
	// Parent names the queue this one is inside ("" for a top-level one).
	// A queue with children holds no jobs of its own.
	Parent string
	// Nominal is the GPUs guaranteed to the queue's jobs: {AnyModel: n},
	// or per model. Nil: for a parent, the sum of its children's; for a
	// leaf, none (0).
	Nominal Amount
	// BorrowingLimit bounds what the queue holds above its nominal quota
	// (nil: unlimited). AnyModel applies to every model not named.
	BorrowingLimit Amount
	// LendingLimit bounds what of its idle nominal quota others may
	// borrow (nil: all of it). AnyModel applies to every model not named.
	LendingLimit Amount
	// Weight (0: 1) divides what queues borrow: beside other borrowers a
	// queue gets GPUs above its nominal quota in proportion to it (fair
	// sharing), and GPUs are taken back first from the queue that borrows
	// most per unit of weight.
	Weight float64
	// DeadlineAdmission is what the planner does with a job with a
	// deadline that cannot meet it given the jobs already admitted
	// (plugins/policy/admission): AdmissionReject refuses it at
	// submission, AdmissionWarn ("": the default) queues it with a warning,
	// unadmitted (it gets what the admitted jobs leave).
	DeadlineAdmission string
}

// Deadline admission modes (Def.DeadlineAdmission).
const (
	AdmissionWarn   = "warn"
	AdmissionReject = "reject"
)

// DefError is what is wrong with one queue's definition. Field is the
// config attribute ("parent", "nominal", ...), or "" for the block.
type DefError struct {
	Queue, Field, Msg string
}

func (e *DefError) Error() string {
	if e.Field == "" {
		return fmt.Sprintf("queue %q: %s", e.Queue, e.Msg)
	}
	return fmt.Sprintf("queue %q: %s: %s", e.Queue, e.Field, e.Msg)
}

// DefErrors are every DefError of a tree's definitions.
type DefErrors []*DefError

func (es DefErrors) Error() string {
	msgs := make([]string, len(es))
	for i, e := range es {
		msgs[i] = e.Error()
	}
	return "failed to build queue tree: " + strings.Join(msgs, "; ")
}

// Tree is a validated set of queues. It is immutable and safe to share.
type Tree struct {
	queues []queue
	index  map[string]int
	// order lists the queues parents first.
	order    []int
	perModel bool
	models   []string // every model an Amount names, sorted
	// implicit: the tree of a planner that configures no queues (Default),
	// whose one queue holds every stored job, whatever queue it names.
	implicit bool
}

type queue struct {
	name     string
	parent   int // -1: top level
	children []int
	depth    int
	nominal  Amount // nil: the children's sum
	borrow   Amount
	lend     Amount
	weight   float64
	admit    string // AdmissionWarn or AdmissionReject
}

// Default is the tree of a planner that configures no queues: the one
// queue "default", whose nominal quota is unlimited (the whole cluster).
// A submission naming another queue is refused (CheckJob); a job stored
// naming one (before that rule) is held by "default", whatever queue its
// jobspec names, so that none is stranded.
func Default() *Tree { return DefaultAdmitting(AdmissionWarn) }

// DefaultAdmitting is Default with deadline admission mode (see
// Def.DeadlineAdmission): the tree of a planner (the simulator's) that
// configures no queues but refuses what it cannot admit.
func DefaultAdmitting(mode string) *Tree {
	t, err := New([]Def{{Name: DefaultQueue, Nominal: Amount{AnyModel: Unlimited}, DeadlineAdmission: mode}})
	if err != nil {
		panic(err) // a constant definition
	}
	t.implicit = true
	return t
}

// DeadlineAdmission is the deadline admission mode of the queue that
// holds a job naming name (AdmissionWarn for a queue it lacks).
func (t *Tree) DeadlineAdmission(name string) string {
	if i, ok := t.index[t.queueFor(name)]; ok {
		return t.queues[i].admit
	}
	return AdmissionWarn
}

// QueueFor is the queue that holds a job naming name: name, or the
// default queue where the tree is Default().
func (t *Tree) QueueFor(name string) string { return t.queueFor(name) }

// queueFor is the queue that holds a job naming name.
func (t *Tree) queueFor(name string) string {
	if t.implicit {
		return DefaultQueue
	}
	return name
}

// New validates defs and builds their tree. The error is DefErrors.
//
// It works in passes, each needing the one before: each queue on its own
// (name, weight, admission mode, amounts); then each queue against the
// others (one way of giving nominal quotas across the tree, parents that
// exist); then the parents as a whole (no cycle), and only on a tree
// with none, the parents' nominal quotas against their children's.
func New(defs []Def) (*Tree, error) {
	if errs := checkCount(defs); errs != nil {
		return nil, errs
	}
	b := &treeBuild{t: &Tree{index: make(map[string]int, len(defs))}, models: map[string]bool{}}
	for _, d := range defs {
		b.add(d)
	}
	b.t.perModel = b.perModelAt != ""
	b.t.models = slices.Sorted(maps.Keys(b.models))
	for _, d := range defs {
		b.relate(d)
	}
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	if b.checkCycles() {
		return nil, b.errs
	}
	b.t.link()
	b.checkParentNominals()
	if len(b.errs) > 0 {
		return nil, b.errs
	}
	return b.t, nil
}

// checkCount refuses a tree of no queues, or of more than MaxQueues (the
// first queue past the bound named), before any queue is read; nil when
// the count is within bounds.
func checkCount(defs []Def) DefErrors {
	if len(defs) == 0 {
		return DefErrors{{Msg: "no queues"}}
	}
	if len(defs) > MaxQueues {
		return DefErrors{{Queue: defs[MaxQueues].Name, Msg: fmt.Sprintf("more than %d queues", MaxQueues)}}
	}
	return nil
}

// treeBuild is New under way: the tree built so far, every error found
// (all of a pass's, so that a config is fixed in one go), every model an
// Amount names, and the first queue that gives its nominal quota per
// model ("": none does), which decides how every queue must give it.
type treeBuild struct {
	t          *Tree
	errs       DefErrors
	models     map[string]bool
	perModelAt string
}

// bad records what is wrong with queue q's field (see DefError).
func (b *treeBuild) bad(q, field, format string, args ...any) {
	b.errs = append(b.errs, &DefError{Queue: q, Field: field, Msg: fmt.Sprintf(format, args...)})
}

// add checks queue d on its own and adds it to the tree, unlinked. A
// queue without a valid name, or named twice, is left out after its
// first error: the rest of it could not be reported against a name.
func (b *treeBuild) add(d Def) {
	if d.Name == "" || len(d.Name) > 256 {
		b.bad(d.Name, "", "a queue name is 1 to 256 bytes (the config allows jobspec's job names)")
		return
	}
	if _, dup := b.t.index[d.Name]; dup {
		b.bad(d.Name, "", "defined twice")
		return
	}
	w := b.weight(d)
	admit := b.admission(d)
	b.checkAmounts(d)
	if _, ok := d.Nominal[AnyModel]; !ok && len(d.Nominal) > 0 && b.perModelAt == "" {
		b.perModelAt = d.Name
	}
	b.t.index[d.Name] = len(b.t.queues)
	b.t.queues = append(b.t.queues, queue{name: d.Name, parent: -1, nominal: maps.Clone(d.Nominal),
		borrow: maps.Clone(d.BorrowingLimit), lend: maps.Clone(d.LendingLimit), weight: w, admit: admit})
}

// weight is queue d's weight, 1 where it gives none; one out of bounds
// is an error (shares over it would not stay finite and comparable).
func (b *treeBuild) weight(d Def) float64 {
	w := d.Weight
	if w == 0 {
		w = 1
	}
	if math.IsNaN(w) || w < MinWeight || w > MaxWeight {
		b.bad(d.Name, "weight", "%v: a weight is from %g to %g", d.Weight, MinWeight, MaxWeight)
	}
	return w
}

// admission is queue d's deadline admission mode, AdmissionWarn where it
// gives none; any other word is an error that names the two modes.
func (b *treeBuild) admission(d Def) string {
	admit := d.DeadlineAdmission
	switch admit {
	case "":
		admit = AdmissionWarn
	case AdmissionWarn, AdmissionReject:
	default:
		b.bad(d.Name, "deadline_admission", "%q: give %q (refuse a job that cannot meet its deadline beside the admitted ones) or %q (queue it with a warning)",
			admit, AdmissionReject, AdmissionWarn)
	}
	return admit
}

// checkAmounts bounds every amount queue d gives (nominal quota,
// borrowing and lending limits; models in name order), Unlimited being
// allowed only as a nominal quota, and notes the models they name.
func (b *treeBuild) checkAmounts(d Def) {
	for _, a := range []struct {
		field string
		amt   Amount
	}{{"nominal", d.Nominal}, {"borrowing_limit", d.BorrowingLimit}, {"lending_limit", d.LendingLimit}} {
		for _, m := range slices.Sorted(maps.Keys(a.amt)) {
			if g := a.amt[m]; g < 0 || g > MaxGPUs && !(a.field == "nominal" && g == Unlimited) {
				b.bad(d.Name, a.field, "%s: give 0 to %d", policy.GPUs(g), MaxGPUs)
			}
			if m != AnyModel {
				b.models[m] = true
			}
		}
	}
}

// relate checks queue d against the others and links it to its parent:
// the way it gives its amounts must be the tree's (per model or as a
// number), and its parent must be another queue of the tree. A def that
// add left out is passed over.
func (b *treeBuild) relate(d Def) {
	i, ok := b.t.index[d.Name]
	if !ok || b.t.queues[i].name != d.Name {
		return
	}
	b.checkModelKeys(d)
	if d.Parent == "" {
		return
	}
	p, ok := b.t.index[d.Parent]
	switch {
	case !ok:
		b.bad(d.Name, "parent", "no queue is named %q", d.Parent)
	case p == i:
		b.bad(d.Name, "parent", "a queue cannot be its own parent")
	default:
		b.t.queues[i].parent = p
	}
}

// checkModelKeys holds queue d to the tree's one way of giving quotas:
// where a queue gives its nominal quota per model, every queue must
// (perModelAt is named as the one that does); where none does, no
// borrowing or lending limit may be given per model either.
func (b *treeBuild) checkModelKeys(d Def) {
	if b.t.perModel {
		if _, ok := d.Nominal[AnyModel]; ok {
			b.bad(d.Name, "nominal", "a number, but queue %q gives its nominal quota per GPU model: give every queue's per model, or every queue's as a number", b.perModelAt)
		}
		return
	}
	for _, f := range []struct {
		field string
		amt   Amount
	}{{"borrowing_limit", d.BorrowingLimit}, {"lending_limit", d.LendingLimit}} {
		if hasModelKey(f.amt) {
			b.bad(d.Name, f.field, "per GPU model, but no queue gives its nominal quota per model: give it as a number")
		}
	}
}

// checkCycles reports every queue on a cycle of parents, with the cycle;
// true when there is one (the tree cannot be linked then).
func (b *treeBuild) checkCycles() bool {
	cyc := b.t.cycles()
	for _, c := range cyc {
		b.bad(c, "parent", "the parents form a cycle (%s)", b.t.cyclePath(b.t.index[c]))
	}
	return len(cyc) > 0
}

// checkParentNominals holds each parent that gives a nominal quota to at
// least its children's sum, per resource key, parents first: a parent's
// guarantee holds its children's.
func (b *treeBuild) checkParentNominals() {
	t := b.t
	for _, i := range t.order {
		q := &t.queues[i]
		if len(q.children) == 0 || q.nominal == nil {
			continue
		}
		for _, m := range t.resourceKeys() {
			sum := 0
			for _, c := range q.children {
				sum += t.nominal(c, m)
			}
			if n := lookup(q.nominal, m, 0); sum > n {
				b.bad(q.name, "nominal", "%s%s, less than its children's %d: a parent's nominal quota holds its children's", policy.GPUs(n), modelSuffix(m), sum)
			}
		}
	}
}

func hasModelKey(a Amount) bool {
	for m := range a {
		if m != AnyModel {
			return true
		}
	}
	return false
}

// cycles returns the names of the queues on a cycle of parents.
func (t *Tree) cycles() []string {
	var out []string
	for i := range t.queues {
		seen := map[int]bool{}
		for j := i; j != -1; j = t.queues[j].parent {
			if seen[j] {
				if j == i {
					out = append(out, t.queues[i].name)
				}
				break
			}
			seen[j] = true
		}
	}
	return out
}

func (t *Tree) cyclePath(i int) string {
	path := []string{t.queues[i].name}
	for j := t.queues[i].parent; j != i && j != -1 && len(path) <= len(t.queues); j = t.queues[j].parent {
		path = append(path, t.queues[j].name)
	}
	return strings.Join(append(path, t.queues[i].name), " -> ")
}

// link fills children, depth and order (parents first).
func (t *Tree) link() {
	for i := range t.queues {
		if p := t.queues[i].parent; p != -1 {
			t.queues[p].children = append(t.queues[p].children, i)
		}
	}
	var walk func(i, depth int)
	walk = func(i, depth int) {
		t.queues[i].depth = depth
		t.order = append(t.order, i)
		for _, c := range t.queues[i].children {
			walk(c, depth+1)
		}
	}
	for i := range t.queues {
		if t.queues[i].parent == -1 {
			walk(i, 0)
		}
	}
}

// resourceKeys are the keys quotas are given for: AnyModel, or each model
// an Amount names.
func (t *Tree) resourceKeys() []string {
	if t.perModel {
		return t.models
	}
	return []string{AnyModel}
}

// lookup reads a's GPUs for model m: its own entry, else AnyModel's, else
// def.
func lookup(a Amount, m string, def int) int {
	if v, ok := a[m]; ok {
		return v
	}
	if v, ok := a[AnyModel]; ok {
		return v
	}
	return def
}

// nominal is queue i's nominal quota of resource m (a parent without one
// has its children's sum).
func (t *Tree) nominal(i int, m string) int {
	q := &t.queues[i]
	if q.nominal != nil || len(q.children) == 0 {
		return lookup(q.nominal, m, 0)
	}
	sum := 0
	for _, c := range q.children {
		sum += t.nominal(c, m)
	}
	return sum
}

func modelSuffix(m string) string {
	if m == AnyModel {
		return ""
	}
	return " of " + m
}

// Names are the queues' names, in the tree's order (parents first).
func (t *Tree) Names() []string {
	out := make([]string, len(t.order))
	for k, i := range t.order {
		out[k] = t.queues[i].name
	}
	return out
}

// Has reports whether the tree has a queue of that name.
func (t *Tree) Has(name string) bool { _, ok := t.index[name]; return ok }

// Sentinel errors of CheckJob (wrapped in an *AdmitError).
var (
	// ErrUnknownQueue: the job names a queue the tree does not have.
	ErrUnknownQueue = errors.New("unknown queue")
	// ErrParentQueue: the job names a queue that has child queues.
	ErrParentQueue = errors.New("queue has child queues")
	// ErrOverLimit: the job's minimum is above what its queue may ever hold.
	ErrOverLimit = errors.New("job can never fit its queue's limit")
)

// AdmitError is why a job is refused at submission.
type AdmitError struct {
	Queue string
	Err   error // one of the sentinels above
	Msg   string
}

func (e *AdmitError) Error() string { return e.Msg }
func (e *AdmitError) Unwrap() error { return e.Err }
