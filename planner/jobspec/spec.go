// Package jobspec reads training jobspecs: one HCL file per job, holding one
// `training "name" { ... }` block. Every error is an HCL diagnostic that
// names the file, line and column; unknown attributes and blocks are errors.
//
//	training "resnet50" {
//	  command  = "python3"
//	  args     = ["${jobspec_dir}/train.py", "--epochs", "90"]
//	  launcher = "horovod"          # or "torchrun"
//	  user     = "alice"
//	  queue    = "vision"           # the planner's queue; default "default"
//	  priority = 50                 # 1..100; first within its queue
//	  pool     = "a100"             # a Consul-discovered worker pool
//
//	  gpus {                        # or gpus = 4, or gpus = "auto"
//	    min        = 2
//	    max        = 8
//	    per_worker = 1
//	    model      = "NVIDIA A100-SXM4-40GB"
//	    min_memory = "40GiB"
//	  }
//
//	  target {
//	    metric   = "accuracy"
//	    goal     = 0.93
//	    tier1    = 0.90
//	    deadline = "6h"             # after submission, or RFC 3339
//	    delivery = "/models"        # where tier-1 and goal models go
//	    webhook  = "https://hooks.example/models"  # told of each delivery
//	  }
//
//	  worker {                      # what each worker asks of its node
//	    cpu    = 4000               # MHz (default 500)
//	    memory = "16GiB"            # (default 1GiB)
//	  }
//
//	  batch {                       # the planner advises the batch size
//	    size        = 256           # global batch the script is tuned at
//	    max         = 8192          # the largest it can train at
//	    max_per_gpu = 128           # a GPU's most samples a micro-batch
//	  }
//
//	  anti_affinity { jobs = ["other-job"] }
//	  data "imagenet" { prefer = { "meta.datasets" = "imagenet" } }
//	  env = { NCCL_DEBUG = "WARN" }
//	}
//
// jobspec_dir is the directory of the jobspec file on the machine that
// submitted it (the CLI sends the file's absolute path), for files beside
// the jobspec in a lab or on a shared filesystem.
//
// # Limits
//
// A jobspec comes from users over the network, so it is bounded before it
// is parsed (the bytes are scanned first, without recursion) and what it
// may compute is bounded too; every refusal is an error at file:line:col:
//
//   - at most 64 KiB (MaxBytes);
//   - braces, brackets, parentheses, quoted strings, heredocs and template
//     sequences (${ ... }, %{ if } ... %{ endif }) nested at most 32 deep;
//   - at most 1,000 operators in the file (arithmetic, comparisons, !, the
//     conditional ?:, and index steps such as x[0]);
//   - at most 1,000 items in one list or object literal;
//   - no for-expressions ([for ...], {for ...}, %{ for }) and no function
//     calls: no functions are available, and the only variable is
//     jobspec_dir. Literal values, ${jobspec_dir} interpolation, %{ if }
//     and the operators above are all a jobspec evaluates;
//   - numbers in range: GPU counts (gpus, count, min, max, per_worker) from
//     1 to MaxGPUs (1,048,576), priority 1 to 100, min_memory from 1 byte to
//     1 PiB, a worker's cpu from 1 to 1,000,000 MHz and memory from 1 MiB
//     to 16 TiB, goal and tier1 finite (1/0 is refused), batch sizes from
//     1 to MaxBatch (16,777,216) samples, max at least size.
//
// The planner also runs only a few parses at once (Gate: 4, or GOMAXPROCS
// where fewer, at least 2); a submission that finds no slot free within 5 s is refused
// with 503 and Retry-After, and can be sent again.
package jobspec

import (
	"crypto/sha256"
	"maps"
	"slices"
	"time"

	"github.com/hashicorp/hcl/v2"
)

// Launchers a training job can run under.
const (
	LauncherHorovod  = "horovod"
	LauncherTorchrun = "torchrun"
)

// Spec is one validated training job.
type Spec struct {
	Name     string
	Command  string
	Args     []string
	Launcher string
	User     string
	Queue    string
	Priority int
	Pool     string
	Env      map[string]string
	Labels   map[string]string

	GPUs         GPUs
	Target       *Target
	Affinity     Selector
	AntiAffinity Selector
	Data         []Data
	Artifacts    []Artifact
	// Worker is what each worker task asks of its node besides its GPUs.
	Worker Worker
	// Batch, when set, lets the planner advise the job's batch size for
	// the GPUs it holds (assess.AdviseBatch); nil: the script's own.
	Batch *Batch `json:",omitempty"`

	// Range is where the training block is, for later diagnostics.
	Range hcl.Range
	// QueueRange is where the queue attribute is (the training block's
	// Range when there is none), for the planner's diagnostics.
	QueueRange hcl.Range
	// PoolRange and ModelRange are where the pool attribute and the gpus
	// block's model are (the training or gpus block where there is none),
	// for the planner's diagnostics when no node has them; not stored
	// with a job (the checks are made when it is submitted).
	PoolRange  hcl.Range `json:"-"`
	ModelRange hcl.Range `json:"-"`
	// Secrets are where the text Parse read holds the values the API does
	// not show back, so that the text can be redacted without parsing it
	// again. Not stored with a job: a record read back has none (nil),
	// and its text is redacted by parsing it.
	Secrets *Secrets `json:"-"`
}

