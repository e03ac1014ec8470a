package jobspec

import (
	"crypto/sha256"
	"fmt"
	"math"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/zclconf/go-cty/cty"

	"github.com/schedulearn/schedulearn/internal/hclsafe"
	"github.com/schedulearn/schedulearn/internal/termtext"
)

// fileSchema is a jobspec file: training blocks, read by hand so that
// each keeps the range of its header for diagnostics.
var fileSchema = &hcl.BodySchema{Blocks: []hcl.BlockHeaderSchema{{Type: "training", LabelNames: []string{"name"}}}}

// The raw shapes gohcl decodes into; parse turns them into a Spec.
type trainingHCL struct {
	Name     string    // the block's label
	DefRange hcl.Range // the block's header

	Command      string            `hcl:"command,optional"`
	Args         []string          `hcl:"args,optional"`
	Launcher     string            `hcl:"launcher,optional"`
	User         string            `hcl:"user,optional"`
	Queue        string            `hcl:"queue,optional"`
	Priority     *int              `hcl:"priority,optional"`
	Pool         string            `hcl:"pool,optional"`
	Env          map[string]string `hcl:"env,optional"`
	Labels       map[string]string `hcl:"labels,optional"`
	Target       *targetHCL        `hcl:"target,block"`
	Affinity     *selectorHCL      `hcl:"affinity,block"`
	AntiAffinity *selectorHCL      `hcl:"anti_affinity,block"`
	Data         []*dataHCL        `hcl:"data,block"`
	Artifacts    []*artifactHCL    `hcl:"artifact,block"`
	Worker       *workerHCL        `hcl:"worker,block"`
	Batch        *batchHCL         `hcl:"batch,block"`
	// gpus is an attribute (a count or "auto") or a block; it is decoded by
	// hand from what remains.
	Remain hcl.Body `hcl:",remain"`
}

type gpusHCL struct {
	Count     *int   `hcl:"count,optional"`
	Min       *int   `hcl:"min,optional"`
	Max       *int   `hcl:"max,optional"`
	PerWorker *int   `hcl:"per_worker,optional"`
	Auto      bool   `hcl:"auto,optional"`
	Model     string `hcl:"model,optional"`
	MinMemory string `hcl:"min_memory,optional"`

	Body hcl.Body `hcl:",body"`
}

type targetHCL struct {
	Metric    string   `hcl:"metric"`
	Goal      float64  `hcl:"goal"`
	Tier1     *float64 `hcl:"tier1,optional"`
	Direction string   `hcl:"direction,optional"`
	Deadline  string   `hcl:"deadline,optional"`
	Delivery  string   `hcl:"delivery,optional"`
	Webhook   string   `hcl:"webhook,optional"`

	Body hcl.Body `hcl:",body"`
}

type selectorHCL struct {
	Jobs   []string          `hcl:"jobs,optional"`
	Labels map[string]string `hcl:"labels,optional"`
}

type dataHCL struct {
	Name   string            `hcl:"name,label"`
	Path   string            `hcl:"path,optional"`
	Prefer map[string]string `hcl:"prefer,optional"`
}

type workerHCL struct {
	CPU    *int   `hcl:"cpu,optional"`
	Memory string `hcl:"memory,optional"`

	Body hcl.Body `hcl:",body"`
}

type batchHCL struct {
	Size      int `hcl:"size"`
	Max       int `hcl:"max"`
	MaxPerGPU int `hcl:"max_per_gpu"`

	Body hcl.Body `hcl:",body"`
}

type artifactHCL struct {
	Source      string `hcl:"source"`
	Destination string `hcl:"destination,optional"`
}

// Limits on what a jobspec may ask for.
const (
	DefaultPriority = 50
	DefaultQueue    = "default"
	MaxPriority     = 100
	// MaxGPUs bounds every GPU count (count, min, max, per_worker).
	MaxGPUs = 1 << 20
	// MaxMinMemory bounds min_memory (1 PiB): no GPU comes near it, and
	// its MiB fit any int.
	MaxMinMemory = 1 << 50
	// MaxWorkerCPU bounds a worker's cpu (MHz): 1,000,000 is 256 cores at
	// 3.9 GHz, beyond any node.
	MaxWorkerCPU = 1_000_000
	// MaxWorkerMemory bounds a worker's memory (16 TiB).
	MaxWorkerMemory = 16 << 40
	// MaxBatch bounds a batch block's sizes (samples per step).
	MaxBatch = 1 << 24
)

