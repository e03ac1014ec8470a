package hclspec

import (
	"errors"
	"fmt"
	"slices"

	"github.com/zclconf/go-cty/cty"

	hclspecpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/hclspec"
)

// ErrUnsupportedSpec is returned for schema nodes whose implied type cannot
// be known without evaluating HCL (a Literal that is not a Default's
// fallback), or whose values are dynamic ("any").
var ErrUnsupportedSpec = errors.New("unsupported in a schema to decode")

// ImpliedType is the cty type of the value the agent decodes with spec: the
// type its msgpack payload is encoded against.
func ImpliedType(spec *Spec) (cty.Type, error) {
	ty, err := impliedType(spec)
	if err != nil {
		return cty.NilType, err
	}
	if ty.HasDynamicTypes() {
		return cty.NilType, fmt.Errorf("type %s: %w", ty.FriendlyName(), ErrUnsupportedSpec)
	}
	return ty, nil
}

func impliedType(spec *Spec) (cty.Type, error) {
	switch b := spec.GetBlock().(type) {
	case *hclspecpb.Spec_Object:
		attrs := map[string]cty.Type{}
		for _, name := range slices.Sorted(mapKeys(b.Object.GetAttributes())) {
			ty, err := impliedType(b.Object.GetAttributes()[name])
			if err != nil {
				return cty.NilType, fmt.Errorf("%s: %w", name, err)
			}
			attrs[name] = ty
		}
		return cty.Object(attrs), nil
	case *hclspecpb.Spec_Array:
		elems := make([]cty.Type, 0, len(b.Array.GetValues()))
		for i, v := range b.Array.GetValues() {
			ty, err := impliedType(v)
			if err != nil {
				return cty.NilType, fmt.Errorf("[%d]: %w", i, err)
			}
			elems = append(elems, ty)
		}
		return cty.Tuple(elems), nil
	case *hclspecpb.Spec_Attr:
		return parseType(b.Attr.GetType())
	case *hclspecpb.Spec_BlockValue:
		return nestedType(b.BlockValue.GetNested())
	case *hclspecpb.Spec_BlockAttrs:
		ty, err := parseType(b.BlockAttrs.GetType())
		if err != nil {
			return cty.NilType, err
		}
		return cty.Map(ty), nil
	case *hclspecpb.Spec_BlockList:
		ty, err := nestedType(b.BlockList.GetNested())
		if err != nil {
			return cty.NilType, err
		}
		return cty.List(ty), nil
	case *hclspecpb.Spec_BlockSet:
		ty, err := nestedType(b.BlockSet.GetNested())
		if err != nil {
			return cty.NilType, err
		}
		return cty.Set(ty), nil
	case *hclspecpb.Spec_BlockMap:
		ty, err := nestedType(b.BlockMap.GetNested())
		if err != nil {
			return cty.NilType, err
		}
		if len(b.BlockMap.GetLabels()) == 0 {
			return cty.NilType, errors.New("a block map needs at least one label")
		}
		for range b.BlockMap.GetLabels() {
			ty = cty.Map(ty)
		}
		return ty, nil
	case *hclspecpb.Spec_Default:
		// The fallback is converted to the primary's type.
		return impliedType(b.Default.GetPrimary())
	case *hclspecpb.Spec_Literal:
		return cty.NilType, fmt.Errorf("a literal outside a default: %w", ErrUnsupportedSpec)
	case nil:
		return cty.NilType, errors.New("empty spec")
	default:
		return cty.NilType, fmt.Errorf("spec kind %T: %w", b, ErrUnsupportedSpec)
	}
}

func nestedType(nested *Spec) (cty.Type, error) {
	if nested == nil {
		return cty.NilType, errors.New("a block needs a nested spec")
	}
	return impliedType(nested)
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}
