package jobspec

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclwrite"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"
)

// fuzzSeeds are the repository's jobspecs and the inputs of issue #13.
func fuzzSeeds(f *testing.F) {
	f.Helper()
	paths, err := filepath.Glob("../../jobspecs/examples/*.hcl")
	must.NoError(f, err)
	for _, p := range paths {
		if strings.HasSuffix(p, ".nomad.hcl") {
			continue // a Nomad job, not a jobspec
		}
		src, err := os.ReadFile(p)
		must.NoError(f, err)
		f.Add(string(src))
	}
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	nested := "\"x\""
	for _, v := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		nested = "[for " + v + " in " + ten + ": " + nested + "]"
	}
	for _, s := range []string{
		job(""),
		job("  args = " + strings.Repeat("[", 40) + strings.Repeat("]", 40) + "\n"),                                         // row 3, small
		job("  args = " + nested + "\n"),                                                                                    // row 4
		"training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 1\n    min_memory = \"9223372036854774784B\"\n  }\n}\n", // row 11
		job("  user = upper(\"a\")\n  priority = -(-50)\n"),
		job("  worker {\n    cpu = 2000\n    memory = \"4GiB\"\n  }\n"),
		job("  target {\n    metric = \"loss\"\n    goal = 1/0\n    direction = \"min\"\n    deadline = \"2026-12-01T12:00:00Z\"\n  }\n"),
		job("  env = { \"A-B\" = \"${jobspec_dir}\", C = \"%{ if true }y%{ endif }\" }\n  labels = { x = \"$${lit}\" }\n"),
		job("  anti_affinity { jobs = [\"b\"] }\n  affinity { labels = { k = \"v\" } }\n  data \"d\" {\n    path = \"/d\"\n    prefer = { \"meta.x\" = \"y\" }\n  }\n  artifact { source = \"https://e/x\" }\n"),
		"training \"b\" {\n  command = \"x\"\n  gpus {\n    min = 2\n    max = 8\n    per_worker = 2\n    model = \"A100\"\n  }\n  target {\n    metric = \"acc\"\n    goal = 0.9\n    tier1 = 0.8\n    deadline = \"6h\"\n    delivery = \"/m\"\n    webhook = \"https://h/x\"\n  }\n}\n",
	} {
		f.Add(s)
	}
}

// FuzzParse: Parse never panics; every error says where (the file given,
// a line and column); an accepted jobspec holds what the docs promise, and
// written back as HCL it parses to the same Spec.
func FuzzParse(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, src string) {
		spec, diags := Parse([]byte(src), "/jobs/fuzz.hcl", submitted)
		if diags.HasErrors() {
			must.Nil(t, spec)
			for _, d := range diags {
				if d.Severity != hcl.DiagError {
					continue
				}
				must.NotNil(t, d.Subject, must.Sprintf("no position: %s: %s", d.Summary, d.Detail))
				must.Eq(t, "/jobs/fuzz.hcl", d.Subject.Filename)
				must.Positive(t, d.Subject.Start.Line)
				must.Positive(t, d.Subject.Start.Column)
			}
			return
		}
		must.NotNil(t, spec)
		checkSpec(t, spec)

		again, diags := Parse(render(spec), "/jobs/fuzz.hcl", submitted)
		must.False(t, diags.HasErrors(), must.Sprintf("%s\nrendered:\n%s", diags.Error(), render(spec)))
		spec.Range, again.Range = hcl.Range{}, hcl.Range{}
		spec.QueueRange, again.QueueRange = hcl.Range{}, hcl.Range{}
		spec.PoolRange, again.PoolRange = hcl.Range{}, hcl.Range{}
		spec.ModelRange, again.ModelRange = hcl.Range{}, hcl.Range{}
		spec.Secrets, again.Secrets = nil, nil
		must.Eq(t, spec, again, must.Sprintf("rendered:\n%s", render(spec)))
	})
}

// checkSpec asserts what the package promises of an accepted Spec.
func checkSpec(t *testing.T, s *Spec) {
	t.Helper()
	must.True(t, validName(s.Name), must.Sprintf("name %q", s.Name))
	must.NotEq(t, "", s.Command)
	must.SliceContains(t, []string{LauncherHorovod, LauncherTorchrun}, s.Launcher)
	must.Between(t, 1, s.Priority, MaxPriority)
	must.NotEq(t, "", s.Queue)
	g := s.GPUs
	must.Between(t, 1, g.PerWorker, MaxGPUs)
	must.Between(t, 1, g.Min, MaxGPUs)
	if !g.Auto || g.Max != 0 {
		must.Between(t, g.Min, g.Max, MaxGPUs)
	}
	if !g.Auto {
		must.Zero(t, g.Min%g.PerWorker)
		must.Zero(t, g.Max%g.PerWorker)
	}
	must.Between(t, 0, g.MinMemoryMiB, MaxMinMemory>>20)
	if tg := s.Target; tg != nil {
		must.NotEq(t, "", tg.Metric)
		must.False(t, math.IsInf(tg.Goal, 0) || math.IsNaN(tg.Goal))
		if tg.Tier1 != nil {
			must.False(t, math.IsInf(*tg.Tier1, 0) || math.IsNaN(*tg.Tier1))
		}
		must.True(t, tg.Deadline.IsZero() || tg.Within == 0)
		must.True(t, tg.Within >= 0)
		must.True(t, tg.Delivery == "" || filepath.IsAbs(tg.Delivery))
	}
	must.False(t, slices.Contains(s.AntiAffinity.Jobs, s.Name))
	if bb := s.Batch; bb != nil {
		must.Between(t, 1, bb.Size, bb.Max)
		must.Between(t, bb.Size, bb.Max, MaxBatch)
		must.Between(t, 1, bb.MaxPerGPU, MaxBatch)
	}
}

