package hclspec

import (
	"errors"
	"fmt"
	"math/big"
	"reflect"
	"slices"
	"strings"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/gocty"
	ctymsgpack "github.com/zclconf/go-cty/cty/msgpack"
)

// ErrConfig is wrapped by every error of Decode.
var ErrConfig = errors.New("invalid config")

// Decode reads the msgpack config that the agent encoded from the plugin's
// config block with spec, into target: a pointer to a struct whose fields
// carry `cty:"key"` tags, one per key of the schema (a block that may be
// absent is a pointer, nil when absent). An optional attribute without a
// default that the config leaves out comes as null: into a pointer it is
// nil, into a string, number or bool the zero value, as Nomad's own SDK
// reads it (msgpack into Go). Unknown and missing keys and values of the
// wrong type are errors that name the key.
func Decode(spec *Spec, payload []byte, target any) error {
	ty, err := ImpliedType(spec)
	if err != nil {
		return fmt.Errorf("failed to read the config schema: %w", err)
	}
	// The generic pass first: its errors name unknown and missing keys,
	// where cty only says how many attributes it expected.
	var raw any
	if err := msgpack.Unmarshal(payload, &raw); err != nil {
		return fmt.Errorf("%w: not msgpack: %w", ErrConfig, err)
	}
	if err := check(raw, ty, nil); err != nil {
		return err
	}
	val, err := ctymsgpack.Unmarshal(payload, ty)
	if err != nil {
		return pathError(err)
	}
	if t := reflect.TypeOf(target); t != nil && t.Kind() == reflect.Pointer {
		val = zeroNulls(val, t.Elem())
	}
	if err := gocty.FromCtyValue(val, target); err != nil {
		return pathError(err)
	}
	return nil
}

