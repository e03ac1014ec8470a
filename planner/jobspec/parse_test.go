package jobspec

import (
	"strconv"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
)

var submitted = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)

func TestParse_Valid(t *testing.T) {
	cases := []struct {
		name string
		src  string
		want func(*testing.T, *Spec)
	}{
		{
			name: "fixed count, defaults",
			src:  "training \"a\" {\n  command = \"python3\"\n  gpus = 4\n}\n",
			want: func(t *testing.T, s *Spec) {
				must.Eq(t, "a", s.Name)
				must.Eq(t, GPUs{Min: 4, Max: 4, PerWorker: 1}, s.GPUs)
				must.True(t, s.GPUs.Fixed())
				must.Eq(t, LauncherHorovod, s.Launcher)
				must.Eq(t, DefaultPriority, s.Priority)
				must.Eq(t, DefaultQueue, s.Queue)
				must.Nil(t, s.Target)
			},
		},
		{
			name: "batch",
			src:  "training \"a\" {\n  command = \"python3\"\n  gpus { \n    min = 1\n    max = 8\n  }\n  batch {\n    size = 128\n    max = 4096\n    max_per_gpu = 256\n  }\n}\n",
			want: func(t *testing.T, s *Spec) {
				must.Eq(t, &Batch{Size: 128, Max: 4096, MaxPerGPU: 256}, s.Batch)
			},
		},
		{
			name: "auto",
			src:  "training \"a\" {\n  command = \"python3\"\n  gpus = \"auto\"\n}\n",
			want: func(t *testing.T, s *Spec) {
				must.True(t, s.GPUs.Auto)
				must.False(t, s.GPUs.Fixed())
			},
		},
		{
			name: "range block with constraints and everything",
			src: `training "resnet50" {
  command  = "python3"
  args     = ["train.py", "--epochs", "90"]
  launcher = "torchrun"
  user     = "alice"
  queue    = "research"
  priority = 80
  pool     = "a100"
  env      = { NCCL_DEBUG = "WARN" }
  labels   = { team = "vision" }

  gpus {
    min        = 2
    max        = 8
    per_worker = 2
    model      = "NVIDIA A100-SXM4-40GB"
    min_memory = "40GiB"
  }

  target {
    metric   = "accuracy"
    goal     = 0.93
    tier1    = 0.90
    deadline = "6h"
    delivery = "/models/resnet50"
    webhook  = "https://hooks.example/models"
  }

  affinity { labels = { team = "vision" } }
  anti_affinity { jobs = ["bert"] }
  data "imagenet" {
    path   = "/datasets/imagenet"
    prefer = { "meta.datasets" = "imagenet" }
  }
  artifact { source = "https://example.com/train.py" }
  worker {
    cpu    = 4000
    memory = "16GiB"
  }
}
`,
			want: func(t *testing.T, s *Spec) {
				must.Eq(t, Worker{CPU: 4000, MemoryMiB: 16384}, s.Worker)
				must.Eq(t, []string{"train.py", "--epochs", "90"}, s.Args)
				must.Eq(t, LauncherTorchrun, s.Launcher)
				must.Eq(t, 80, s.Priority)
				must.Eq(t, GPUs{Min: 2, Max: 8, PerWorker: 2, Model: "NVIDIA A100-SXM4-40GB", MinMemoryMiB: 40960}, s.GPUs)
				must.Eq(t, "accuracy", s.Target.Metric)
				must.Eq(t, 0.93, s.Target.Goal)
				must.Eq(t, 0.90, *s.Target.Tier1)
				must.Eq(t, 6*time.Hour, s.Target.Within)
				must.Eq(t, "/models/resnet50", s.Target.Delivery)
				must.Eq(t, "https://hooks.example/models", s.Target.Webhook)
				must.Eq(t, []string{"bert"}, s.AntiAffinity.Jobs)
				must.Eq(t, map[string]string{"team": "vision"}, s.Affinity.Labels)
				must.Eq(t, []Data{{Name: "imagenet", Path: "/datasets/imagenet", Prefer: map[string]string{"meta.datasets": "imagenet"}}}, s.Data)
				must.Len(t, 1, s.Artifacts)
				must.Eq(t, "WARN", s.Env["NCCL_DEBUG"])
			},
		},
		{
			name: "auto bounded, loss target with absolute deadline",
			src: `training "b" {
  command = "python3"
  gpus {
    auto = true
    max  = 16
  }
  target {
    metric    = "loss"
    direction = "min"
    goal      = 0.1
    tier1     = 0.5
    deadline  = "2026-11-23T10:00:00Z"
  }
}
`,
			want: func(t *testing.T, s *Spec) {
				must.Eq(t, GPUs{Auto: true, Min: 1, Max: 16, PerWorker: 1}, s.GPUs)
				must.True(t, s.Target.Lower)
				must.Eq(t, time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC), s.Target.Deadline)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, diags := Parse([]byte(tc.src), "job.hcl", submitted)
			must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
			tc.want(t, spec)
		})
	}
}

