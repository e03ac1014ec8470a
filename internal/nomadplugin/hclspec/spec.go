// Package hclspec builds the config schema a plugin returns from
// ConfigSchema, and decodes the config the agent then sends to SetConfig.
//
// The agent turns the schema into an hcldec spec, decodes the plugin's
// config { ... } block with it (unknown keys and wrong types are the
// agent's errors, defaults are applied there) and sends the value as cty
// msgpack. Decode reads that payload against the schema's implied type, so
// a plugin never parses HCL itself and never links an HCL parser.
package hclspec

import (
	hclspecpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/hclspec"
)

// Spec is one node of a schema, as sent on the wire.
type Spec = hclspecpb.Spec

// NewObject is an object with one property per entry; an Attr or Block
// entry without a name takes the entry's key.
func NewObject(attrs map[string]*Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_Object{Object: &hclspecpb.Object{Attributes: attrs}}}
}

// NewArray is a tuple with one element per spec.
func NewArray(values ...*Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_Array{Array: &hclspecpb.Array{Values: values}}}
}

// NewAttr is the attribute name of type typ, an HCL type expression such as
// "string", "number", "bool", "list(string)" or "map(number)".
func NewAttr(name, typ string, required bool) *Spec {
	return &Spec{Block: &hclspecpb.Spec_Attr{Attr: &hclspecpb.Attr{Name: name, Type: typ, Required: required}}}
}

// NewBlock is at most one block name (exactly one when required), decoded
// with nested.
func NewBlock(name string, required bool, nested *Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_BlockValue{BlockValue: &hclspecpb.Block{Name: name, Required: required, Nested: nested}}}
}

// NewBlockAttrs is a block whose attributes, all of type elemType, form a
// map.
func NewBlockAttrs(name, elemType string, required bool) *Spec {
	return &Spec{Block: &hclspecpb.Spec_BlockAttrs{BlockAttrs: &hclspecpb.BlockAttrs{Name: name, Type: elemType, Required: required}}}
}

// NewBlockList is zero or more blocks name, each decoded with nested.
func NewBlockList(name string, nested *Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_BlockList{BlockList: &hclspecpb.BlockList{Name: name, Nested: nested}}}
}

// NewBlockSet is NewBlockList without order or duplicates.
func NewBlockSet(name string, nested *Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_BlockSet{BlockSet: &hclspecpb.BlockSet{Name: name, Nested: nested}}}
}

// NewBlockMap is labelled blocks name, one map level per label.
func NewBlockMap(name string, labels []string, nested *Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_BlockMap{BlockMap: &hclspecpb.BlockMap{Name: name, Labels: labels, Nested: nested}}}
}

// NewDefault is primary's value, or def's where primary is null (absent).
func NewDefault(primary, def *Spec) *Spec {
	return &Spec{Block: &hclspecpb.Spec_Default{Default: &hclspecpb.Default{Primary: primary, Default: def}}}
}

// NewLiteral is a constant written as an HCL expression: `"1m"`, `8`,
// `true`, `[]`. The agent evaluates it; use it as a Default's fallback.
func NewLiteral(expr string) *Spec {
	return &Spec{Block: &hclspecpb.Spec_Literal{Literal: &hclspecpb.Literal{Value: expr}}}
}
