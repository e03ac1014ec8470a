package jobspec

import (
	"strings"
	"testing"
	"time"

	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hclsafe"
)

// job wraps body (attributes of a training block) into a jobspec whose
// command and gpus are set.
func job(body string) string {
	return "training \"a\" {\n  command = \"python3\"\n  gpus = 1\n" + body + "}\n"
}

// Issue #13 row 3: `args = [[[...]]]` 300,000 deep crashed the planner
// with a fatal stack overflow inside hclsyntax. It is refused before it is
// parsed, with a position; so is nesting under the size limit.
func TestParse_Row3_DeepNestingRefused(t *testing.T) {
	cases := []struct {
		name, src, summary, where string
	}{
		{"300,000 deep (600 KB)", job("  args = " + strings.Repeat("[", 300_000) + strings.Repeat("]", 300_000) + "\n"),
			"File too large", "job.hcl:4:"},
		{"30,000 deep (60 KB)", job("  args = " + strings.Repeat("[", 30_000) + strings.Repeat("]", 30_000) + "\n"),
			"Nested too deeply", "job.hcl:4:41"},
		{"unary minus 60,000 times", job("  priority = " + strings.Repeat("-", 60_000) + "1\n"),
			"Too many operators", "job.hcl:4:"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, diags := Parse([]byte(tc.src), "job.hcl", submitted)
			must.Nil(t, spec)
			first := firstError(diags)
			must.NotNil(t, first)
			must.Eq(t, tc.summary, first.Summary)
			must.NotNil(t, first.Subject)
			must.StrHasPrefix(t, tc.where, position(first.Subject))
		})
	}
}

// Issue #13 row 4: a 321-byte jobspec of 7 nested for-expressions took 33 s
// and 1 GB to evaluate. For-expressions (and %{ for }) are refused before
// anything is evaluated, and so are function calls: none are documented.
func TestParse_Row4_ForAndFunctionsRefused(t *testing.T) {
	ten := "[0,1,2,3,4,5,6,7,8,9]"
	nested := "\"x\""
	for _, v := range []string{"g", "f", "e", "d", "c", "b", "a"} {
		nested = "[for " + v + " in " + ten + ": " + nested + "]"
	}
	cases := []struct {
		name, src, summary, where string
	}{
		{"seven nested fors", job("  args = " + nested + "\n"), "For-expressions are not supported", "job.hcl:4:10"},
		// This one main accepted (args = ["a", "b"]).
		{"a small for", job("  args = [for s in [\"a\", \"b\"]: s]\n"), "For-expressions are not supported", "job.hcl:4:10"},
		{"an object for", job("  env = {for k in [\"A\"]: k => \"1\"}\n"), "For-expressions are not supported", "job.hcl:4:9"},
		{"a for directive", job("  user = \"%{ for s in [\"a\"] }${s}%{ endfor }\"\n"), "For-expressions are not supported", "job.hcl:4:"},
		{"a function call", job("  user = upper(\"alice\")\n"), "Function calls are not supported", "job.hcl:4:10"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			start := time.Now()
			spec, diags := Parse([]byte(tc.src), "job.hcl", submitted)
			must.Less(t, 2*time.Second, time.Since(start))
			must.Nil(t, spec)
			first := firstError(diags)
			must.NotNil(t, first)
			must.Eq(t, tc.summary, first.Summary)
			must.StrHasPrefix(t, tc.where, position(first.Subject))
		})
	}
}

// Issue #13 row 11: min_memory = "9223372036854774784B" was stored as
// -8796093022208 MiB (the rounding up overflowed). Sizes are bounded and
// converted without overflow.
func TestParse_Row11_MinMemoryBounded(t *testing.T) {
	gpus := func(mem string) string {
		return "training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 1\n    min_memory = \"" + mem + "\"\n  }\n}\n"
	}
	for _, mem := range []string{"9223372036854774784B", "9223372036854775807B", "99999999999999999999B", "1025PiB", "8EiB", "-1GiB", "0B"} {
		t.Run("refused "+mem, func(t *testing.T) {
			spec, diags := Parse([]byte(gpus(mem)), "job.hcl", submitted)
			must.Nil(t, spec)
			first := firstError(diags)
			must.Eq(t, "Invalid min_memory", first.Summary)
			must.Eq(t, "job.hcl:5:5", position(first.Subject))
		})
	}
	for mem, want := range map[string]int{"1B": 1, "1MiB": 1, "1048577B": 2, "40GiB": 40960, "1PiB": 1 << 30} {
		t.Run("accepted "+mem, func(t *testing.T) {
			spec, diags := Parse([]byte(gpus(mem)), "job.hcl", submitted)
			must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
			must.Eq(t, want, spec.GPUs.MinMemoryMiB)
		})
	}
}