// Secrets are the attributes of a jobspec's text whose values are secrets
// (env, a target's webhook, each artifact's source), in the text's order,
// and the text they are in (its SHA-256): they hold for that text only.
type Secrets struct {
	Text  [sha256.Size]byte
	Spans []SecretSpan
}

// In says whether the spans are places in text.
func (s *Secrets) In(text string) bool {
	return s != nil && sha256.Sum256([]byte(text)) == s.Text
}

// SecretSpan is one attribute holding a secret: its kind and where it is
// in the text, from its name to the end of its value, as byte offsets.
type SecretSpan struct {
	Kind       SecretKind
	Start, End int
}

// SecretKind is which attribute a SecretSpan is.
type SecretKind int

// The attributes that hold secrets.
const (
	SecretEnv      SecretKind = iota + 1 // training's env object
	SecretWebhook                        // target's webhook
	SecretArtifact                       // an artifact's source (the n-th of the text is the n-th artifact)
)

// GPUs is how many GPUs the job may hold and of which kind. A fixed count
// is Min == Max. Auto jobs let the planner assess the count within
// [Min, Max] (Max 0: up to what a node pool offers).
type GPUs struct {
	Auto         bool
	Min, Max     int
	PerWorker    int
	Model        string
	MinMemoryMiB int
}

// Most is the most GPUs a job of g may ever hold: Max, or MaxGPUs where
// it has none.
func (g GPUs) Most() int {
	if g.Max > 0 {
		return g.Max
	}
	return MaxGPUs
}

// Worker is a worker task's CPU, in MHz, and memory, in MiB, as Nomad's
// resources block asks for them (the worker block); 0 is the planner's
// default (planner/nomadjob: 500 MHz and 1 GiB).
type Worker struct {
	CPU       int `json:",omitempty"`
	MemoryMiB int `json:",omitempty"`
}

// Batch is a job's batch block, in samples per optimizer step: Size is the
// global batch its script is tuned at (the one its learning rate is set
// for), Max the largest global batch it can train at, and MaxPerGPU the
// most samples one GPU holds in a micro-batch (larger batches take
// gradient accumulation).
type Batch struct {
	Size      int
	Max       int
	MaxPerGPU int
}

// Fixed reports whether the job asks for exactly one count.
func (g GPUs) Fixed() bool { return !g.Auto && g.Min == g.Max }

// Target is what the user wants: Metric to reach Goal (by Deadline, if
// set), and the model delivered as soon as it reaches Tier1.
type Target struct {
	Metric string
	Goal   float64
	Tier1  *float64
	// Lower is true for metrics where lower is better (a loss).
	Lower bool
	// Deadline is absolute; Within is the deadline relative to submission.
	// At most one is set.
	Deadline time.Time
	Within   time.Duration
	// Delivery is the directory, on the planner's machine, where the
	// models are delivered: when the metric reaches tier1, and again when
	// it reaches goal, the planner copies the checkpoint the training
	// reported into <Delivery>/<job-id>/<tier>/ ("tier1" or "goal").
	// Empty: the planner's delivery_dir. An absolute path.
	Delivery string
	// Webhook is an http(s) URL the planner POSTs each delivery to (besides
	// the webhook of its own configuration, if any).
	Webhook string
}

// Selector names other jobs, by name or by labels.
type Selector struct {
	Jobs   []string
	Labels map[string]string
}

// Empty reports whether the selector selects nothing.
func (s Selector) Empty() bool { return len(s.Jobs) == 0 && len(s.Labels) == 0 }

// Data is a data set the job reads and a locality hint: nodes whose
// attributes match Prefer are preferred (a soft affinity).
type Data struct {
	Name   string
	Path   string
	Prefer map[string]string
}

// Artifact is fetched into the job's task directory before it starts
// (Nomad's artifact block).
type Artifact struct {
	Source      string
	Destination string
}

// Clone returns a deep copy of s: its slices, maps and target are its own.
func (s *Spec) Clone() Spec {
	c := *s
	c.Args = slices.Clone(s.Args)
	c.Env = maps.Clone(s.Env)
	c.Labels = maps.Clone(s.Labels)
	if s.Target != nil {
		t := *s.Target
		if t.Tier1 != nil {
			tier1 := *t.Tier1
			t.Tier1 = &tier1
		}
		c.Target = &t
	}
	c.Affinity = s.Affinity.clone()
	c.AntiAffinity = s.AntiAffinity.clone()
	if s.Data != nil {
		c.Data = make([]Data, len(s.Data))
		for i, d := range s.Data {
			d.Prefer = maps.Clone(d.Prefer)
			c.Data[i] = d
		}
	}
	c.Artifacts = slices.Clone(s.Artifacts)
	if s.Secrets != nil {
		sec := *s.Secrets
		sec.Spans = slices.Clone(sec.Spans)
		c.Secrets = &sec
	}
	if s.Batch != nil {
		b := *s.Batch
		c.Batch = &b
	}
	return c
}

func (s Selector) clone() Selector {
	return Selector{Jobs: slices.Clone(s.Jobs), Labels: maps.Clone(s.Labels)}
}
