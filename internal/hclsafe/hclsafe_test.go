package hclsafe

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"

	"github.com/schedulearn/schedulearn/internal/hcldiag"
)

func TestParseConfig_Accepts(t *testing.T) {
	cases := []struct{ name, src string }{
		{"attributes and blocks", "a = 1\nb { c = [\"x\", {d = -2}] }\n"},
		{"interpolation", "args = [\"${jobspec_dir}/train.py\"]\n"},
		{"if directive", "x = \"%{ if true }yes%{ else }no%{ endif }\"\n"},
		{"heredoc", "x = <<EOT\nhello ${name}\nEOT\n"},
		{"arithmetic and a conditional", "x = (1 + 2) * 3 > 4 ? -1 : !false\n"},
		{"nesting at the limit", "x = " + strings.Repeat("[", DefaultMaxDepth) + strings.Repeat("]", DefaultMaxDepth) + "\n"},
		{"brackets in strings do not nest", "x = \"" + strings.Repeat("[{(", 1000) + "\"\n"},
		{"items at the limit", "x = [" + strings.Repeat("1,", DefaultMaxItems) + "]\n"},
		{"operators at the limit", "x = 1" + strings.Repeat("+1", DefaultMaxOperators) + "\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, diags := ParseConfig([]byte(tc.src), "f.hcl", DefaultLimits())
			must.False(t, diags.HasErrors(), must.Sprint(hcldiag.Format(diags)))
			must.NotNil(t, body)
		})
	}
}

func TestParseConfig_Refuses(t *testing.T) {
	deep := func(n int, open, close string) string {
		return "x = " + strings.Repeat(open, n) + "1" + strings.Repeat(close, n) + "\n"
	}
	cases := []struct {
		name    string
		src     string
		summary string
		line    int
		column  int
	}{
		// Issue #13 row 3: 300,000 brackets deep overflowed the stack.
		{"brackets 300,000 deep", deep(300_000, "[", "]"), "File too large", 1, DefaultMaxBytes + 1},
		{"brackets 120,000 deep", deep(120_000, "[", "]"), "Nested too deeply", 1, 5 + DefaultMaxDepth},
		{"braces one too deep", "x = " + strings.Repeat("{a=", DefaultMaxDepth+1) + "1" + strings.Repeat("}", DefaultMaxDepth+1), "Nested too deeply", 1, 5 + 3*DefaultMaxDepth},
		{"parentheses", deep(100_000, "(", ")"), "Nested too deeply", 1, 5 + DefaultMaxDepth},
		{"templates in templates", deep(50_000, "\"${", "}\""), "Nested too deeply", 1, 5 + 3*(DefaultMaxDepth/2)},
		{"if directives", "x = \"" + strings.Repeat("%{if true}", 10_000) + strings.Repeat("%{endif}", 10_000) + "\"\n", "Nested too deeply", 1, 0},
		{"unary minus chain", "x = " + strings.Repeat("-", 200_000) + "1\n", "Too many operators", 1, 5 + DefaultMaxOperators},
		{"negation chain", "x = " + strings.Repeat("!", 2000) + "true\n", "Too many operators", 1, 5 + DefaultMaxOperators},
		{"conditional chain", "x = " + strings.Repeat("true ? 1 : ", 2000) + "1\n", "Too many operators", 1, 0},
		{"binary chain", "x = 1" + strings.Repeat("+1", 100_000) + "\n", "Too many operators", 1, 0},
		{"index chain", "x = [1]" + strings.Repeat("[(0)]", 50_000) + "\n", "Too many operators", 1, 0},
		{"too large", "x = \"" + strings.Repeat("a", DefaultMaxBytes) + "\"\n", "File too large", 1, DefaultMaxBytes + 1},
		{"too large, line 3", "a = 1\nb = 2\nc = \"" + strings.Repeat("a", DefaultMaxBytes) + "\"\n", "File too large", 3, DefaultMaxBytes - 12 + 1},
		// Issue #13 row 4: seven nested for-expressions took 33 s and 1 GB.
		{"for-expression", "x = [for a in [1, 2]: a]\n", "For-expressions are not supported", 1, 5},
		{"for in an object", "x = {\n  k = {for a in [1]: a => a}\n}\n", "For-expressions are not supported", 2, 7},
		{"for directive", "x = \"%{ for a in [1, 2] }${a}%{ endfor }\"\n", "For-expressions are not supported", 1, 6},
		{"function call", "x = upper(\"a\")\n", "Function calls are not supported", 1, 5},
		{"namespaced function", "x = core::upper(\"a\")\n", "Function calls are not supported", 1, 5},
		{"syntax error", "x = [1,\n", "", 2, 0},
		{"a long list", "x = [" + strings.Repeat("1,", DefaultMaxItems+1) + "]\n", "Too many items", 1, 5},
		{"a large object", "x = {\n" + strings.Repeat("a = 1\n", DefaultMaxItems+1) + "}\n", "Too many items", 1, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body, diags := ParseConfig([]byte(tc.src), "f.hcl", DefaultLimits())
			must.Nil(t, body)
			must.True(t, diags.HasErrors())
			d := diags[0]
			if tc.summary != "" {
				must.Eq(t, tc.summary, d.Summary, must.Sprint(hcldiag.Format(diags)))
			}
			must.NotNil(t, d.Subject, must.Sprint("a diagnostic without a position: ", hcldiag.Line(d)))
			must.Eq(t, "f.hcl", d.Subject.Filename)
			must.Eq(t, tc.line, d.Subject.Start.Line, must.Sprint(hcldiag.Line(d)))
			if tc.column != 0 {
				must.Eq(t, tc.column, d.Subject.Start.Column, must.Sprint(hcldiag.Line(d)))
			}
		})
	}
}

func TestCheck_Limits(t *testing.T) {
	lim := Limits{MaxBytes: 12, MaxDepth: 2, MaxOperators: 1, MaxItems: 2}
	must.SliceEmpty(t, Check([]byte("x = [[1]]"), "f", lim))
	for src, summary := range map[string]string{
		"x = [[[1]]]":       "Nested too deeply",
		"x = 1+1+1":         "Too many operators",
		"x = \"abcdefghi\"": "File too large",
	} {
		diags := Check([]byte(src), "f", lim)
		must.Len(t, 1, diags)
		must.Eq(t, summary, diags[0].Summary)
		must.Eq(t, hcl.DiagError, diags[0].Severity)
	}
}
