package config

import (
	"errors"
	"fmt"
	"math/big"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/gohcl"
	"github.com/zclconf/go-cty/cty"

	"github.com/schedulearn/schedulearn/internal/hclsafe"
	"github.com/schedulearn/schedulearn/planner/jobspec"
	"github.com/schedulearn/schedulearn/planner/quota"
)

// Queue is a queue "name" { ... } block: a team's share of the cluster's
// GPUs (see planner/quota and docs/policies.md).
//
//	queue "ml" {                     # a parent: holds queues, not jobs
//	  nominal = 32                   # default: its children's sum
//	}
//	queue "vision" {
//	  parent          = "ml"
//	  nominal         = 16           # GPUs guaranteed; or per model:
//	                                 # { "A100-SXM4-40GB" = 8, "V100" = 8 }
//	  borrowing_limit = 8            # above nominal; default unlimited
//	  lending_limit   = 4            # of its idle nominal; default all
//	  weight          = 2            # borrowers are reclaimed from by share/weight; default 1
//	  deadline_admission = "reject"  # a job that cannot meet its deadline beside the
//	                                 # admitted ones: refused; default "warn" (queued, unadmitted)
//	}
//
// With no queue block, the one queue "default" holds the whole cluster,
// and every job, whatever queue its jobspec names.
type Queue struct {
	Name           string         `hcl:"name,label"`
	Parent         string         `hcl:"parent,optional"`
	Nominal        hcl.Expression `hcl:"nominal,optional"`
	BorrowingLimit hcl.Expression `hcl:"borrowing_limit,optional"`
	LendingLimit   hcl.Expression `hcl:"lending_limit,optional"`
	Weight         *float64       `hcl:"weight,optional"`
	// DeadlineAdmission is quota.Def's ("warn" or "reject").
	DeadlineAdmission *string `hcl:"deadline_admission,optional"`
}

// ParseQueues reads queue blocks alone, as PUT /v1/queues and
// `schedulearn queue apply` send them: the config file's syntax, bounds
// (internal/hclsafe) and checks, with errors at filename:line:col.
// Anything but queue blocks is refused; no block at all is the default
// tree (one queue holding the whole cluster).
func ParseQueues(src []byte, filename string) (*quota.Tree, hcl.Diagnostics) {
	body, diags := hclsafe.ParseConfig(src, filename, hclsafe.DefaultLimits())
	if diags.HasErrors() {
		return nil, diags
	}
	var in struct {
		Queues []*Queue `hcl:"queue,block"`
	}
	diags = append(diags, gohcl.DecodeBody(body, nil, &in)...)
	if diags.HasErrors() {
		return nil, diags
	}
	c := &Config{Queues: in.Queues, File: filename, ranges: map[string]hcl.Range{}}
	collectRanges(body, "", c.ranges)
	diags = append(diags, c.validateQueues()...)
	if diags.HasErrors() {
		return nil, diags
	}
	return c.QueueTree, diags
}

// validateQueues builds the queue tree (QueueTree) from the queue blocks,
// or the default tree when there are none.
func (c *Config) validateQueues() hcl.Diagnostics {
	if len(c.Queues) == 0 {
		c.QueueTree = quota.Default()
		return nil
	}
	var diags hcl.Diagnostics
	defs := make([]quota.Def, 0, len(c.Queues))
	for _, q := range c.Queues {
		if !jobspec.ValidName(q.Name) {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid queue",
				Detail:  fmt.Sprintf("%q: a queue name is %s.", q.Name, jobspec.NameRule),
				Subject: c.queueRange(q.Name, "")})
		}
		d := quota.Def{Name: q.Name, Parent: q.Parent}
		if q.DeadlineAdmission != nil {
			d.DeadlineAdmission = *q.DeadlineAdmission
			if d.DeadlineAdmission == "" {
				// Given as "": refused, not the default.
				diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid queue",
					Detail:  fmt.Sprintf("queue %q: deadline_admission: empty: give %q or %q.", q.Name, quota.AdmissionReject, quota.AdmissionWarn),
					Subject: c.queueRange(q.Name, "deadline_admission")})
			}
		}
		var more hcl.Diagnostics
		d.Nominal, more = decodeAmount(q.Nominal, "nominal")
		diags = append(diags, more...)
		d.BorrowingLimit, more = decodeAmount(q.BorrowingLimit, "borrowing_limit")
		diags = append(diags, more...)
		d.LendingLimit, more = decodeAmount(q.LendingLimit, "lending_limit")
		diags = append(diags, more...)
		if q.Weight != nil {
			d.Weight = *q.Weight
			if d.Weight == 0 {
				d.Weight = -1 // given as 0: refused, not the default
			}
		}
		defs = append(defs, d)
	}
	if diags.HasErrors() {
		return diags
	}
	tree, err := quota.New(defs)
	var errs quota.DefErrors
	if errors.As(err, &errs) {
		for _, e := range errs {
			diags = append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid queue",
				Detail: e.Error() + ".", Subject: c.queueRange(e.Queue, e.Field)})
		}
		return diags
	}
	if err != nil {
		return append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid queues", Detail: err.Error()})
	}
	c.QueueTree = tree
	return diags
}