// MaxBytes bounds a jobspec's size (64 KiB; a jobspec is a few KiB). The
// parse of a file at the limits costs up to about 0.5 s and 100 MB in the
// worst shapes (BenchmarkParse_AtTheLimits), which Gate multiplies by its
// slots.
const MaxBytes = 64 << 10

// Limits are the bounds on a jobspec's text, checked before it is parsed
// (see the package doc): hclsafe's defaults, with MaxBytes.
func Limits() hclsafe.Limits {
	lim := hclsafe.DefaultLimits()
	lim.MaxBytes = MaxBytes
	return lim
}

// ParseFile reads and validates the jobspec at path. now is the submission
// time, against which deadlines are judged.
func ParseFile(path string, now time.Time) (*Spec, hcl.Diagnostics) {
	src, err := os.ReadFile(path)
	if err != nil {
		return nil, hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "Failed to read jobspec",
			Detail:   err.Error(),
		}}
	}
	return Parse(src, path, now)
}

// Parse validates a jobspec held in memory; filename names it in
// diagnostics. Warnings come back with a Spec; errors without one.
func Parse(src []byte, filename string, now time.Time) (*Spec, hcl.Diagnostics) {
	body, diags := hclsafe.ParseConfig(src, filename, Limits())
	if diags.HasErrors() {
		return nil, diags
	}
	content, more := body.Content(fileSchema)
	diags = append(diags, more...)
	if diags.HasErrors() {
		return nil, diags
	}
	switch len(content.Blocks) {
	case 0:
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Missing training block",
			Detail:   `A jobspec holds one training "name" { ... } block.`,
			Subject:  &hcl.Range{Filename: filename, Start: hcl.InitialPos, End: hcl.InitialPos},
		})
	case 1:
	default:
		second := content.Blocks[1]
		return nil, append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "More than one training block",
			Detail:   fmt.Sprintf("A jobspec holds one training block; %q is the second. Put each job in a file of its own.", second.Labels[0]),
			Subject:  second.DefRange.Ptr(),
		})
	}
	block := content.Blocks[0]
	raw := &trainingHCL{Name: block.Labels[0], DefRange: block.DefRange}
	diags = append(diags, gohcl.DecodeBody(block.Body, evalContext(filename), raw)...)
	if diags.HasErrors() {
		return nil, diags
	}
	spec, more := convert(raw, now)
	diags = append(diags, more...)
	if diags.HasErrors() {
		return nil, diags
	}
	if b, ok := block.Body.(*hclsyntax.Body); ok {
		spec.Secrets = &Secrets{Text: sha256.Sum256(src), Spans: secretSpans(b)}
	}
	return spec, diags
}

// secretSpans finds the attributes of a training block whose values are
// secrets (Spec.Secrets), in the text's order.
func secretSpans(b *hclsyntax.Body) []SecretSpan {
	var out []SecretSpan
	add := func(body *hclsyntax.Body, name string, kind SecretKind) {
		if a, ok := body.Attributes[name]; ok {
			out = append(out, SecretSpan{Kind: kind, Start: a.SrcRange.Start.Byte, End: a.SrcRange.End.Byte})
		}
	}
	add(b, "env", SecretEnv)
	for _, inner := range b.Blocks {
		switch inner.Type {
		case "target":
			add(inner.Body, "webhook", SecretWebhook)
		case "artifact":
			add(inner.Body, "source", SecretArtifact)
		}
	}
	slices.SortFunc(out, func(x, y SecretSpan) int { return x.Start - y.Start })
	return out
}

