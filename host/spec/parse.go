package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"

	"go.yaml.in/yaml/v3"
)

// Caps on outside input.
const (
	// MaxFileSize is the largest endpoint file or request body accepted.
	MaxFileSize = 1 << 20
	// MaxDepth is the deepest nesting of mappings and lists accepted; the
	// shapes need 7 levels.
	MaxDepth = 32
	// maxValues bounds the values one document may expand to (YAML aliases
	// can multiply a small file).
	maxValues = 200_000
)

// Format is the syntax of an input.
type Format int

// The formats Parse understands.
const (
	FormatYAML Format = iota + 1
	FormatJSON
)

// DetectFormat chooses by extension (.json; .yaml or .yml) and otherwise
// sniffs: input whose first non-space character is '{' or '[' is JSON,
// anything else YAML.
func DetectFormat(name string, data []byte) Format {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".json":
		return FormatJSON
	case ".yaml", ".yml":
		return FormatYAML
	}
	trimmed := bytes.TrimLeft(bytes.TrimPrefix(data, []byte(utf8BOM)), " \t\r\n")
	if len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[') {
		return FormatJSON
	}
	return FormatYAML
}

const utf8BOM = "\xEF\xBB\xBF"

// Parse decodes one endpoint file (see the package documentation for its
// layout). name is used for the format and in errors. It checks syntax, keys
// and types only; validation is separate. Errors are *DecodeError.
func Parse(name string, data []byte) (*File, error) {
	var f File
	plain, err := toPlain(DetectFormat(name, data), data)
	if err == nil {
		if obj, ok := plain.(object); ok {
			plain = dropExtensions(obj)
		}
		err = assign(plain, &f)
	}
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			de.File = name
		}
		return nil, err
	}
	if len(f.Models) == 0 && len(f.EndpointConfigs) == 0 && len(f.Endpoints) == 0 && len(f.InferenceComponents) == 0 {
		return nil, &DecodeError{File: name, Err: ErrEmpty}
	}
	return &f, nil
}

// dropExtensions removes top-level "x-" keys, which hold YAML anchors.
func dropExtensions(obj object) object {
	out := make(object, 0, len(obj))
	for _, m := range obj {
		if !strings.HasPrefix(m.key, "x-") {
			out = append(out, m)
		}
	}
	return out
}

// DecodeJSON decodes a JSON document — such as an awsJson1_1 request body —
// into v (a pointer to one of this package's shapes) with the same strict
// rules as endpoint files. Errors are *DecodeError.
func DecodeJSON(data []byte, v any) error {
	plain, err := toPlain(FormatJSON, data)
	if err != nil {
		return err
	}
	return assign(plain, v)
}

func toPlain(format Format, data []byte) (any, error) {
	if len(data) > MaxFileSize {
		return nil, &DecodeError{Err: ErrTooLarge}
	}
	if format == FormatJSON {
		return jsonToPlain(data)
	}
	return yamlToPlain(data)
}

// assign decodes a plain document, which must be a mapping or null, into v.
func assign(plain any, v any) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return &DecodeError{Err: fmt.Errorf("%w: decode target must be a non-nil pointer", ErrType)}
	}
	if plain == nil {
		return nil
	}
	if _, ok := plain.(object); !ok {
		return typeError("", "a mapping at the top level", plain)
	}
	return decodePlain("", plain, rv.Elem())
}

// budget counts values converted and bounds depth. For YAML it also
// remembers what each alias target converted to, so that aliases cost
// their size against the budget but are converted once.
type budget struct {
	values  int
	deepest int
	aliases map[*yaml.Node]converted
}

type converted struct {
	val          any
	size, height int
}

func (b *budget) enter(path string, depth int) error {
	b.values++
	b.deepest = max(b.deepest, depth)
	if depth > MaxDepth || b.values > maxValues {
		return &DecodeError{Path: path, Err: ErrTooDeep}
	}
	return nil
}

// jsonToPlain converts JSON text with encoding/json's tokenizer, refusing
// duplicate keys and trailing data.
func jsonToPlain(data []byte) (any, error) {
	data = bytes.TrimPrefix(data, []byte(utf8BOM))
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var b budget
	v, err := jsonValue(dec, data, "", 0, &b)
	if err != nil {
		return nil, err
	}
	end := dec.InputOffset()
	switch _, err := dec.Token(); {
	case err == io.EOF:
		return v, nil
	case err != nil:
		return nil, jsonSyntax(data, dec, err)
	default:
		rest := data[end:]
		start := end + int64(len(rest)-len(bytes.TrimLeft(rest, " \t\r\n")))
		return nil, syntaxError(data, start, errors.New("data after the top-level value"))
	}
}

