// Package hclsafe parses HCL that users send (jobspecs, the planner's
// config) within bounds. hclsyntax recurses once per level of nesting and
// evaluates for-expressions and function calls, so a small file can exhaust
// the stack (a fatal error, not a panic) or the memory of the process that
// parses it. ParseConfig first scans the bytes with hclsyntax's lexer, which
// is iterative, and refuses a file over the size, nesting or operator
// limits before the parser sees it; then it refuses the expressions that
// loop (for-expressions, %{ for } template directives) and function calls.
// Every refusal is an HCL diagnostic with file:line:col.
package hclsafe

import (
	"fmt"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclsyntax"
)

// Limits bound one file.
type Limits struct {
	// MaxBytes is the largest file accepted.
	MaxBytes int
	// MaxDepth bounds nesting: braces, brackets, parentheses, quoted
	// strings, heredocs and template sequences (${ and %{) inside each other.
	MaxDepth int
	// MaxOperators bounds the operators in the file: unary and binary
	// operators, conditionals (?), and index or splat steps that follow an
	// expression. Each can nest the parsed expression one level deeper
	// without a bracket (a-b-c-..., !!!x, x[(0)][(0)]...).
	MaxOperators int
	// MaxItems bounds the elements of one list or the items of one object
	// literal: converting a literal to a list or map type unifies its
	// element types in time quadratic in their number (go-cty), so 65,000
	// strings in one list took over a minute.
	MaxItems int
}

// Default limits: far above any jobspec or config a person writes (a few
// KiB, nested 3 or 4 deep, with a minus sign or two), far below what hurts
// a parser (hclsyntax overflowed the stack at 300,000 levels).
const (
	DefaultMaxBytes     = 256 << 10
	DefaultMaxDepth     = 32
	DefaultMaxOperators = 1000
	DefaultMaxItems     = 1000
)

// DefaultLimits are the limits of jobspecs and configs.
func DefaultLimits() Limits {
	return Limits{MaxBytes: DefaultMaxBytes, MaxDepth: DefaultMaxDepth, MaxOperators: DefaultMaxOperators, MaxItems: DefaultMaxItems}
}

// ParseConfig checks src against lim, parses it as an HCL config file, and
// refuses for-expressions, template for directives and function calls.
// Nothing is evaluated here.
func ParseConfig(src []byte, filename string, lim Limits) (*hclsyntax.Body, hcl.Diagnostics) {
	if diags := Check(src, filename, lim); diags.HasErrors() {
		return nil, diags
	}
	file, diags := hclsyntax.ParseConfig(src, filename, hcl.InitialPos)
	if diags.HasErrors() {
		return nil, diags
	}
	body, ok := file.Body.(*hclsyntax.Body)
	if !ok {
		// hclsyntax.ParseConfig always returns its own body type.
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Unexpected HCL body",
			Detail: fmt.Sprintf("%s did not parse as native HCL syntax.", filename)})
	}
	diags = append(diags, Restrict(body, lim)...)
	if diags.HasErrors() {
		return nil, diags
	}
	return body, diags
}