func convert(t *trainingHCL, now time.Time) (*Spec, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	errAt := func(r hcl.Range, summary, detail string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: r.Ptr()})
	}
	attrs := attrRanges(t.Remain, t.DefRange)
	spec := &Spec{
		Name:     t.Name,
		Command:  t.Command,
		Args:     t.Args,
		Launcher: t.Launcher,
		User:     t.User,
		Queue:    t.Queue,
		Priority: DefaultPriority,
		Pool:     t.Pool,
		Env:      t.Env,
		Labels:   t.Labels,
		Range:    t.DefRange,
	}
	if !validName(t.Name) {
		errAt(t.DefRange, "Invalid job name", fmt.Sprintf("%q: a job name is %s.", t.Name, NameRule))
	}
	if spec.Command == "" {
		errAt(t.DefRange, "Missing command", `The training block needs command = "..." (the program to run, e.g. "python3").`)
	}
	switch spec.Launcher {
	case "":
		spec.Launcher = LauncherHorovod
	case LauncherHorovod, LauncherTorchrun:
	default:
		errAt(attrs("launcher"), "Invalid launcher", fmt.Sprintf("%q: launcher is %q or %q.", spec.Launcher, LauncherHorovod, LauncherTorchrun))
	}
	if err := termtext.Check(spec.User); err != nil {
		errAt(attrs("user"), "Invalid user", fmt.Sprintf("%q: %v; a user holds no control or bidirectional formatting characters (they would act on the terminals that list jobs).", spec.User, err))
	}
	spec.QueueRange = attrs("queue")
	if spec.Queue == "" {
		spec.Queue = DefaultQueue
	} else if !validName(spec.Queue) {
		errAt(attrs("queue"), "Invalid queue", fmt.Sprintf("%q: a queue name is %s.", spec.Queue, NameRule))
	}
	if t.Priority != nil {
		spec.Priority = *t.Priority
		if spec.Priority < 1 || spec.Priority > MaxPriority {
			errAt(attrs("priority"), "Invalid priority", fmt.Sprintf("%d: priority is from 1 to %d.", spec.Priority, MaxPriority))
		}
	}

	gpus, modelAt, more := decodeGPUs(t.Remain, t.DefRange)
	diags = append(diags, more...)
	spec.GPUs = gpus
	spec.PoolRange, spec.ModelRange = attrs("pool"), modelAt

	if t.Target != nil {
		target, more := convertTarget(t.Target, now)
		diags = append(diags, more...)
		spec.Target = target
	}
	if t.Affinity != nil {
		spec.Affinity = Selector{Jobs: t.Affinity.Jobs, Labels: t.Affinity.Labels}
	}
	if t.AntiAffinity != nil {
		spec.AntiAffinity = Selector{Jobs: t.AntiAffinity.Jobs, Labels: t.AntiAffinity.Labels}
		if slices.Contains(spec.AntiAffinity.Jobs, spec.Name) {
			errAt(t.DefRange, "Anti-affinity with itself", fmt.Sprintf("%q names itself in anti_affinity; to spread its own workers use gpus { per_worker } and a pool.", spec.Name))
		}
	}
	for _, d := range t.Data {
		spec.Data = append(spec.Data, Data{Name: d.Name, Path: d.Path, Prefer: d.Prefer})
	}
	for _, a := range t.Artifacts {
		spec.Artifacts = append(spec.Artifacts, Artifact{Source: a.Source, Destination: a.Destination})
	}
	if t.Worker != nil {
		w, more := convertWorker(t.Worker)
		diags = append(diags, more...)
		spec.Worker = w
	}
	if t.Batch != nil {
		b, more := convertBatch(t.Batch)
		diags = append(diags, more...)
		spec.Batch = b
	}
	return spec, diags
}

// convertBatch reads a batch block: the global batch the script is tuned
// at, the largest it can train at, and the most samples a GPU holds in one
// micro-batch.
func convertBatch(raw *batchHCL) (*Batch, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	at := attrRanges(raw.Body, hcl.Range{})
	bad := func(name, detail string) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid batch " + name, Detail: detail, Subject: at(name).Ptr()})
	}
	for _, a := range []struct {
		name string
		v    int
	}{{"size", raw.Size}, {"max", raw.Max}, {"max_per_gpu", raw.MaxPerGPU}} {
		if a.v < 1 || a.v > MaxBatch {
			bad(a.name, fmt.Sprintf("%d: %s is a number of samples from 1 to %d.", a.v, a.name, MaxBatch))
		}
	}
	if diags.HasErrors() {
		return nil, diags
	}
	if raw.Max < raw.Size {
		bad("max", fmt.Sprintf("max = %d is below size = %d: max is the largest global batch the script can train at, size the one it is tuned at.", raw.Max, raw.Size))
		return nil, diags
	}
	return &Batch{Size: raw.Size, Max: raw.Max, MaxPerGPU: raw.MaxPerGPU}, diags
}