// queueRange is where a queue's field is (its block when field is "" or
// not set); the last block of that name, so a duplicate points at itself.
func (c *Config) queueRange(name, field string) *hcl.Range {
	var q *Queue
	for _, b := range c.Queues {
		if b.Name == name {
			q = b
		}
	}
	if q == nil {
		return nil
	}
	var block *hcl.Range
	if r, ok := c.ranges["queue."+name]; ok {
		block = r.Ptr()
	}
	var expr hcl.Expression
	switch field {
	case "nominal":
		expr = q.Nominal
	case "borrowing_limit":
		expr = q.BorrowingLimit
	case "lending_limit":
		expr = q.LendingLimit
	case "":
		return block
	default:
		if r, ok := c.ranges["queue."+name+"."+field]; ok {
			return r.Ptr()
		}
		return block
	}
	if _, ok := c.ranges["queue."+name+"."+field]; ok && expr != nil {
		return expr.Range().Ptr()
	}
	return block
}

// decodeAmount reads a quota attribute: a whole number of GPUs, or an
// object of whole numbers by GPU model. Null (left out) is nil.
func decodeAmount(expr hcl.Expression, name string) (quota.Amount, hcl.Diagnostics) {
	if expr == nil {
		return nil, nil
	}
	v, diags := expr.Value(nil)
	if diags.HasErrors() || v.IsNull() {
		return nil, diags
	}
	bad := func(detail string) (quota.Amount, hcl.Diagnostics) {
		return nil, append(diags, &hcl.Diagnostic{Severity: hcl.DiagError, Summary: "Invalid " + name,
			Detail: detail, Subject: expr.Range().Ptr()})
	}
	count := func(x cty.Value, what string) (int, string) {
		if x.IsNull() || !x.IsKnown() || x.Type() != cty.Number {
			return 0, fmt.Sprintf("%s: give a whole number of GPUs", what)
		}
		f := x.AsBigFloat()
		if !f.IsInt() || f.Sign() < 0 || f.Cmp(big.NewFloat(quota.MaxGPUs)) > 0 {
			return 0, fmt.Sprintf("%s is %s: give a whole number of GPUs from 0 to %d", what, f.Text('g', 10), quota.MaxGPUs)
		}
		n, _ := f.Int64()
		return int(n), ""
	}
	switch {
	case v.Type() == cty.Number:
		n, msg := count(v, name)
		if msg != "" {
			return bad(msg + ".")
		}
		return quota.Amount{quota.AnyModel: n}, diags
	case v.Type().IsObjectType() || v.Type().IsMapType():
		out := quota.Amount{}
		for it := v.ElementIterator(); it.Next(); {
			k, x := it.Element()
			model := k.AsString()
			if model == "" || len(model) > 256 {
				return bad(fmt.Sprintf("%q: a GPU model is Nomad's device name, e.g. \"A100-SXM4-40GB\".", model))
			}
			n, msg := count(x, fmt.Sprintf("%s of %q", name, model))
			if msg != "" {
				return bad(msg + ".")
			}
			out[model] = n
		}
		if len(out) == 0 {
			return bad("an empty object: give GPUs per model, e.g. { \"A100-SXM4-40GB\" = 8 }, or a number.")
		}
		return out, diags
	default:
		return bad(fmt.Sprintf("a %s: give a whole number of GPUs, or GPUs per model, e.g. { \"A100-SXM4-40GB\" = 8 }.", v.Type().FriendlyName()))
	}
}