func jsonValue(dec *json.Decoder, data []byte, path string, depth int, b *budget) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, jsonSyntax(data, dec, err)
	}
	if err := b.enter(path, depth); err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			list := []any{}
			for dec.More() {
				e, err := jsonValue(dec, data, path+"["+strconv.Itoa(len(list))+"]", depth+1, b)
				if err != nil {
					return nil, err
				}
				list = append(list, e)
			}
			if _, err := dec.Token(); err != nil {
				return nil, jsonSyntax(data, dec, err)
			}
			return list, nil
		}
		if t != '{' {
			return nil, syntaxError(data, dec.InputOffset(), fmt.Errorf("unexpected %q", rune(t)))
		}
		obj := object{}
		seen := map[string]bool{}
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, jsonSyntax(data, dec, err)
			}
			key, _ := kt.(string) // the tokenizer only yields string keys
			p := keyPath(path, key)
			if seen[key] {
				return nil, &DecodeError{Path: p, Err: fmt.Errorf("%w: duplicate key", ErrSyntax)}
			}
			seen[key] = true
			v, err := jsonValue(dec, data, p, depth+1, b)
			if err != nil {
				return nil, err
			}
			obj = append(obj, member{key, v})
		}
		if _, err := dec.Token(); err != nil {
			return nil, jsonSyntax(data, dec, err)
		}
		return obj, nil
	case json.Number:
		return number(t), nil
	case string, bool, nil:
		return t, nil
	}
	return nil, &DecodeError{Path: path, Err: fmt.Errorf("%w: unexpected token %v", ErrSyntax, tok)}
}

func jsonSyntax(data []byte, dec *json.Decoder, err error) error {
	offset := dec.InputOffset()
	var se *json.SyntaxError
	if errors.As(err, &se) {
		offset = se.Offset
	}
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return syntaxError(data, offset, err)
}

func syntaxError(data []byte, offset int64, err error) error {
	offset = min(max(offset, 0), int64(len(data)))
	before := data[:offset]
	line := bytes.Count(before, []byte{'\n'}) + 1
	col := int(offset) - (bytes.LastIndexByte(before, '\n') + 1) + 1
	return &DecodeError{Err: fmt.Errorf("%w: line %d, column %d: %w", ErrSyntax, line, col, err)}
}

// yamlToPlain converts one YAML document; more than one is refused.
func yamlToPlain(data []byte) (any, error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if err == io.EOF {
			return nil, nil
		}
		return nil, &DecodeError{Err: fmt.Errorf("%w: %w", ErrSyntax, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, &DecodeError{Err: fmt.Errorf("%w: %w", ErrSyntax, err)}
		}
		return nil, &DecodeError{Err: fmt.Errorf("%w: more than one YAML document; use one document per file", ErrSyntax)}
	}
	var b budget
	return yamlValue(&doc, "", 0, &b)
}

func yamlValue(n *yaml.Node, path string, depth int, b *budget) (any, error) {
	if err := b.enter(path, depth); err != nil {
		return nil, err
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return yamlValue(n.Content[0], path, depth, b)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, yamlError(n, path, "alias without an anchor")
		}
		return yamlAlias(n.Alias, path, depth+1, b)
	case yaml.SequenceNode:
		if tag := n.ShortTag(); tag != "!!seq" {
			return nil, yamlError(n, path, "unsupported tag "+tag)
		}
		list := make([]any, 0, len(n.Content))
		for i, c := range n.Content {
			v, err := yamlValue(c, path+"["+strconv.Itoa(i)+"]", depth+1, b)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		return list, nil
	case yaml.MappingNode:
		return yamlMapping(n, path, depth, b)
	case yaml.ScalarNode:
		return yamlScalar(n, path)
	}
	return nil, yamlError(n, path, "unsupported YAML node")
}

