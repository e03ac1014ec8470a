// Package plugintest is the agent's side of Nomad's plugin protocol, for
// tests: it encodes a config block (a plugin's or a task's) the way the
// agent does, drives a plugin (device or driver) through go-plugin, either
// served in process or launched as a binary with the agent's handshake,
// lays out a task's alloc dir and runs interactive execs.
package plugintest

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/ext/typeexpr"
	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	hcljson "github.com/hashicorp/hcl/v2/json"
	"github.com/zclconf/go-cty/cty"
	ctyjson "github.com/zclconf/go-cty/cty/json"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
	"google.golang.org/protobuf/proto"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	hclspecpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/hclspec"
)

// EncodeConfig turns the body of a plugin's config { ... } block into the
// payload the agent sends SetConfig: the body decoded with the plugin's
// schema (defaults applied; unknown keys and values of the wrong type are
// errors, as in the agent), then cty msgpack of the value with its own
// type. The agent reads its config file as HCL1 and decodes its JSON form;
// for the values plugins take the result is the same.
func EncodeConfig(spec *hclspec.Spec, body string) ([]byte, error) {
	dec, err := HCLDecSpec(spec)
	if err != nil {
		return nil, err
	}
	file, diags := hclsyntax.ParseConfig([]byte(body), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed to parse config: %w", diags)
	}
	return decode(file.Body, dec)
}

// MustEncodeConfig is EncodeConfig, failing t when the body does not
// encode.
func MustEncodeConfig(t testing.TB, spec *hclspec.Spec, body string) []byte {
	t.Helper()
	payload, err := EncodeConfig(spec, body)
	if err != nil {
		t.Fatalf("failed to encode the config %q: %v", body, err)
	}
	return payload
}

// decode decodes body with dec as the agent does, and encodes the value
// as the agent sends it.
func decode(body hcl.Body, dec hcldec.Spec) ([]byte, error) {
	val, diags := hcldec.Decode(body, dec, nil)
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed to decode config: %w", diags)
	}
	payload, err := ctymsgpack.Marshal(val, val.Type())
	if err != nil {
		return nil, fmt.Errorf("failed to encode config: %w", err)
	}
	return payload, nil
}

// HCLDecSpec converts a schema as the agent does: an Object's entries name
// their Attr and Block children, type expressions and literals are HCL.
func HCLDecSpec(spec *hclspec.Spec) (hcldec.Spec, error) { return toHCLDec(spec, "") }

