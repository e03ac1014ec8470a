package shared

import (
	"google.golang.org/protobuf/types/known/wrapperspb"

	sharedpb "github.com/schedulearn/schedulearn/internal/nomadplugin/proto/shared"
)

// AttributeToProto converts an attribute for the wire; nil stays nil.
func AttributeToProto(a *Attribute) *sharedpb.Attribute {
	if a == nil {
		return nil
	}
	out := &sharedpb.Attribute{Unit: a.Unit}
	switch {
	case a.Int != nil:
		out.Value = &sharedpb.Attribute_IntVal{IntVal: *a.Int}
	case a.Float != nil:
		out.Value = &sharedpb.Attribute_FloatVal{FloatVal: *a.Float}
	case a.String != nil:
		out.Value = &sharedpb.Attribute_StringVal{StringVal: *a.String}
	case a.Bool != nil:
		out.Value = &sharedpb.Attribute_BoolVal{BoolVal: *a.Bool}
	}
	return out
}

// AttributeFromProto converts an attribute from the wire; nil stays nil.
func AttributeFromProto(a *sharedpb.Attribute) *Attribute {
	if a == nil {
		return nil
	}
	out := &Attribute{Unit: a.GetUnit()}
	switch v := a.GetValue().(type) {
	case *sharedpb.Attribute_IntVal:
		out.Int = &v.IntVal
	case *sharedpb.Attribute_FloatVal:
		out.Float = &v.FloatVal
	case *sharedpb.Attribute_StringVal:
		out.String = &v.StringVal
	case *sharedpb.Attribute_BoolVal:
		out.Bool = &v.BoolVal
	}
	return out
}

// AttributesToProto converts a map of attributes; nil stays nil.
func AttributesToProto(in map[string]*Attribute) map[string]*sharedpb.Attribute {
	return convertMap(in, AttributeToProto)
}

// AttributesFromProto converts a map of attributes; nil stays nil.
func AttributesFromProto(in map[string]*sharedpb.Attribute) map[string]*Attribute {
	return convertMap(in, AttributeFromProto)
}

// StatObjectToProto converts a statistics tree; nil stays nil.
func StatObjectToProto(o *StatObject) *sharedpb.StatObject {
	if o == nil {
		return nil
	}
	return &sharedpb.StatObject{
		Nested:     convertMap(o.Nested, StatObjectToProto),
		Attributes: convertMap(o.Attributes, StatValueToProto),
	}
}

// StatObjectFromProto converts a statistics tree; nil stays nil.
func StatObjectFromProto(o *sharedpb.StatObject) *StatObject {
	if o == nil {
		return nil
	}
	return &StatObject{
		Nested:     convertMap(o.GetNested(), StatObjectFromProto),
		Attributes: convertMap(o.GetAttributes(), StatValueFromProto),
	}
}

// StatValueToProto converts one statistic; nil stays nil.
func StatValueToProto(v *StatValue) *sharedpb.StatValue {
	if v == nil {
		return nil
	}
	return &sharedpb.StatValue{
		FloatNumeratorVal:   wrap(v.FloatNumeratorVal, wrapperspb.Double),
		FloatDenominatorVal: wrap(v.FloatDenominatorVal, wrapperspb.Double),
		IntNumeratorVal:     wrap(v.IntNumeratorVal, wrapperspb.Int64),
		IntDenominatorVal:   wrap(v.IntDenominatorVal, wrapperspb.Int64),
		StringVal:           wrap(v.StringVal, wrapperspb.String),
		BoolVal:             wrap(v.BoolVal, wrapperspb.Bool),
		Unit:                v.Unit,
		Desc:                v.Desc,
	}
}

// StatValueFromProto converts one statistic; nil stays nil.
func StatValueFromProto(v *sharedpb.StatValue) *StatValue {
	if v == nil {
		return nil
	}
	return &StatValue{
		FloatNumeratorVal:   unwrap(v.GetFloatNumeratorVal()),
		FloatDenominatorVal: unwrap(v.GetFloatDenominatorVal()),
		IntNumeratorVal:     unwrap(v.GetIntNumeratorVal()),
		IntDenominatorVal:   unwrap(v.GetIntDenominatorVal()),
		StringVal:           unwrap(v.GetStringVal()),
		BoolVal:             unwrap(v.GetBoolVal()),
		Unit:                v.GetUnit(),
		Desc:                v.GetDesc(),
	}
}

func convertMap[K comparable, A, B any](in map[K]A, f func(A) B) map[K]B {
	if in == nil {
		return nil
	}
	out := make(map[K]B, len(in))
	for k, v := range in {
		out[k] = f(v)
	}
	return out
}

func wrap[T any, W any](v *T, f func(T) W) W {
	if v == nil {
		var zero W
		return zero
	}
	return f(*v)
}

// wrapper is what the wrapperspb messages have in common.
type wrapper[T any] interface {
	comparable
	GetValue() T
}

func unwrap[T any, W wrapper[T]](w W) *T {
	var zero W
	if w == zero {
		return nil
	}
	v := w.GetValue()
	return &v
}