// Each bad input is an error that says what is wrong and where
// (file:line:col), and no Spec comes back.
func TestParse_Errors(t *testing.T) {
	cases := []struct {
		name  string
		src   string
		where string // file:line:col of the first error
		what  string // in its summary or detail
	}{
		{"syntax error", "training \"a\" {\n  command = \n}\n", "job.hcl:2:13", "Invalid expression"},
		{"unknown attribute", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  gpu_count = 2\n}\n", "job.hcl:4:3", "gpu_count"},
		{"unknown block", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  resources {}\n}\n", "job.hcl:4:3", "resources"},
		{"unknown key in gpus", "training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 1\n    cnt = 2\n  }\n}\n", "job.hcl:5:5", "cnt"},
		{"missing command", "training \"a\" {\n  gpus = 1\n}\n", "job.hcl:1:1", "Missing command"},
		{"worker cpu 0", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    cpu = 0\n  }\n}\n", "job.hcl:5:5", "in MHz, from 1 to 1000000"},
		{"worker cpu too big", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    cpu = 1000001\n  }\n}\n", "job.hcl:5:5", "Invalid cpu"},
		{"worker memory not a size", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    memory = \"lots\"\n  }\n}\n", "job.hcl:5:5", "from 1MiB to 16TiB"},
		{"worker memory too small", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    memory = \"1KiB\"\n  }\n}\n", "job.hcl:5:5", "Invalid memory"},
		{"worker memory too big", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    memory = \"17TiB\"\n  }\n}\n", "job.hcl:5:5", "Invalid memory"},
		{"worker unknown key", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  worker {\n    gpus = 2\n  }\n}\n", "job.hcl:5:5", "gpus"},
		{"missing gpus", "training \"a\" {\n  command = \"x\"\n}\n", "job.hcl:1:1", "Missing gpus"},
		{"min greater than max", "training \"a\" {\n  command = \"x\"\n  gpus {\n    min = 8\n    max = 2\n  }\n}\n", "job.hcl:5:5", "min (8) is greater than max (2)"},
		{"not a multiple of per_worker", "training \"a\" {\n  command = \"x\"\n  gpus {\n    min = 3\n    max = 8\n    per_worker = 2\n  }\n}\n", "job.hcl:4:5", "not a multiple of per_worker"},
		{"count and range", "training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 2\n    max = 8\n  }\n}\n", "job.hcl:4:5", "either count"},
		{"zero gpus", "training \"a\" {\n  command = \"x\"\n  gpus = 0\n}\n", "job.hcl:3:10", "at least 1"},
		{"bad gpus string", "training \"a\" {\n  command = \"x\"\n  gpus = \"many\"\n}\n", "job.hcl:3:10", "auto"},
		{"bad launcher", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  launcher = \"mpirun\"\n}\n", "job.hcl:4:3", "launcher is"},
		{"bad priority", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  priority = 101\n}\n", "job.hcl:4:3", "priority is from 1"},
		{"bad memory", "training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 1\n    min_memory = \"lots\"\n  }\n}\n", "job.hcl:5:5", "size such as"},
		{"tier1 above goal", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    tier1 = 0.95\n  }\n}\n", "job.hcl:7:5", "cannot be past the goal"},
		{"bad deadline", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    deadline = \"tomorrow\"\n  }\n}\n", "job.hcl:7:5", "duration after submission"},
		{"relative delivery", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    delivery = \"models\"\n  }\n}\n", "job.hcl:7:5", "absolute directory"},
		{"bad webhook", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    webhook = \"hooks.example/x\"\n  }\n}\n", "job.hcl:7:5", "http(s) URL"},
		{"two jobs", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n}\ntraining \"b\" {\n  command = \"x\"\n  gpus = 1\n}\n", "job.hcl:5:1", "file of its own"},
		{"no job", "# nothing\n", "job.hcl:1:1", "Missing training block"},
		{"bad name", "training \"no spaces\" {\n  command = \"x\"\n  gpus = 1\n}\n", "job.hcl:1:1", "Invalid job name"},
		{"batch size 0", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  batch {\n    size = 0\n    max = 8\n    max_per_gpu = 8\n  }\n}\n", "job.hcl:5:5", "size is a number of samples from 1 to 16777216"},
		{"batch max below size", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  batch {\n    size = 64\n    max = 32\n    max_per_gpu = 8\n  }\n}\n", "job.hcl:6:5", "max = 32 is below size = 64"},
		{"batch max_per_gpu too big", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  batch {\n    size = 64\n    max = 128\n    max_per_gpu = 16777217\n  }\n}\n", "job.hcl:7:5", "Invalid batch max_per_gpu"},
		{"batch missing max", "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  batch {\n    size = 64\n    max_per_gpu = 8\n  }\n}\n", "job.hcl:4:9", "max"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, diags := Parse([]byte(tc.src), "job.hcl", submitted)
			must.Nil(t, spec)
			must.True(t, diags.HasErrors())
			first := firstError(diags)
			must.NotNil(t, first.Subject, must.Sprintf("no position: %s", first.Error()))
			must.Eq(t, tc.where, position(first.Subject), must.Sprint(diags.Error()))
			must.StrContains(t, first.Summary+" "+first.Detail, tc.what)
			must.StrContains(t, hcldiag.Format(diags), tc.where+": error: ")
		})
	}
}