// convertWorker reads a worker block: each worker task's CPU (MHz) and
// memory, besides its GPUs.
func convertWorker(raw *workerHCL) (Worker, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	at := attrRanges(raw.Body, hcl.Range{})
	var w Worker
	if raw.CPU != nil {
		if *raw.CPU < 1 || *raw.CPU > MaxWorkerCPU {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid cpu",
				Detail: fmt.Sprintf("%d: cpu is what each worker asks of its node's CPU, in MHz, from 1 to %d.", *raw.CPU, MaxWorkerCPU), Subject: at("cpu").Ptr()})
		} else {
			w.CPU = *raw.CPU
		}
	}
	if raw.Memory != "" {
		b, err := units.RAMInBytes(raw.Memory)
		if err != nil || b < 1<<20 || b > MaxWorkerMemory {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid memory",
				Detail: fmt.Sprintf("%q: give each worker's memory as a size such as \"8GiB\" (from 1MiB to 16TiB).", raw.Memory), Subject: at("memory").Ptr()})
		} else {
			w.MemoryMiB = int(mib(b))
		}
	}
	return w, diags
}

// evalContext holds the variables a jobspec may use: jobspec_dir, the
// directory of the jobspec file (absolute when filename is), so a job can
// name files beside its jobspec, like a training script in a lab or on a
// shared filesystem.
func evalContext(filename string) *hcl.EvalContext {
	return &hcl.EvalContext{Variables: map[string]cty.Value{
		"jobspec_dir": cty.StringVal(filepath.Dir(filename)),
	}}
}

// decodeGPUs reads gpus = N, gpus = "auto", or a gpus { ... } block from
// what gohcl left over, and reports anything else left as unsupported. It
// also returns where the block's model attribute is (the block where it
// has none, blockRange where there is no block), for Spec.ModelRange.
func decodeGPUs(body hcl.Body, blockRange hcl.Range) (GPUs, hcl.Range, hcl.Diagnostics) {
	content, diags := body.Content(&hcl.BodySchema{
		Attributes: []hcl.AttributeSchema{{Name: "gpus"}},
		Blocks:     []hcl.BlockHeaderSchema{{Type: "gpus"}},
	})
	if diags.HasErrors() {
		return GPUs{}, blockRange, diags
	}
	attr, hasAttr := content.Attributes["gpus"]
	if d := gpusGivenOnce(hasAttr, content.Blocks, blockRange); d != nil {
		return GPUs{}, blockRange, append(diags, d)
	}
	if hasAttr {
		g, more := decodeGPUsAttr(attr)
		return g, blockRange, append(diags, more...)
	}
	b := content.Blocks[0]
	g, more := decodeGPUsBlock(b)
	return g, attrRanges(b.Body, b.DefRange)("model"), append(diags, more...)
}

// errorAt is an error diagnostic about what stands at r.
func errorAt(r hcl.Range, summary, detail string) *hcl.Diagnostic {
	return &hcl.Diagnostic{Severity: hcl.DiagError, Summary: summary, Detail: detail, Subject: r.Ptr()}
}

// gpusGivenOnce checks that a training block gives gpus once: as an
// attribute or as one block, not both, and not neither. The error points
// at the first gpus too many (or at the training block for none); nil
// when gpus is given once.
func gpusGivenOnce(hasAttr bool, blocks hcl.Blocks, blockRange hcl.Range) *hcl.Diagnostic {
	switch {
	case hasAttr && len(blocks) > 0:
		return errorAt(blocks[0].DefRange, "Duplicate gpus", "Give gpus either as an attribute (a count or \"auto\") or as a block, not both.")
	case len(blocks) > 1:
		return errorAt(blocks[1].DefRange, "Duplicate gpus block", "A training block holds one gpus block.")
	case !hasAttr && len(blocks) == 0:
		return errorAt(blockRange, "Missing gpus", `Say how many GPUs the job needs: gpus = 4, gpus = "auto", or gpus { min = 2, max = 8 }.`)
	}
	return nil
}