// render writes s back as a jobspec, literal values only.
func render(s *Spec) []byte {
	f := hclwrite.NewEmptyFile()
	b := f.Body().AppendNewBlock("training", []string{s.Name}).Body()
	str := func(body *hclwrite.Body, name, v string) {
		if v != "" {
			body.SetAttributeValue(name, cty.StringVal(v))
		}
	}
	strs := func(body *hclwrite.Body, name string, vs []string) {
		if vs == nil {
			return
		}
		if len(vs) == 0 {
			body.SetAttributeValue(name, cty.ListValEmpty(cty.String))
			return
		}
		l := make([]cty.Value, len(vs))
		for i, v := range vs {
			l[i] = cty.StringVal(v)
		}
		body.SetAttributeValue(name, cty.ListVal(l))
	}
	strMap := func(body *hclwrite.Body, name string, m map[string]string) {
		if m == nil {
			return
		}
		vals := make(map[string]cty.Value, len(m))
		for k, v := range m {
			vals[k] = cty.StringVal(v)
		}
		if len(vals) == 0 {
			body.SetAttributeValue(name, cty.MapValEmpty(cty.String))
			return
		}
		body.SetAttributeValue(name, cty.MapVal(vals))
	}
	str(b, "command", s.Command)
	strs(b, "args", s.Args)
	str(b, "launcher", s.Launcher)
	str(b, "user", s.User)
	str(b, "queue", s.Queue)
	b.SetAttributeValue("priority", cty.NumberIntVal(int64(s.Priority)))
	str(b, "pool", s.Pool)
	strMap(b, "env", s.Env)
	strMap(b, "labels", s.Labels)

	g := b.AppendNewBlock("gpus", nil).Body()
	if s.GPUs.Auto {
		g.SetAttributeValue("auto", cty.True)
	}
	g.SetAttributeValue("min", cty.NumberIntVal(int64(s.GPUs.Min)))
	if !s.GPUs.Auto || s.GPUs.Max != 0 {
		g.SetAttributeValue("max", cty.NumberIntVal(int64(s.GPUs.Max)))
	}
	g.SetAttributeValue("per_worker", cty.NumberIntVal(int64(s.GPUs.PerWorker)))
	str(g, "model", s.GPUs.Model)
	if s.GPUs.MinMemoryMiB > 0 {
		str(g, "min_memory", strconv.Itoa(s.GPUs.MinMemoryMiB)+"MiB")
	}

	if s.Worker != (Worker{}) {
		w := b.AppendNewBlock("worker", nil).Body()
		if s.Worker.CPU > 0 {
			w.SetAttributeValue("cpu", cty.NumberIntVal(int64(s.Worker.CPU)))
		}
		if s.Worker.MemoryMiB > 0 {
			str(w, "memory", strconv.Itoa(s.Worker.MemoryMiB)+"MiB")
		}
	}

	if bb := s.Batch; bb != nil {
		w := b.AppendNewBlock("batch", nil).Body()
		w.SetAttributeValue("size", cty.NumberIntVal(int64(bb.Size)))
		w.SetAttributeValue("max", cty.NumberIntVal(int64(bb.Max)))
		w.SetAttributeValue("max_per_gpu", cty.NumberIntVal(int64(bb.MaxPerGPU)))
	}

	if tg := s.Target; tg != nil {
		t := b.AppendNewBlock("target", nil).Body()
		str(t, "metric", tg.Metric)
		t.SetAttributeValue("goal", cty.NumberFloatVal(tg.Goal))
		if tg.Tier1 != nil {
			t.SetAttributeValue("tier1", cty.NumberFloatVal(*tg.Tier1))
		}
		if tg.Lower {
			str(t, "direction", "min")
		}
		switch {
		case tg.Within != 0:
			str(t, "deadline", tg.Within.String())
		case !tg.Deadline.IsZero():
			str(t, "deadline", tg.Deadline.Format(time.RFC3339Nano))
		}
		str(t, "delivery", tg.Delivery)
		str(t, "webhook", tg.Webhook)
	}
	sel := func(name string, s Selector, set bool) {
		if !set {
			return
		}
		body := b.AppendNewBlock(name, nil).Body()
		strs(body, "jobs", s.Jobs)
		strMap(body, "labels", s.Labels)
	}
	sel("affinity", s.Affinity, s.Affinity.Jobs != nil || s.Affinity.Labels != nil)
	sel("anti_affinity", s.AntiAffinity, s.AntiAffinity.Jobs != nil || s.AntiAffinity.Labels != nil)
	for _, d := range s.Data {
		body := b.AppendNewBlock("data", []string{d.Name}).Body()
		str(body, "path", d.Path)
		strMap(body, "prefer", d.Prefer)
	}
	for _, a := range s.Artifacts {
		body := b.AppendNewBlock("artifact", nil).Body()
		body.SetAttributeValue("source", cty.StringVal(a.Source))
		str(body, "destination", a.Destination)
	}
	return f.Bytes()
}