// Numbers out of range are errors at their attribute: GPU counts beyond
// MaxGPUs, integers beyond int64, non-finite goals (1/0 is +Inf in HCL).
func TestParse_NumbersBounded(t *testing.T) {
	target := func(goal string) string {
		return job("  target {\n    metric = \"loss\"\n    goal = " + goal + "\n  }\n")
	}
	cases := []struct {
		name, src, where, what string
	}{
		{"gpus beyond MaxGPUs", "training \"a\" {\n  command = \"x\"\n  gpus = 1048577\n}\n", "job.hcl:3:10", "at most 1048576"},
		{"gpus 1e30", "training \"a\" {\n  command = \"x\"\n  gpus = 1e30\n}\n", "job.hcl:3:10", "Invalid gpus"},
		{"max beyond MaxGPUs", "training \"a\" {\n  command = \"x\"\n  gpus {\n    max = 9223372036854775807\n  }\n}\n", "job.hcl:4:5", "at most 1048576"},
		{"per_worker beyond MaxGPUs", "training \"a\" {\n  command = \"x\"\n  gpus {\n    count = 2\n    per_worker = 2000000\n  }\n}\n", "job.hcl:5:5", "at most 1048576"},
		{"priority beyond int64", job("  priority = 9223372036854775808\n"), "job.hcl:4:14", "whole number"},
		{"infinite goal", target("1/0"), "job.hcl:6:5", "finite"},
		{"minus infinite goal", target("-1/0"), "job.hcl:6:5", "finite"},
		{"goal beyond float64", target("1e400"), "job.hcl:6:12", "value must be between"},
		{"zero by zero", target("0/0"), "job.hcl:6:12", "divide zero by zero"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { mustRefuseAt(t, tc.src, tc.where, tc.what) })
	}
}

// mustRefuseAt parses src as job.hcl and checks that it is refused, its
// first error at where (file:line:col) and saying what.
func mustRefuseAt(t *testing.T, src, where, what string) {
	t.Helper()
	spec, diags := Parse([]byte(src), "job.hcl", submitted)
	must.Nil(t, spec)
	first := firstError(diags)
	must.NotNil(t, first)
	must.Eq(t, where, position(first.Subject), must.Sprint(diags.Error()))
	must.StrContains(t, first.Summary+" "+first.Detail, what)
}

// Found while sizing the Gate: 65,000 strings in args (256 KiB) took 72 s
// and 380 MB to decode (go-cty unifies a list's element types in quadratic
// time; 15,000 in 64 KiB take seconds). A literal holds at most 1,000
// items; 1,000 decode in milliseconds.
func TestParse_ItemsBounded(t *testing.T) {
	list := func(n int) string { return "[" + strings.Repeat("\"a\",", n) + "]" }
	start := time.Now()
	spec, diags := Parse([]byte(job("  args = "+list(15_000)+"\n")), "job.hcl", submitted)
	must.Less(t, 5*time.Second, time.Since(start))
	must.Nil(t, spec)
	must.Eq(t, "Too many items", firstError(diags).Summary)
	must.Eq(t, "job.hcl:4:10", position(firstError(diags).Subject))

	obj := "{" + strings.Repeat("k = \"v\"\n", 1001) + "}"
	_, diags = Parse([]byte(job("  env = "+obj+"\n")), "job.hcl", submitted)
	must.Eq(t, "Too many items", firstError(diags).Summary)

	spec, diags = Parse([]byte(job("  args = "+list(1000)+"\n")), "job.hcl", submitted)
	must.False(t, diags.HasErrors(), must.Sprint(diags.Error()))
	must.Len(t, 1000, spec.Args)
}

// The limits the package doc promises are the ones Parse applies.
func TestLimits_Documented(t *testing.T) {
	must.Eq(t, hclsafe.Limits{MaxBytes: 64 << 10, MaxDepth: 32, MaxOperators: 1000, MaxItems: 1000}, Limits())
}