// decodeGPUsAttr reads gpus given as an attribute: "auto" (the planner
// chooses the count, from one GPU up), or a whole number within bounds
// (a fixed count). A worker holds one GPU either way.
func decodeGPUsAttr(attr *hcl.Attribute) (GPUs, hcl.Diagnostics) {
	v, diags := attr.Expr.Value(nil)
	if diags.HasErrors() {
		return GPUs{}, diags
	}
	switch {
	case v.Type() == cty.String && v.AsString() == "auto":
		return GPUs{Auto: true, Min: 1, PerWorker: 1}, diags
	case v.Type() == cty.Number:
		bf := v.AsBigFloat()
		n, acc := bf.Int64()
		if !bf.IsInt() || acc != 0 || n < 1 || n > MaxGPUs {
			return GPUs{}, append(diags, errorAt(attr.Expr.Range(), "Invalid gpus", fmt.Sprintf("gpus is a whole number of at least 1 (and at most %d), or \"auto\".", MaxGPUs)))
		}
		return GPUs{Min: int(n), Max: int(n), PerWorker: 1}, diags
	}
	return GPUs{}, append(diags, errorAt(attr.Expr.Range(), "Invalid gpus", `gpus is a whole number of at least 1, or "auto".`))
}

// decodeGPUsBlock reads a gpus { ... } block in the order its checks
// depend on each other: every count within bounds (so that the
// arithmetic after stays in range), per_worker (the unit of the counts),
// the count or range, the counts as whole workers, and min_memory. It
// stops at an error that would make the checks after it misleading, and
// otherwise reports every error.
func decodeGPUsBlock(block *hcl.Block) (GPUs, hcl.Diagnostics) {
	var raw gpusHCL
	diags := gohcl.DecodeBody(block.Body, nil, &raw)
	if diags.HasErrors() {
		return GPUs{}, diags
	}
	at := attrRanges(raw.Body, block.DefRange)
	g := GPUs{Auto: raw.Auto, PerWorker: 1, Model: raw.Model}
	if d := raw.countOverMax(at); d != nil {
		return g, append(diags, d)
	}
	if raw.PerWorker != nil {
		g.PerWorker = *raw.PerWorker
		if g.PerWorker < 1 {
			return g, append(diags, errorAt(at("per_worker"), "Invalid per_worker", "per_worker is at least 1: the GPUs each worker holds on one node."))
		}
	}
	var more hcl.Diagnostics
	var ok bool
	g.Min, g.Max, more, ok = raw.counts(g.PerWorker, at, block.DefRange)
	diags = append(diags, more...)
	if !ok {
		return g, diags
	}
	if d := raw.notWholeWorkers(g, at); d != nil {
		diags = append(diags, d)
	}
	if raw.MinMemory != "" {
		var d *hcl.Diagnostic
		if g.MinMemoryMiB, d = raw.minMemoryMiB(at); d != nil {
			diags = append(diags, d)
		}
	}
	return g, diags
}

// countOverMax is the error for the first GPU count the block gives above
// MaxGPUs (count, min, max, then per_worker); nil when none is.
func (raw *gpusHCL) countOverMax(at func(string) hcl.Range) *hcl.Diagnostic {
	for _, c := range []struct {
		name string
		n    *int
	}{{"count", raw.Count}, {"min", raw.Min}, {"max", raw.Max}, {"per_worker", raw.PerWorker}} {
		if c.n != nil && *c.n > MaxGPUs {
			return errorAt(at(c.name), "Invalid "+c.name, fmt.Sprintf("%s = %d: a GPU count is at most %d.", c.name, *c.n, MaxGPUs))
		}
	}
	return nil
}