// The spec says where its pool and GPU model are, for the planner's
// errors when no node has them: the attributes, else the block.
func TestParse_PoolAndModelRanges(t *testing.T) {
	src := "training \"a\" {\n  command = \"x\"\n  pool    = \"a100\"\n  gpus {\n    min   = 1\n    max   = 2\n    model = \"A100\"\n  }\n}\n"
	spec, diags := Parse([]byte(src), "job.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	must.Eq(t, "job.hcl:3:3", position(&spec.PoolRange))
	must.Eq(t, "job.hcl:7:5", position(&spec.ModelRange))

	src = "training \"a\" {\n  command = \"x\"\n  gpus {\n    min = 1\n    max = 2\n  }\n}\n"
	spec, diags = Parse([]byte(src), "job.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags))
	must.Eq(t, "job.hcl:1:1", position(&spec.PoolRange))
	must.Eq(t, "job.hcl:3:3", position(&spec.ModelRange))
}

// A deadline already past is a warning: the job is accepted.
func TestParse_PastDeadlineWarns(t *testing.T) {
	src := "training \"a\" {\n  command = \"x\"\n  gpus = 1\n  target {\n    metric = \"accuracy\"\n    goal = 0.9\n    deadline = \"2026-11-21T10:00:00Z\"\n  }\n}\n"
	spec, diags := Parse([]byte(src), "job.hcl", submitted)
	must.NotNil(t, spec)
	must.False(t, diags.HasErrors())
	must.Len(t, 1, diags)
	must.Eq(t, hcl.DiagWarning, diags[0].Severity)
	must.StrContains(t, diags[0].Summary, "Deadline in the past")
	must.Eq(t, "job.hcl:7:5", position(diags[0].Subject))
}

func TestParseFile_Missing(t *testing.T) {
	_, diags := ParseFile("/no/such/job.hcl", submitted)
	must.True(t, diags.HasErrors())
	must.StrContains(t, diags.Error(), "no such file")
}

func firstError(diags hcl.Diagnostics) *hcl.Diagnostic {
	for _, d := range diags {
		if d.Severity == hcl.DiagError {
			return d
		}
	}
	return nil
}

func position(r *hcl.Range) string {
	return r.Filename + ":" + strconv.Itoa(r.Start.Line) + ":" + strconv.Itoa(r.Start.Column)
}

func TestParse_JobspecDir(t *testing.T) {
	src := "training \"a\" {\n  command = \"python3\"\n  args = [\"${jobspec_dir}/train.py\"]\n  gpus = 1\n}\n"
	spec, diags := Parse([]byte(src), "/home/alice/jobs/a.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, []string{"/home/alice/jobs/train.py"}, spec.Args)

	_, diags = Parse([]byte("training \"a\" {\n  command = \"${no_such}\"\n  gpus = 1\n}\n"), "a.hcl", submitted)
	must.StrContains(t, hcldiag.Format(diags), "a.hcl:2:16: error: Unknown variable")
}

// The example jobspec parses, target included.
func TestParse_Example(t *testing.T) {
	spec, diags := ParseFile("../../jobspecs/examples/train.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, "accuracy", spec.Target.Metric)
	must.Eq(t, 0.3, *spec.Target.Tier1)
	must.Eq(t, 0.4, spec.Target.Goal)

	spec, diags = ParseFile("../../jobspecs/examples/train_adaptive.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Eq(t, &Batch{Size: 64, Max: 1024, MaxPerGPU: 256}, spec.Batch)
}
