package shared

import (
	"testing"

	"github.com/shoenig/test/must"
)

func TestAttribute_Validate(t *testing.T) {
	cases := []struct {
		name string
		attr *Attribute
		want error
	}{
		{"int with a unit", IntAttribute(40960, UnitMiB), nil},
		{"float without a unit", FloatAttribute(1.5, ""), nil},
		{"string", StringAttribute("Enabled"), nil},
		{"bool", BoolAttribute(true), nil},
		{"nothing set", &Attribute{}, ErrNoValue},
		{"two values", &Attribute{Int: new(int64(1)), Bool: new(true)}, ErrSeveralValues},
		{"unit on a string", &Attribute{String: new("x"), Unit: UnitMiB}, ErrUnitOnNonValue},
		{"unknown unit", IntAttribute(1, "MiBs"), ErrUnknownUnit},
		{"unit the agent lacks", IntAttribute(1, "B"), ErrUnknownUnit},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.attr.Validate()
			if tc.want == nil {
				must.NoError(t, err)
				return
			}
			must.ErrorIs(t, err, tc.want)
		})
	}
}

func TestConvert_RoundTrip(t *testing.T) {
	attrs := map[string]*Attribute{
		"i": IntAttribute(-3, UnitW), "f": FloatAttribute(2.5, UnitGHz),
		"s": StringAttribute("x"), "b": BoolAttribute(false),
	}
	must.Eq(t, attrs, AttributesFromProto(AttributesToProto(attrs)))
	must.Nil(t, AttributesFromProto(AttributesToProto(nil)))

	obj := &StatObject{
		Attributes: map[string]*StatValue{
			"ratio": {IntNumeratorVal: new(int64(3)), IntDenominatorVal: new(int64(4)), Unit: UnitMiB, Desc: "used / total"},
			"float": {FloatNumeratorVal: new(0.5), FloatDenominatorVal: new(2.0)},
			"str":   {StringVal: new("N/A")},
			"bool":  {BoolVal: new(true)},
			"none":  {Desc: "nothing reported"},
		},
		Nested: map[string]*StatObject{"sub": {Attributes: map[string]*StatValue{"x": {IntNumeratorVal: new(int64(0))}}}},
	}
	must.Eq(t, obj, StatObjectFromProto(StatObjectToProto(obj)))
	must.Nil(t, StatObjectFromProto(StatObjectToProto(nil)))
	must.Nil(t, StatValueFromProto(StatValueToProto(nil)))
}
