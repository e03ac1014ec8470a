package hcldiag

import (
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/shoenig/test/must"
)

func TestFormat(t *testing.T) {
	diags := hcl.Diagnostics{
		{Severity: hcl.DiagError, Summary: "Missing command", Detail: "Say what to run.",
			Subject: &hcl.Range{Filename: "job.hcl", Start: hcl.Pos{Line: 3, Column: 5}}},
		{Severity: hcl.DiagWarning, Summary: "Deadline in the past"},
	}
	must.Eq(t, "job.hcl:3:5: error: Missing command: Say what to run.\nwarning: Deadline in the past", Format(diags))
	must.EqError(t, &Error{Diags: diags[:1]}, "job.hcl:3:5: error: Missing command: Say what to run.")
}