// zeroNulls replaces the null strings, numbers and bools in val whose Go
// target (of type t, reached through `cty` tags) is not a pointer with
// their type's zero value; gocty refuses null there. Other nulls stay.
func zeroNulls(val cty.Value, t reflect.Type) cty.Value {
	if val.IsNull() {
		if t.Kind() == reflect.Pointer || t.Kind() == reflect.Interface {
			return val
		}
		switch val.Type() {
		case cty.String:
			return cty.StringVal("")
		case cty.Number:
			return cty.Zero
		case cty.Bool:
			return cty.False
		}
		return val
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if !val.IsKnown() {
		return val
	}
	ty := val.Type()
	switch {
	case ty.IsObjectType() && t.Kind() == reflect.Struct:
		fields := map[string]reflect.Type{}
		for i := range t.NumField() {
			if name := t.Field(i).Tag.Get("cty"); name != "" {
				fields[name] = t.Field(i).Type
			}
		}
		attrs := val.AsValueMap()
		if len(attrs) == 0 {
			return val
		}
		for k, v := range attrs {
			if ft, ok := fields[k]; ok {
				attrs[k] = zeroNulls(v, ft)
			}
		}
		return cty.ObjectVal(attrs)
	case ty.IsListType() && t.Kind() == reflect.Slice && val.LengthInt() > 0:
		elems := val.AsValueSlice()
		for i, e := range elems {
			elems[i] = zeroNulls(e, t.Elem())
		}
		return cty.ListVal(elems)
	case ty.IsMapType() && t.Kind() == reflect.Map && val.LengthInt() > 0:
		elems := val.AsValueMap()
		for k, e := range elems {
			elems[k] = zeroNulls(e, t.Elem())
		}
		return cty.MapVal(elems)
	}
	return val
}

// check walks a generically decoded payload against ty.
func check(v any, ty cty.Type, path []string) error {
	if v == nil {
		return nil // null: allowed for any type; gocty refuses it where Go cannot hold it
	}
	switch {
	case ty == cty.String:
		if _, ok := v.(string); !ok {
			return keyError(path, "a string is required, got %s", kind(v))
		}
	case ty == cty.Bool:
		if _, ok := v.(bool); !ok {
			return keyError(path, "a bool is required, got %s", kind(v))
		}
	case ty == cty.Number:
		return checkNumber(v, path)
	case ty.IsObjectType():
		return checkObject(v, ty, path)
	case ty.IsMapType():
		m, ok := v.(map[string]any)
		if !ok {
			return keyError(path, "a map is required, got %s", kind(v))
		}
		for _, k := range slices.Sorted(mapKeys(m)) {
			if err := check(m[k], ty.ElementType(), append(path, k)); err != nil {
				return err
			}
		}
	case ty.IsListType() || ty.IsSetType() || ty.IsTupleType():
		return checkList(v, ty, path)
	}
	return nil
}

// keyError is check's error for the value at path.
func keyError(path []string, format string, args ...any) error {
	return &KeyError{Key: strings.Join(path, "."), Reason: fmt.Sprintf(format, args...)}
}

// checkNumber checks a value of a number attribute: a msgpack number, or
// a string that parses as one.
func checkNumber(v any, path []string) error {
	switch n := v.(type) {
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
	case string: // cty writes numbers that fit no int64 or float64 as strings
		if _, _, err := big.ParseFloat(n, 10, 512, big.ToNearestEven); err != nil {
			return keyError(path, "a number is required, got a string")
		}
	default:
		return keyError(path, "a number is required, got %s", kind(v))
	}
	return nil
}

// checkObject checks a block or object against object type ty: no
// unknown keys, no missing ones (the first of each, by name), then each
// attribute's value.
func checkObject(v any, ty cty.Type, path []string) error {
	m, ok := v.(map[string]any)
	if !ok {
		return keyError(path, "a block or object is required, got %s", kind(v))
	}
	atys := ty.AttributeTypes()
	var unknown, missing []string
	for k := range m {
		if _, ok := atys[k]; !ok {
			unknown = append(unknown, k)
		}
	}
	for k := range atys {
		if _, ok := m[k]; !ok {
			missing = append(missing, k)
		}
	}
	slices.Sort(unknown)
	slices.Sort(missing)
	switch {
	case len(unknown) > 0:
		return keyError(path, "unknown key %q (known: %s)", unknown[0], strings.Join(slices.Sorted(mapKeys(atys)), ", "))
	case len(missing) > 0:
		return keyError(path, "key %q is missing", missing[0])
	}
	for _, k := range slices.Sorted(mapKeys(m)) {
		if err := check(m[k], atys[k], append(path, k)); err != nil {
			return err
		}
	}
	return nil
}

// checkList checks a list against a list, set or tuple type ty: a
// tuple's length, then each element against its type.
func checkList(v any, ty cty.Type, path []string) error {
	l, ok := v.([]any)
	if !ok {
		return keyError(path, "a list is required, got %s", kind(v))
	}
	if ty.IsTupleType() && len(l) != len(ty.TupleElementTypes()) {
		return keyError(path, "%d elements are required, got %d", len(ty.TupleElementTypes()), len(l))
	}
	for i, e := range l {
		if err := check(e, elementType(ty, i), append(path, fmt.Sprint(i))); err != nil {
			return err
		}
	}
	return nil
}

// elementType is the type of element i of a list, set or tuple type: a
// tuple's i-th element type, else the collection's one element type
// (ElementType panics on a tuple).
func elementType(ty cty.Type, i int) cty.Type {
	if ty.IsTupleType() {
		return ty.TupleElementTypes()[i]
	}
	return ty.ElementType()
}

func kind(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case bool:
		return "a bool"
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, float32, float64:
		return "a number"
	}
	return fmt.Sprintf("%T", v)
}

// KeyError is a config value that does not fit the schema.
type KeyError struct {
	Key    string // dotted path, e.g. "simulated.count"; "" for the whole config
	Reason string
}

func (e *KeyError) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%v: %s", ErrConfig, e.Reason)
	}
	return fmt.Sprintf("%v: %s: %s", ErrConfig, e.Key, e.Reason)
}

func (e *KeyError) Unwrap() error { return ErrConfig }

// pathError turns cty's path errors into KeyErrors.
func pathError(err error) error {
	var pe cty.PathError
	if !errors.As(err, &pe) {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	var keys []string
	for _, step := range pe.Path {
		switch s := step.(type) {
		case cty.GetAttrStep:
			keys = append(keys, s.Name)
		case cty.IndexStep:
			if s.Key.Type() == cty.String {
				keys = append(keys, s.Key.AsString())
			} else if s.Key.Type() == cty.Number {
				keys = append(keys, s.Key.AsBigFloat().Text('f', -1))
			}
		}
	}
	return &KeyError{Key: strings.Join(keys, "."), Reason: pe.Error()}
}