// yamlAlias converts an alias target once and reuses the (read-only) plain
// value, charging its size and height every time.
func yamlAlias(target *yaml.Node, path string, depth int, b *budget) (any, error) {
	if c, ok := b.aliases[target]; ok {
		b.values += c.size
		b.deepest = max(b.deepest, depth+c.height)
		if depth+c.height > MaxDepth || b.values > maxValues {
			return nil, &DecodeError{Path: path, Err: ErrTooDeep}
		}
		return c.val, nil
	}
	before, outer := b.values, b.deepest
	b.deepest = depth
	v, err := yamlValue(target, path, depth, b)
	if err != nil {
		return nil, err
	}
	if b.aliases == nil {
		b.aliases = map[*yaml.Node]converted{}
	}
	b.aliases[target] = converted{val: v, size: b.values - before, height: b.deepest - depth}
	b.deepest = max(outer, b.deepest)
	return v, nil
}

// yamlMapping converts a mapping, applying merge keys (<<): keys written in
// the mapping win over merged ones, earlier merged mappings over later ones.
func yamlMapping(n *yaml.Node, path string, depth int, b *budget) (any, error) {
	if tag := n.ShortTag(); tag != "!!map" {
		return nil, yamlError(n, path, "unsupported tag "+tag)
	}
	obj := object{}
	seen := map[string]bool{}
	var merged []object
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, yamlError(k, path, "mapping keys must be plain strings")
		}
		if k.ShortTag() == "!!merge" {
			ms, err := yamlMerge(v, path, depth, b)
			if err != nil {
				return nil, err
			}
			merged = append(merged, ms...)
			continue
		}
		key := k.Value
		p := keyPath(path, key)
		if !utf8.ValidString(key) {
			return nil, yamlError(k, path, "key is not valid UTF-8")
		}
		if seen[key] {
			return nil, yamlError(k, p, "duplicate key")
		}
		seen[key] = true
		val, err := yamlValue(v, p, depth+1, b)
		if err != nil {
			return nil, err
		}
		obj = append(obj, member{key, val})
	}
	for _, m := range merged {
		for _, mem := range m {
			if !seen[mem.key] {
				seen[mem.key] = true
				obj = append(obj, mem)
			}
		}
	}
	return obj, nil
}

func yamlMerge(v *yaml.Node, path string, depth int, b *budget) ([]object, error) {
	target := v
	if target.Kind == yaml.AliasNode && target.Alias != nil {
		target = target.Alias
	}
	var sources []*yaml.Node
	switch target.Kind {
	case yaml.MappingNode:
		sources = []*yaml.Node{v}
	case yaml.SequenceNode:
		sources = target.Content
	default:
		return nil, yamlError(v, path, "merge key (<<) needs a mapping or a list of mappings")
	}
	out := make([]object, 0, len(sources))
	for _, s := range sources {
		val, err := yamlValue(s, path, depth+1, b)
		if err != nil {
			return nil, err
		}
		obj, ok := val.(object)
		if !ok {
			return nil, yamlError(s, path, "merge key (<<) needs a mapping or a list of mappings")
		}
		out = append(out, obj)
	}
	return out, nil
}

func yamlScalar(n *yaml.Node, path string) (any, error) {
	switch tag := n.ShortTag(); tag {
	case "!!str", "!!timestamp", "!!binary":
		// JSON has no timestamps or bytes: keep the text as written.
		if !utf8.ValidString(n.Value) {
			return nil, yamlError(n, path, "string is not valid UTF-8")
		}
		return n.Value, nil
	case "!!null":
		return nil, nil
	case "!!bool":
		switch n.Value { // the common spellings; Decode knows the rest
		case "true", "True", "TRUE":
			return true, nil
		case "false", "False", "FALSE":
			return false, nil
		}
		var v bool
		if err := n.Decode(&v); err != nil {
			return nil, yamlError(n, path, err.Error())
		}
		return v, nil
	case "!!int", "!!float":
		if i, err := strconv.ParseInt(n.Value, 10, 64); err == nil { // fast path
			return number(strconv.FormatInt(i, 10)), nil
		}
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, yamlError(n, path, err.Error())
		}
		switch v := v.(type) {
		case int:
			return number(strconv.Itoa(v)), nil
		case int64:
			return number(strconv.FormatInt(v, 10)), nil
		case uint64:
			return number(strconv.FormatUint(v, 10)), nil
		case float64:
			if math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, yamlError(n, path, "number is not finite")
			}
			return number(strconv.FormatFloat(v, 'g', -1, 64)), nil
		}
		return nil, yamlError(n, path, "number out of range")
	default:
		return nil, yamlError(n, path, "unsupported tag "+tag)
	}
}

func yamlError(n *yaml.Node, path, msg string) error {
	return &DecodeError{Path: path, Err: fmt.Errorf("%w: line %d: %s", ErrSyntax, n.Line, msg)}
}
