package hclsafe

import (
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/shoenig/test/must"
)

// fuzzLimits are small, so that the fuzzer reaches them.
var fuzzLimits = Limits{MaxBytes: 4096, MaxDepth: 8, MaxOperators: 16, MaxItems: 8}

// treeDepth is the deepest nesting of nodes under body.
type treeDepth struct{ cur, max int }

func (w *treeDepth) Enter(hclsyntax.Node) hcl.Diagnostics {
	w.cur++
	w.max = max(w.max, w.cur)
	return nil
}

func (w *treeDepth) Exit(hclsyntax.Node) hcl.Diagnostics {
	w.cur--
	return nil
}

// FuzzParseConfig: ParseConfig never panics; every error has a position
// in the file; an accepted file is within the limits, holds no for-
// expression or function call, and its syntax tree is as shallow as the
// limits promise (what keeps the parser and evaluator off deep recursion).
func FuzzParseConfig(f *testing.F) {
	for _, s := range []string{
		"a = 1\nb { c = [\"x\", {d = -2}] }\n",
		"args = [\"${jobspec_dir}/train.py\"]\n",
		"x = \"%{ if true }yes%{ else }no%{ endif }\"\n",
		"x = <<EOT\nhello ${name}\nEOT\n",
		"x = (1 + 2) * 3 > 4 ? -1 : !false\n",
		"x = " + strings.Repeat("[", 12) + strings.Repeat("]", 12) + "\n",
		"x = [for a in [1, 2]: a]\n",
		"x = \"%{ for a in [1] }${a}%{ endfor }\"\n",
		"x = upper(\"a\")\n",
		"x = [1][(0)][(0)]\n",
		"x = a.b[0].*.c[*].d\n",
		"x = " + strings.Repeat("-", 20) + "1\n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		body, diags := ParseConfig([]byte(src), "f.hcl", fuzzLimits)
		if diags.HasErrors() {
			must.Nil(t, body)
			for _, d := range diags {
				if d.Severity == hcl.DiagError {
					must.NotNil(t, d.Subject, must.Sprintf("no position: %s: %s", d.Summary, d.Detail))
					must.Eq(t, "f.hcl", d.Subject.Filename)
					must.Positive(t, d.Subject.Start.Line)
				}
			}
			return
		}
		must.LessEq(t, fuzzLimits.MaxBytes, len(src))
		must.SliceEmpty(t, Check([]byte(src), "f.hcl", fuzzLimits))
		_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
			switch e := n.(type) {
			case *hclsyntax.ForExpr, *hclsyntax.FunctionCallExpr:
				t.Fatalf("accepted a %T", n)
			case *hclsyntax.TupleConsExpr:
				must.LessEq(t, fuzzLimits.MaxItems, len(e.Exprs))
			case *hclsyntax.ObjectConsExpr:
				must.LessEq(t, fuzzLimits.MaxItems, len(e.Items))
			}
			return nil
		})
		w := &treeDepth{}
		_ = hclsyntax.Walk(body, w)
		bound := 4*(fuzzLimits.MaxDepth+fuzzLimits.MaxOperators) + 8
		must.LessEq(t, bound, w.max, must.Sprintf("the tree is %d deep", w.max))
	})
}