func toHCLDec(spec *hclspec.Spec, name string) (hcldec.Spec, error) {
	pick := func(own string) string {
		if own != "" {
			return own
		}
		return name
	}
	switch b := spec.GetBlock().(type) {
	case *hclspecpb.Spec_Object:
		out := hcldec.ObjectSpec{}
		for k, v := range b.Object.GetAttributes() {
			s, err := toHCLDec(v, k)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", k, err)
			}
			out[k] = s
		}
		return out, nil
	case *hclspecpb.Spec_Array:
		out := hcldec.TupleSpec{}
		for _, v := range b.Array.GetValues() {
			s, err := toHCLDec(v, "")
			if err != nil {
				return nil, err
			}
			out = append(out, s)
		}
		return out, nil
	case *hclspecpb.Spec_Attr:
		ty, err := typeOf(b.Attr.GetType())
		if err != nil {
			return nil, err
		}
		n := pick(b.Attr.GetName())
		if n == "" {
			return nil, errors.New("attribute spec without a name")
		}
		return &hcldec.AttrSpec{Name: n, Type: ty, Required: b.Attr.GetRequired()}, nil
	case *hclspecpb.Spec_BlockValue:
		nested, err := toHCLDec(b.BlockValue.GetNested(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockSpec{TypeName: pick(b.BlockValue.GetName()), Required: b.BlockValue.GetRequired(), Nested: nested}, nil
	case *hclspecpb.Spec_BlockAttrs:
		ty, err := typeOf(b.BlockAttrs.GetType())
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockAttrsSpec{TypeName: pick(b.BlockAttrs.GetName()), ElementType: ty, Required: b.BlockAttrs.GetRequired()}, nil
	case *hclspecpb.Spec_BlockList:
		nested, err := toHCLDec(b.BlockList.GetNested(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockListSpec{TypeName: pick(b.BlockList.GetName()), Nested: nested,
			MinItems: int(b.BlockList.GetMinItems()), MaxItems: int(b.BlockList.GetMaxItems())}, nil
	case *hclspecpb.Spec_BlockSet:
		nested, err := toHCLDec(b.BlockSet.GetNested(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockSetSpec{TypeName: pick(b.BlockSet.GetName()), Nested: nested,
			MinItems: int(b.BlockSet.GetMinItems()), MaxItems: int(b.BlockSet.GetMaxItems())}, nil
	case *hclspecpb.Spec_BlockMap:
		nested, err := toHCLDec(b.BlockMap.GetNested(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.BlockMapSpec{TypeName: pick(b.BlockMap.GetName()), LabelNames: b.BlockMap.GetLabels(), Nested: nested}, nil
	case *hclspecpb.Spec_Default:
		primary, err := toHCLDec(b.Default.GetPrimary(), "")
		if err != nil {
			return nil, err
		}
		def, err := toHCLDec(b.Default.GetDefault(), "")
		if err != nil {
			return nil, err
		}
		return &hcldec.DefaultSpec{Primary: primary, Default: def}, nil
	case *hclspecpb.Spec_Literal:
		expr, diags := hclsyntax.ParseExpression([]byte(b.Literal.GetValue()), "literal", hcl.InitialPos)
		if diags.HasErrors() {
			return nil, fmt.Errorf("literal %q: %w", b.Literal.GetValue(), diags)
		}
		val, diags := expr.Value(nil)
		if diags.HasErrors() {
			return nil, fmt.Errorf("literal %q: %w", b.Literal.GetValue(), diags)
		}
		return &hcldec.LiteralSpec{Value: val}, nil
	}
	return nil, fmt.Errorf("spec kind %T is not convertible", spec.GetBlock())
}

func typeOf(expr string) (ty cty.Type, err error) {
	e, diags := hclsyntax.ParseExpression([]byte(expr), "type", hcl.InitialPos)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("type %q: %w", expr, diags)
	}
	ty, diags = typeexpr.TypeConstraint(e)
	if diags.HasErrors() {
		return cty.NilType, fmt.Errorf("type %q: %w", expr, diags)
	}
	return ty, nil
}

// WithKey returns a copy of spec where the key at path (a block's keys
// after the block's name) is s, or is removed when s is nil: a schema
// with a key the plugin lacks, or of another type, to encode configs the
// agent would refuse for the plugin's own schema (as a newer or older
// plugin's could be sent).
func WithKey(spec *hclspec.Spec, s *hclspec.Spec, path ...string) *hclspec.Spec {
	out := proto.Clone(spec).(*hclspec.Spec)
	obj := out.GetObject()
	for _, block := range path[:len(path)-1] {
		obj = obj.GetAttributes()[block].GetBlockValue().GetNested().GetObject()
	}
	if s == nil {
		delete(obj.GetAttributes(), path[len(path)-1])
	} else {
		obj.GetAttributes()[path[len(path)-1]] = s
	}
	return out
}

// EncodeTaskConfig turns the body of a task's config { ... } block in a
// job into the payload the agent sends StartTask, along the agent's path:
// the job parser turns the block into plain data (attributes evaluated,
// here with vars, the task's environment the agent interpolates; blocks
// as lists of objects), the agent decodes its JSON form with the driver's
// task schema. So `env = { K = "v" }` fits a block-of-attributes key, as
// it does in a job, where EncodeConfig (HCL's native syntax) wants
// `env { K = "v" }`.
func EncodeTaskConfig(spec *hclspec.Spec, body string, vars map[string]cty.Value) ([]byte, error) {
	dec, err := HCLDecSpec(spec)
	if err != nil {
		return nil, err
	}
	file, diags := hclsyntax.ParseConfig([]byte(body), "config.hcl", hcl.InitialPos)
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed to parse config: %w", diags)
	}
	data, err := bodyData(file.Body.(*hclsyntax.Body), &hcl.EvalContext{Variables: vars})
	if err != nil {
		return nil, fmt.Errorf("failed to parse config: %w", err)
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, err
	}
	jsonFile, diags := hcljson.Parse(raw, "config.json")
	if diags.HasErrors() {
		return nil, fmt.Errorf("failed to parse config: %w", diags)
	}
	return decode(jsonFile.Body, dec)
}

// bodyData is a body as plain data: attribute values as JSON, blocks as
// lists of objects under their type (and labels, nested).
func bodyData(body *hclsyntax.Body, ctx *hcl.EvalContext) (map[string]any, error) {
	out := map[string]any{}
	for name, attr := range body.Attributes {
		v, diags := attr.Expr.Value(ctx)
		if diags.HasErrors() {
			return nil, diags
		}
		b, err := ctyjson.Marshal(v, v.Type())
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		out[name] = json.RawMessage(b)
	}
	for _, block := range body.Blocks {
		inner, err := bodyData(block.Body, ctx)
		if err != nil {
			return nil, err
		}
		var v any = inner
		for i := len(block.Labels) - 1; i >= 0; i-- {
			v = map[string]any{block.Labels[i]: v}
		}
		list, _ := out[block.Type].([]any)
		out[block.Type] = append(list, v)
	}
	return out, nil
}
