package hclspec_test

import (
	"errors"
	"testing"

	"github.com/hashicorp/hcl/v2/hcldec"
	"github.com/shoenig/test/must"
	"github.com/zclconf/go-cty/cty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"

	"github.com/schedulearn/schedulearn/internal/nomadplugin/hclspec"
	"github.com/schedulearn/schedulearn/internal/nomadplugin/plugintest"
)

// schema is shaped like the device plugin's: defaults, a list, an optional
// block with its own defaults.
var schema = hclspec.NewObject(map[string]*hclspec.Spec{
	"name":  hclspec.NewDefault(hclspec.NewAttr("name", "string", false), hclspec.NewLiteral(`"x"`)),
	"count": hclspec.NewDefault(hclspec.NewAttr("count", "number", false), hclspec.NewLiteral(`2`)),
	"on":    hclspec.NewDefault(hclspec.NewAttr("on", "bool", false), hclspec.NewLiteral(`true`)),
	"ids":   hclspec.NewDefault(hclspec.NewAttr("ids", "list(string)", false), hclspec.NewLiteral(`[]`)),
	"tags":  hclspec.NewAttr("tags", "map(string)", false),
	"inner": hclspec.NewBlock("inner", false, hclspec.NewObject(map[string]*hclspec.Spec{
		"size": hclspec.NewDefault(hclspec.NewAttr("size", "number", false), hclspec.NewLiteral(`4`)),
		"nums": hclspec.NewAttr("nums", "list(number)", false),
	})),
})

type inner struct {
	Size int   `cty:"size"`
	Nums []int `cty:"nums"`
}

type config struct {
	Name  string            `cty:"name"`
	Count int               `cty:"count"`
	On    bool              `cty:"on"`
	IDs   []string          `cty:"ids"`
	Tags  map[string]string `cty:"tags"`
	Inner *inner            `cty:"inner"`
}

func TestDecode_WhatTheAgentSends(t *testing.T) {
	cases := []struct {
		name string
		body string
		want config
	}{
		{"empty body: defaults", ``, config{Name: "x", Count: 2, On: true, IDs: []string{}}},
		{"values", "name = \"y\"\ncount = 7\non = false\nids = [\"a\", \"b\"]\ntags = { k = \"v\" }",
			config{Name: "y", Count: 7, IDs: []string{"a", "b"}, Tags: map[string]string{"k": "v"}}},
		{"a number as a string is converted by the agent", `count = "3"`,
			config{Name: "x", Count: 3, On: true, IDs: []string{}}},
		{"block with defaults", "inner {\n}", config{Name: "x", Count: 2, On: true, IDs: []string{}, Inner: &inner{Size: 4}}},
		{"block with values", "inner {\nsize = 1\nnums = [1, 2]\n}",
			config{Name: "x", Count: 2, On: true, IDs: []string{}, Inner: &inner{Size: 1, Nums: []int{1, 2}}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			payload, err := plugintest.EncodeConfig(schema, tc.body)
			must.NoError(t, err)
			var got config
			must.NoError(t, hclspec.Decode(schema, payload, &got))
			must.Eq(t, tc.want, got)
		})
	}
}

// encode marshals a value the way the agent does, but of any shape.
func encode(t *testing.T, v cty.Value) []byte {
	t.Helper()
	b, err := ctymsgpack.Marshal(v, v.Type())
	must.NoError(t, err)
	return b
}

func TestDecode_BadPayloads(t *testing.T) {
	good := map[string]cty.Value{
		"name": cty.StringVal("x"), "count": cty.NumberIntVal(2), "on": cty.True,
		"ids": cty.ListValEmpty(cty.String), "tags": cty.NullVal(cty.Map(cty.String)),
		"inner": cty.NullVal(cty.Object(map[string]cty.Type{"size": cty.Number, "nums": cty.List(cty.Number)})),
	}
	with := func(k string, v cty.Value) []byte {
		m := map[string]cty.Value{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == cty.NilVal {
			delete(m, k)
		} else {
			m[k] = v
		}
		return encode(t, cty.ObjectVal(m))
	}
	cases := []struct {
		name    string
		payload []byte
		key     string
		reason  string
	}{
		{"unknown key", with("colour", cty.StringVal("red")), "", `unknown key "colour"`},
		{"missing key", with("count", cty.NilVal), "", `key "count" is missing`},
		{"string for a number", with("count", cty.StringVal("many")), "count", "a number is required, got a string"},
		{"number for a bool", with("on", cty.NumberIntVal(1)), "on", "a bool is required"},
		{"list element of the wrong type", with("ids", cty.TupleVal([]cty.Value{cty.True})), "ids.0", "a string is required"},
		{"not a whole number", with("count", cty.NumberFloatVal(1.5)), "count", "whole number"},
		{"unknown key in a block", with("inner", cty.ObjectVal(map[string]cty.Value{
			"size": cty.NumberIntVal(1), "nums": cty.NullVal(cty.List(cty.Number)), "extra": cty.True})), "inner", `unknown key "extra"`},
		{"not an object", encode(t, cty.StringVal("x")), "", "a block or object is required"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var got config
			err := hclspec.Decode(schema, tc.payload, &got)
			must.ErrorIs(t, err, hclspec.ErrConfig)
			var ke *hclspec.KeyError
			must.True(t, errors.As(err, &ke), must.Sprintf("%T: %v", err, err))
			must.Eq(t, tc.key, ke.Key)
			must.StrContains(t, err.Error(), tc.reason)
		})
	}
	t.Run("not msgpack", func(t *testing.T) {
		var got config
		must.ErrorIs(t, hclspec.Decode(schema, []byte{0xc1}, &got), hclspec.ErrConfig)
	})
}

