// Package hcldiag renders HCL diagnostics the way the project's CLIs print
// them: one line each, "file:line:col: severity: summary: detail".
package hcldiag

import (
	"fmt"
	"strings"

	"github.com/hashicorp/hcl/v2"
)

// Format renders diags, one per line.
func Format(diags hcl.Diagnostics) string {
	var b strings.Builder
	for i, d := range diags {
		if i > 0 {
			b.WriteByte('\n')
		}
		b.WriteString(Line(d))
	}
	return b.String()
}

// Line renders one diagnostic.
func Line(d *hcl.Diagnostic) string {
	severity := "error"
	if d.Severity == hcl.DiagWarning {
		severity = "warning"
	}
	var where string
	if d.Subject != nil {
		where = fmt.Sprintf("%s:%d:%d: ", d.Subject.Filename, d.Subject.Start.Line, d.Subject.Start.Column)
	}
	msg := where + severity + ": " + d.Summary
	if d.Detail != "" {
		msg += ": " + d.Detail
	}
	return msg
}

// Error is an error holding diagnostics, printed with Format.
type Error struct{ Diags hcl.Diagnostics }

func (e *Error) Error() string { return Format(e.Diags) }
