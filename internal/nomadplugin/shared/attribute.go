// Package shared holds the values that Nomad's device and driver plugin
// services share: typed attributes with units, and statistics. They are Go
// values; convert.go turns them into the wire messages and back.
package shared

import (
	"errors"
	"fmt"
)

// Units the agent recognises on a numeric attribute. An attribute with any
// other unit fails the agent's validation of the whole fingerprint.
const (
	UnitKiB = "KiB"
	UnitMiB = "MiB"
	UnitGiB = "GiB"
	UnitTiB = "TiB"
	UnitPiB = "PiB"
	UnitEiB = "EiB"
	UnitkB  = "kB"
	UnitKB  = "KB" // another spelling of kB
	UnitMB  = "MB"
	UnitGB  = "GB"
	UnitTB  = "TB"
	UnitPB  = "PB"
	UnitEB  = "EB"

	UnitKiBPerS = "KiB/s"
	UnitMiBPerS = "MiB/s"
	UnitGiBPerS = "GiB/s"
	UnitTiBPerS = "TiB/s"
	UnitPiBPerS = "PiB/s"
	UnitEiBPerS = "EiB/s"
	UnitkBPerS  = "kB/s"
	UnitKBPerS  = "KB/s"
	UnitMBPerS  = "MB/s"
	UnitGBPerS  = "GB/s"
	UnitTBPerS  = "TB/s"
	UnitPBPerS  = "PB/s"
	UnitEBPerS  = "EB/s"

	UnitMHz = "MHz"
	UnitGHz = "GHz"

	UnitmW = "mW"
	UnitW  = "W"
	UnitkW = "kW"
	UnitMW = "MW"
	UnitGW = "GW"
)

// knownUnits is the agent's list (Nomad 1.11).
var knownUnits = map[string]bool{
	UnitKiB: true, UnitMiB: true, UnitGiB: true, UnitTiB: true, UnitPiB: true, UnitEiB: true,
	UnitkB: true, UnitKB: true, UnitMB: true, UnitGB: true, UnitTB: true, UnitPB: true, UnitEB: true,
	UnitKiBPerS: true, UnitMiBPerS: true, UnitGiBPerS: true, UnitTiBPerS: true, UnitPiBPerS: true, UnitEiBPerS: true,
	UnitkBPerS: true, UnitKBPerS: true, UnitMBPerS: true, UnitGBPerS: true, UnitTBPerS: true, UnitPBPerS: true, UnitEBPerS: true,
	UnitMHz: true, UnitGHz: true,
	UnitmW: true, UnitW: true, UnitkW: true, UnitMW: true, UnitGW: true,
}

// KnownUnit reports whether the agent accepts unit on an attribute.
func KnownUnit(unit string) bool { return knownUnits[unit] }

// Attribute is one typed value: exactly one of Float, Int, String and Bool
// is set. Unit is only allowed on numbers.
type Attribute struct {
	Float  *float64
	Int    *int64
	String *string
	Bool   *bool
	Unit   string
}

// IntAttribute returns an integer attribute with an optional unit.
func IntAttribute(v int64, unit string) *Attribute { return &Attribute{Int: &v, Unit: unit} }

// FloatAttribute returns a float attribute with an optional unit.
func FloatAttribute(v float64, unit string) *Attribute { return &Attribute{Float: &v, Unit: unit} }

// StringAttribute returns a string attribute.
func StringAttribute(v string) *Attribute { return &Attribute{String: &v} }

// BoolAttribute returns a bool attribute.
func BoolAttribute(v bool) *Attribute { return &Attribute{Bool: &v} }

// Errors of Attribute.Validate.
var (
	ErrNoValue        = errors.New("no attribute value set")
	ErrSeveralValues  = errors.New("more than one attribute value set")
	ErrUnitOnNonValue = errors.New("a unit is only allowed on a number")
	ErrUnknownUnit    = errors.New("unknown unit")
)

// Validate applies the checks the agent applies to every attribute it is
// sent; one failure makes it reject the whole fingerprint.
func (a *Attribute) Validate() error {
	set := 0
	for _, isSet := range []bool{a.Float != nil, a.Int != nil, a.String != nil, a.Bool != nil} {
		if isSet {
			set++
		}
	}
	switch {
	case set == 0:
		return ErrNoValue
	case set > 1:
		return ErrSeveralValues
	case a.Unit == "":
		return nil
	case a.String != nil || a.Bool != nil:
		return fmt.Errorf("%w (unit %q)", ErrUnitOnNonValue, a.Unit)
	case !KnownUnit(a.Unit):
		return fmt.Errorf("%w %q", ErrUnknownUnit, a.Unit)
	}
	return nil
}

// GoString prints the value, for test failures.
func (a *Attribute) GoString() string {
	if a == nil {
		return "<nil>"
	}
	var v any = "<unset>"
	switch {
	case a.Float != nil:
		v = *a.Float
	case a.Int != nil:
		v = *a.Int
	case a.String != nil:
		v = *a.String
	case a.Bool != nil:
		v = *a.Bool
	}
	if a.Unit == "" {
		return fmt.Sprintf("%#v", v)
	}
	return fmt.Sprintf("%#v %s", v, a.Unit)
}
