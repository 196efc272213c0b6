package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// Both YAML and JSON input are first turned into plain values — the JSON data
// model — and then one strict decoder assigns them to the shapes, so that one
// set of rules (exact, case-sensitive keys; no unknown keys; no type
// coercion; null means absent) serves both formats and API request bodies.
//
// Plain values are: nil, bool, string, number (the text of a JSON number),
// []any, and object (members in document order, keys unique).

// number is the text of a JSON number.
type number string

// object is a JSON object whose members keep their document order.
type object []member

type member struct {
	key string
	val any
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	plainKeyRe     = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_-]*$`)
)

// decodePlain assigns the plain value v to rv, which must be settable.
func decodePlain(path string, v any, rv reflect.Value) error {
	if rv.Type() == rawMessageType {
		if v == nil {
			return nil
		}
		b, err := json.Marshal(toJSONValue(v))
		if err != nil {
			return &DecodeError{Path: path, Err: fmt.Errorf("%w: %w", ErrType, err)}
		}
		rv.SetBytes(b)
		return nil
	}
	if v == nil { // null means absent, whatever the target
		return nil
	}
	// A type with its own JSON decoding (the host's timestamps, seconds
	// since the epoch) decodes the value as JSON; it is not a mapping.
	if rv.CanAddr() {
		if u, ok := rv.Addr().Interface().(json.Unmarshaler); ok {
			b, err := json.Marshal(toJSONValue(v))
			if err == nil {
				err = u.UnmarshalJSON(b)
			}
			if err != nil {
				return &DecodeError{Path: path, Err: fmt.Errorf("%w: %w", ErrType, err)}
			}
			return nil
		}
	}
	switch rv.Kind() {
	case reflect.Pointer:
		p := reflect.New(rv.Type().Elem())
		if err := decodePlain(path, v, p.Elem()); err != nil {
			return err
		}
		rv.Set(p)
		return nil
	case reflect.Struct:
		obj, ok := v.(object)
		if !ok {
			return typeError(path, "a mapping", v)
		}
		return decodeStruct(path, obj, rv)
	case reflect.Map:
		obj, ok := v.(object)
		if !ok {
			return typeError(path, "a mapping", v)
		}
		m := reflect.MakeMapWithSize(rv.Type(), len(obj))
		for _, mem := range obj {
			ev := reflect.New(rv.Type().Elem()).Elem()
			if err := decodePlain(keyPath(path, mem.key), mem.val, ev); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(mem.key).Convert(rv.Type().Key()), ev)
		}
		rv.Set(m)
		return nil
	case reflect.Slice:
		list, ok := v.([]any)
		if !ok {
			return typeError(path, "a list", v)
		}
		s := reflect.MakeSlice(rv.Type(), len(list), len(list))
		for i, e := range list {
			if err := decodePlain(path+"["+strconv.Itoa(i)+"]", e, s.Index(i)); err != nil {
				return err
			}
		}
		rv.Set(s)
		return nil
	case reflect.String:
		s, ok := v.(string)
		if !ok {
			return typeError(path, "a string", v)
		}
		rv.SetString(s)
		return nil
	case reflect.Bool:
		b, ok := v.(bool)
		if !ok {
			return typeError(path, "a boolean", v)
		}
		rv.SetBool(b)
		return nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := v.(number)
		if !ok {
			return typeError(path, "an integer", v)
		}
		i, err := parseInteger(string(n))
		if err != nil || rv.OverflowInt(i) {
			return &DecodeError{Path: path, Err: fmt.Errorf("%w: expected an integer that fits %s, got %s", ErrType, rv.Kind(), n)}
		}
		rv.SetInt(i)
		return nil
	case reflect.Float32, reflect.Float64:
		n, ok := v.(number)
		if !ok {
			return typeError(path, "a number", v)
		}
		f, err := strconv.ParseFloat(string(n), 64)
		if err != nil || math.IsInf(f, 0) || rv.OverflowFloat(f) {
			return &DecodeError{Path: path, Err: fmt.Errorf("%w: expected a finite number, got %s", ErrType, n)}
		}
		rv.SetFloat(f)
		return nil
	}
	// Only reachable if a shape gains a field kind this decoder lacks.
	return &DecodeError{Path: path, Err: fmt.Errorf("%w: cannot decode into %s", ErrType, rv.Type())}
}

func decodeStruct(path string, obj object, rv reflect.Value) error {
	t := rv.Type()
	for _, mem := range obj {
		i, ok := fieldIndex(t, mem.key)
		p := keyPath(path, mem.key)
		if !ok {
			err := ErrUnknownField
			if alt, found := fieldFold(t, mem.key); found {
				err = fmt.Errorf("%w (did you mean %s?)", ErrUnknownField, alt)
			}
			return &DecodeError{Path: p, Err: err}
		}
		if err := decodePlain(p, mem.val, rv.FieldByIndex(i)); err != nil {
			return err
		}
	}
	return nil
}

// fieldIndex finds the struct field whose JSON name is exactly key; the
// fields of an embedded struct count as the outer struct's own (as in
// encoding/json), so shapes can share a common part.
func fieldIndex(t reflect.Type, key string) ([]int, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if f.Anonymous {
			continue
		}
		if name := jsonName(f); name != "" && name == key {
			return f.Index, true
		}
	}
	return nil, false
}

// fieldFold finds a JSON name equal to key but for case, for a hint.
func fieldFold(t reflect.Type, key string) (string, bool) {
	for _, f := range reflect.VisibleFields(t) {
		if name := jsonName(f); !f.Anonymous && name != "" && strings.EqualFold(name, key) {
			return name, true
		}
	}
	return "", false
}

func jsonName(f reflect.StructField) string {
	if !f.IsExported() {
		return ""
	}
	tag := f.Tag.Get("json")
	name, _, _ := strings.Cut(tag, ",")
	if name == "-" {
		return ""
	}
	if name == "" {
		return f.Name
	}
	return name
}

// keyPath appends a mapping key to a path: `A.B`, or `A["odd key"]`.
func keyPath(path, key string) string {
	if !plainKeyRe.MatchString(key) {
		return path + "[" + strconv.Quote(key) + "]"
	}
	if path == "" {
		return key
	}
	return path + "." + key
}

func typeError(path, want string, got any) error {
	return &DecodeError{Path: path, Err: fmt.Errorf("%w: expected %s, got %s", ErrType, want, describe(got))}
}

func describe(v any) string {
	switch v := v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case number:
		return "a number (" + string(v) + ")"
	case string:
		return "a string"
	case []any:
		return "a list"
	case object:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// parseInteger accepts any JSON number with an integral value, so that 1 and
// 1.0 (and YAML's 1e3) decode alike.
func parseInteger(s string) (int64, error) {
	if i, err := strconv.ParseInt(s, 10, 64); err == nil {
		return i, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, err
	}
	if f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, errors.New("not an integer")
	}
	return int64(f), nil
}

// toJSONValue turns a plain value into one encoding/json marshals as the
// same JSON (objects become maps, so their keys come out sorted).
func toJSONValue(v any) any {
	switch v := v.(type) {
	case number:
		return json.Number(v)
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			out[i] = toJSONValue(e)
		}
		return out
	case object:
		out := make(map[string]any, len(v))
		for _, m := range v {
			out[m.key] = toJSONValue(m.val)
		}
		return out
	}
	return v
}