// counts reads the block's GPU count as min and max: count (a fixed
// number), or a range (see rangeCounts), not both, and count not with
// auto = true (which lets the planner choose). ok is false, with min and
// max 0, where no count could be read: the checks on the counts are then
// not made.
func (raw *gpusHCL) counts(perWorker int, at func(string) hcl.Range, blockRange hcl.Range) (lo, hi int, diags hcl.Diagnostics, ok bool) {
	switch {
	case raw.Count != nil && (raw.Min != nil || raw.Max != nil):
		return 0, 0, hcl.Diagnostics{errorAt(at("count"), "Conflicting GPU counts", "Give either count (a fixed number) or min and max (a range), not both.")}, false
	case raw.Count != nil && raw.Auto:
		return 0, 0, hcl.Diagnostics{errorAt(at("count"), "Conflicting GPU counts", "auto = true lets the planner choose the count; drop count, or bound it with min and max.")}, false
	case raw.Count != nil:
		if *raw.Count < 1 {
			diags = append(diags, errorAt(at("count"), "Invalid count", "count is at least 1."))
		}
		return *raw.Count, *raw.Count, diags, true
	case raw.Min == nil && raw.Max == nil && !raw.Auto:
		return 0, 0, hcl.Diagnostics{errorAt(blockRange, "Missing GPU count", "The gpus block needs count, or min and max, or auto = true.")}, false
	}
	lo, hi, diags = raw.rangeCounts(perWorker, at, blockRange)
	return lo, hi, diags, true
}

// rangeCounts reads a GPU range: min (one worker's GPUs where it is left
// out) and max, which only auto = true may leave out (then 0: the planner
// chooses how far to grow). min is at least 1 and at most max.
func (raw *gpusHCL) rangeCounts(perWorker int, at func(string) hcl.Range, blockRange hcl.Range) (lo, hi int, diags hcl.Diagnostics) {
	lo = perWorker
	if raw.Min != nil {
		lo = *raw.Min
	}
	if raw.Max != nil {
		hi = *raw.Max
	} else if !raw.Auto {
		diags = append(diags, errorAt(blockRange, "Missing max", "A GPU range needs max (or auto = true to let the planner choose)."))
	}
	if lo < 1 {
		diags = append(diags, errorAt(at("min"), "Invalid min", "min is at least 1."))
	}
	if raw.Max != nil && lo > hi {
		diags = append(diags, errorAt(at("max"), "Invalid GPU range", fmt.Sprintf("min (%d) is greater than max (%d).", lo, hi)))
	}
	return lo, hi, diags
}

// notWholeWorkers is the error for the first of g's min and max that is
// not a whole number of workers (named count where count gave both):
// a worker's GPUs are all on one node. nil when both are.
func (raw *gpusHCL) notWholeWorkers(g GPUs, at func(string) hcl.Range) *hcl.Diagnostic {
	for _, c := range []struct {
		name string
		n    int
	}{{"min", g.Min}, {"max", g.Max}} {
		if c.n > 0 && c.n%g.PerWorker != 0 {
			name := c.name
			if raw.Count != nil {
				name = "count"
			}
			return errorAt(at(name), "GPU count not a multiple of per_worker", fmt.Sprintf("%s = %d is not a multiple of per_worker = %d: a worker's GPUs are all on one node.", name, c.n, g.PerWorker))
		}
	}
	return nil
}

// minMemoryMiB reads min_memory, the least memory the job's GPUs have,
// in MiB rounded up. units.RAMInBytes multiplies in float64 and converts,
// so a size beyond int64 comes back as garbage (often negative): it is
// bounded. 0 and the error when the size is not one.
func (raw *gpusHCL) minMemoryMiB(at func(string) hcl.Range) (int, *hcl.Diagnostic) {
	b, err := units.RAMInBytes(raw.MinMemory)
	if err != nil || b <= 0 || b > MaxMinMemory {
		return 0, errorAt(at("min_memory"), "Invalid min_memory", fmt.Sprintf("%q: give a size such as \"40GiB\" or \"80GB\" (at most 1PiB).", raw.MinMemory))
	}
	return int(mib(b)), nil
}

// mib is b bytes in MiB, rounded up, without overflow.
func mib(b int64) int64 {
	m := b >> 20
	if b&(1<<20-1) != 0 {
		m++
	}
	return m
}