// An optional attribute without a default that the config leaves out comes
// as null: a pointer is nil, a string, number or bool its zero value (as
// Nomad's SDK decoded it), where Go can hold no null; a block left out is
// an error where its field is no pointer.
func TestDecode_Nulls(t *testing.T) {
	spec := hclspec.NewObject(map[string]*hclspec.Spec{
		"s": hclspec.NewAttr("s", "string", false),
		"n": hclspec.NewAttr("n", "number", false),
		"b": hclspec.NewAttr("b", "bool", false),
		"p": hclspec.NewAttr("p", "number", false),
		"l": hclspec.NewAttr("l", "list(string)", false),
		"m": hclspec.NewAttr("m", "map(string)", false),
		"blk": hclspec.NewBlock("blk", false, hclspec.NewObject(map[string]*hclspec.Spec{
			"s": hclspec.NewAttr("s", "string", false),
		})),
		"set": hclspec.NewBlock("set", false, hclspec.NewObject(map[string]*hclspec.Spec{
			"n": hclspec.NewAttr("n", "number", false),
			"l": hclspec.NewAttr("l", "list(number)", false),
		})),
	})
	type blk struct {
		S string `cty:"s"`
	}
	type set struct {
		N int   `cty:"n"`
		L []int `cty:"l"`
	}
	type target struct {
		S   string            `cty:"s"`
		N   int               `cty:"n"`
		B   bool              `cty:"b"`
		P   *int              `cty:"p"`
		L   []string          `cty:"l"`
		M   map[string]string `cty:"m"`
		Blk *blk              `cty:"blk"`
		Set set               `cty:"set"`
	}
	payload, err := plugintest.EncodeConfig(spec, "set {\n}")
	must.NoError(t, err)
	var got target
	must.NoError(t, hclspec.Decode(spec, payload, &got))
	must.Eq(t, target{}, got)

	payload, err = plugintest.EncodeConfig(spec, "s = \"x\"\nn = 2\nb = true\np = 3\nl = [\"a\"]\nblk {\ns = \"y\"\n}\nset {\nn = 4\nl = [5]\n}")
	must.NoError(t, err)
	got = target{}
	must.NoError(t, hclspec.Decode(spec, payload, &got))
	three := 3
	must.Eq(t, target{S: "x", N: 2, B: true, P: &three, L: []string{"a"}, Blk: &blk{S: "y"}, Set: set{N: 4, L: []int{5}}}, got)

	payload, err = plugintest.EncodeConfig(spec, "")
	must.NoError(t, err)
	err = hclspec.Decode(spec, payload, &got)
	must.ErrorIs(t, err, hclspec.ErrConfig)
	must.ErrorContains(t, err, "set: ")
	must.ErrorContains(t, err, "null")
}

func TestEncodeConfig_AgentErrors(t *testing.T) {
	cases := []struct{ name, body, want string }{
		{"unknown key", `colour = "red"`, "Unsupported argument"},
		{"wrong type", `count = "many"`, "number is required"},
		{"block twice", "inner {\n}\ninner {\n}", "Duplicate inner block"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := plugintest.EncodeConfig(schema, tc.body)
			must.ErrorContains(t, err, tc.want)
		})
	}
}

func TestImpliedType_MatchesHCLDec(t *testing.T) {
	specs := map[string]*hclspec.Spec{
		"schema": schema,
		"array":  hclspec.NewArray(hclspec.NewAttr("a", "string", true), hclspec.NewAttr("b", "set(number)", false)),
		"block list": hclspec.NewObject(map[string]*hclspec.Spec{
			"l": hclspec.NewBlockList("l", hclspec.NewObject(map[string]*hclspec.Spec{"x": hclspec.NewAttr("", "string", false)})),
			"s": hclspec.NewBlockSet("s", hclspec.NewObject(map[string]*hclspec.Spec{"y": hclspec.NewAttr("", "bool", false)})),
			"m": hclspec.NewBlockMap("m", []string{"a", "b"}, hclspec.NewObject(map[string]*hclspec.Spec{"z": hclspec.NewAttr("", "number", false)})),
			"e": hclspec.NewBlockAttrs("e", "string", false),
		}),
		"nested types": hclspec.NewAttr("t", "object({a = list(map(string)), b = tuple([bool, number])})", false),
	}
	for name, s := range specs {
		t.Run(name, func(t *testing.T) {
			got, err := hclspec.ImpliedType(s)
			must.NoError(t, err)
			dec, err := plugintest.HCLDecSpec(s)
			must.NoError(t, err)
			want := hcldec.ImpliedType(dec)
			must.True(t, want.Equals(got), must.Sprintf("want %#v, got %#v", want, got))
		})
	}
}

func TestImpliedType_Errors(t *testing.T) {
	cases := []struct {
		name string
		spec *hclspec.Spec
		want string
	}{
		{"bad type", hclspec.NewAttr("a", "list(", false), "invalid type expression"},
		{"unknown type", hclspec.NewAttr("a", "strin", false), `unknown type "strin"`},
		{"trailing text", hclspec.NewAttr("a", "string x", false), "unexpected"},
		{"dynamic", hclspec.NewAttr("a", "any", false), "unsupported"},
		{"bare literal", hclspec.NewLiteral(`1`), "literal"},
		{"empty", &hclspec.Spec{}, "empty spec"},
		{"block without nested", hclspec.NewBlock("b", false, nil), "nested spec"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := hclspec.ImpliedType(tc.spec)
			must.ErrorContains(t, err, tc.want)
		})
	}
}