// Check scans src, without parsing it, for what lim refuses: more than
// MaxBytes, nesting deeper than MaxDepth, more than MaxOperators operators.
// It reports the first excess, at the place it starts.
func Check(src []byte, filename string, lim Limits) hcl.Diagnostics {
	if len(src) > lim.MaxBytes {
		at := posAt(src, lim.MaxBytes)
		return hcl.Diagnostics{{
			Severity: hcl.DiagError,
			Summary:  "File too large",
			Detail:   fmt.Sprintf("%s has %d bytes; the limit is %d.", filename, len(src), lim.MaxBytes),
			Subject:  &hcl.Range{Filename: filename, Start: at, End: at},
		}}
	}
	// The lexer is a state machine (no recursion); its diagnostics (an
	// invalid character, say) are left to the parser, which words them.
	tokens, _ := hclsyntax.LexConfig(src, filename, hcl.InitialPos)
	depth, directives, operators := 0, 0, 0
	prev := hclsyntax.TokenNil
	for _, tok := range tokens {
		switch tok.Type {
		case hclsyntax.TokenOBrace, hclsyntax.TokenOParen, hclsyntax.TokenOQuote, hclsyntax.TokenOHeredoc,
			hclsyntax.TokenTemplateInterp, hclsyntax.TokenTemplateControl:
			depth++
		case hclsyntax.TokenOBrack:
			depth++
			if endsExpression(prev) {
				operators++ // an index step: x[...]
			}
		case hclsyntax.TokenCBrace, hclsyntax.TokenCBrack, hclsyntax.TokenCParen, hclsyntax.TokenCQuote,
			hclsyntax.TokenCHeredoc, hclsyntax.TokenTemplateSeqEnd:
			depth--
		case hclsyntax.TokenPlus, hclsyntax.TokenMinus, hclsyntax.TokenStar, hclsyntax.TokenSlash,
			hclsyntax.TokenPercent, hclsyntax.TokenEqualOp, hclsyntax.TokenNotEqual, hclsyntax.TokenLessThan,
			hclsyntax.TokenLessThanEq, hclsyntax.TokenGreaterThan, hclsyntax.TokenGreaterThanEq,
			hclsyntax.TokenAnd, hclsyntax.TokenOr, hclsyntax.TokenBang, hclsyntax.TokenQuestion,
			hclsyntax.TokenEllipsis, hclsyntax.TokenFatArrow:
			operators++ // splats count by their "*"
		case hclsyntax.TokenIdent:
			// %{ if } and %{ for } directives nest the template parser
			// until their %{ endif } or %{ endfor }.
			if prev == hclsyntax.TokenTemplateControl {
				switch string(tok.Bytes) {
				case "if", "for":
					directives++
				case "endif", "endfor":
					directives--
				}
			}
		}
		if depth+max(directives, 0) > lim.MaxDepth {
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Nested too deeply",
				Detail:   fmt.Sprintf("Braces, brackets, parentheses, strings and templates nest at most %d deep.", lim.MaxDepth),
				Subject:  tok.Range.Ptr(),
			}}
		}
		if operators > lim.MaxOperators {
			return hcl.Diagnostics{{
				Severity: hcl.DiagError,
				Summary:  "Too many operators",
				Detail:   fmt.Sprintf("A file holds at most %d operators (arithmetic, comparisons, !, ?:, indexes).", lim.MaxOperators),
				Subject:  tok.Range.Ptr(),
			}}
		}
		if depth < 0 {
			depth = 0 // unbalanced: the parser reports it
		}
		if tok.Type != hclsyntax.TokenNewline && tok.Type != hclsyntax.TokenComment {
			prev = tok.Type
		}
	}
	return nil
}

// endsExpression reports whether a token of type t can end an expression,
// so that a "[" after it is an index rather than a tuple.
func endsExpression(t hclsyntax.TokenType) bool {
	switch t {
	case hclsyntax.TokenIdent, hclsyntax.TokenNumberLit, hclsyntax.TokenCBrack, hclsyntax.TokenCBrace,
		hclsyntax.TokenCParen, hclsyntax.TokenCQuote, hclsyntax.TokenCHeredoc:
		return true
	}
	return false
}

// Restrict refuses, anywhere in body, the expressions that may loop or
// call out: for-expressions (including %{ for } template directives) and
// function calls; and list or object literals of more than lim.MaxItems
// items. body must come from a file Check accepted: the walk recurses once
// per level.
func Restrict(body *hclsyntax.Body, lim Limits) hcl.Diagnostics {
	var diags hcl.Diagnostics
	tooMany := func(n int, r hcl.Range) {
		diags = append(diags, &hcl.Diagnostic{
			Severity: hcl.DiagError,
			Summary:  "Too many items",
			Detail:   fmt.Sprintf("This literal has %d items; a list or object holds at most %d.", n, lim.MaxItems),
			Subject:  r.Ptr(),
		})
	}
	_ = hclsyntax.VisitAll(body, func(n hclsyntax.Node) hcl.Diagnostics {
		switch e := n.(type) {
		case *hclsyntax.TupleConsExpr:
			if len(e.Exprs) > lim.MaxItems {
				tooMany(len(e.Exprs), e.OpenRange)
			}
		case *hclsyntax.ObjectConsExpr:
			if len(e.Items) > lim.MaxItems {
				tooMany(len(e.Items), e.OpenRange)
			}
		case *hclsyntax.ForExpr:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "For-expressions are not supported",
				Detail:   "Write the list or map out; a for-expression (or %{ for } directive) is not evaluated here.",
				Subject:  e.OpenRange.Ptr(),
			})
		case *hclsyntax.FunctionCallExpr:
			diags = append(diags, &hcl.Diagnostic{
				Severity: hcl.DiagError,
				Summary:  "Function calls are not supported",
				Detail:   fmt.Sprintf("%s(...): no functions are available here; write the value out.", e.Name),
				Subject:  e.NameRange.Ptr(),
			})
		}
		return nil
	})
	return diags
}

// posAt is the line and column of byte offset off in src.
func posAt(src []byte, off int) hcl.Pos {
	pos := hcl.Pos{Line: 1, Column: 1, Byte: off}
	for _, r := range string(src[:off]) {
		if r == '\n' {
			pos.Line++
			pos.Column = 1
			continue
		}
		pos.Column++
	}
	return pos
}