func convertTarget(raw *targetHCL, now time.Time) (*Target, hcl.Diagnostics) {
	var diags hcl.Diagnostics
	at := attrRanges(raw.Body, hcl.Range{})
	t := &Target{Metric: raw.Metric, Goal: raw.Goal, Tier1: raw.Tier1, Delivery: raw.Delivery, Webhook: raw.Webhook}
	switch raw.Direction {
	case "", "max":
	case "min":
		t.Lower = true
	default:
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid direction",
			Detail: fmt.Sprintf("%q: direction is \"max\" (higher is better, the default) or \"min\" (e.g. a loss).", raw.Direction), Subject: at("direction").Ptr()})
	}
	if t.Metric == "" {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Empty metric",
			Detail: "metric names what the training reports through the SDK, e.g. \"accuracy\".", Subject: at("metric").Ptr()})
	} else if err := termtext.Check(t.Metric); err != nil {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid metric",
			Detail: fmt.Sprintf("%q: %v; a metric name holds no control or bidirectional formatting characters.", t.Metric, err), Subject: at("metric").Ptr()})
	}
	for _, v := range []struct {
		name string
		x    *float64
	}{{"goal", &t.Goal}, {"tier1", t.Tier1}} {
		if v.x != nil && (math.IsInf(*v.x, 0) || math.IsNaN(*v.x)) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + v.name,
				Detail: fmt.Sprintf("%s is %g: give a finite number.", v.name, *v.x), Subject: at(v.name).Ptr()})
			return t, diags
		}
	}
	if t.Tier1 != nil {
		beyond := *t.Tier1 > t.Goal
		if t.Lower {
			beyond = *t.Tier1 < t.Goal
		}
		if beyond {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "tier1 beyond goal",
				Detail:  fmt.Sprintf("tier1 (%g) is the first model worth delivering, on the way to goal (%g); it cannot be past the goal.", *t.Tier1, t.Goal),
				Subject: at("tier1").Ptr()})
		}
	}
	if t.Delivery != "" && !filepath.IsAbs(t.Delivery) {
		diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid delivery",
			Detail:  fmt.Sprintf("%q: delivery is an absolute directory on the planner's machine, e.g. \"/models\" or \"${jobspec_dir}/models\".", t.Delivery),
			Subject: at("delivery").Ptr()})
	}
	if t.Webhook != "" {
		if u, err := url.Parse(t.Webhook); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid webhook",
				Detail:  fmt.Sprintf("%q: webhook is an http(s) URL the planner POSTs each delivered model to.", t.Webhook),
				Subject: at("webhook").Ptr()})
		}
	}
	if raw.Deadline != "" {
		if d, err := time.ParseDuration(raw.Deadline); err == nil {
			if d <= 0 {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid deadline",
					Detail: fmt.Sprintf("%q: a relative deadline is a positive duration such as \"6h\".", raw.Deadline), Subject: at("deadline").Ptr()})
			}
			t.Within = d
		} else if ts, err := time.Parse(time.RFC3339, raw.Deadline); err == nil {
			t.Deadline = ts
			if !ts.After(now) {
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagWarning, Summary: "Deadline in the past",
					Detail:  fmt.Sprintf("%s is before the submission time %s; the job runs, and its target counts as missed.", ts.Format(time.RFC3339), now.UTC().Format(time.RFC3339)),
					Subject: at("deadline").Ptr()})
			}
		} else {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid deadline",
				Detail: fmt.Sprintf("%q: give a duration after submission (\"6h\") or a time (\"2026-12-01T12:00:00Z\").", raw.Deadline), Subject: at("deadline").Ptr()})
		}
	}
	return t, diags
}

// attrRanges returns a lookup of attribute ranges in body, falling back to
// def when the attribute is absent or the body is not native syntax.
func attrRanges(body hcl.Body, def hcl.Range) func(string) hcl.Range {
	sb, _ := body.(*hclsyntax.Body)
	return func(name string) hcl.Range {
		if sb != nil {
			if a, ok := sb.Attributes[name]; ok {
				return a.SrcRange
			}
			if def == (hcl.Range{}) {
				return sb.SrcRange
			}
		}
		return def
	}
}

// NameRule says what ValidName accepts, for errors.
const NameRule = "1 to 63 letters, digits, '-' or '_', starting with a letter or digit and not ending in '-'"

// ValidName reports whether s is a valid job (or queue) name: NameRule.
func ValidName(s string) bool { return validName(s) }

func validName(s string) bool {
	if s == "" || len(s) > 63 {
		return false
	}
	for i, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case (r == '-' || r == '_') && i > 0:
		default:
			return false
		}
	}
	return !strings.HasSuffix(s, "-")
}
