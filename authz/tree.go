package authz

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"go.yaml.in/yaml/v3"
)

// node is one value of a policy document read from JSON or YAML, with the
// line it starts on, so that errors can name FILE:LINE. Building it rejects
// duplicate keys and caps depth and size.
type node struct {
	kind  nodeKind
	line  int
	str   string // string value, number text, or "true"/"false"
	items []*node
	keys  []string
	vals  []*node
}

type nodeKind uint8

const (
	kNull nodeKind = iota
	kBool
	kNumber
	kString
	kArray
	kObject
)

func (k nodeKind) String() string {
	return [...]string{"null", "boolean", "number", "string", "array", "object"}[k]
}

const (
	maxTreeDepth = 12
	maxTreeNodes = 50_000
)

func (n *node) get(key string) *node {
	for i, k := range n.keys {
		if k == key {
			return n.vals[i]
		}
	}
	return nil
}

// lineError is an error located in a file.
type lineError struct {
	file string
	line int
	msg  string
}

func (e *lineError) Error() string {
	if e.line > 0 {
		return fmt.Sprintf("%s:%d: %s", e.file, e.line, e.msg)
	}
	return e.file + ": " + e.msg
}

// parseJSONTree reads one JSON value (and nothing after it) into a node tree.
func parseJSONTree(file string, data []byte) (*node, error) {
	p := jsonTreeParser{data: data, dec: json.NewDecoder(bytes.NewReader(data)), file: file}
	p.dec.UseNumber()
	root, err := p.value(0)
	if err != nil {
		return nil, p.wrap(err)
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, &lineError{file, p.lineAt(p.dec.InputOffset()), "unexpected data after the JSON document"}
	}
	return root, nil
}

type jsonTreeParser struct {
	data  []byte
	dec   *json.Decoder
	file  string
	nodes int
	// line counting is incremental: lines before lineOff.
	lineOff int64
	lineNo  int
}

func (p *jsonTreeParser) lineAt(off int64) int {
	if off < p.lineOff { // never happens in one forward pass; recount.
		p.lineOff, p.lineNo = 0, 0
	}
	if off > int64(len(p.data)) {
		off = int64(len(p.data))
	}
	p.lineNo += bytes.Count(p.data[p.lineOff:off], []byte{'\n'})
	p.lineOff = off
	return p.lineNo + 1
}

// start returns the line of the next value: skips the separators after the
// decoder's offset.
func (p *jsonTreeParser) start() int {
	off := p.dec.InputOffset()
	for off < int64(len(p.data)) {
		switch p.data[off] {
		case ' ', '\t', '\r', '\n', ':', ',':
			off++
			continue
		}
		break
	}
	return p.lineAt(off)
}

func (p *jsonTreeParser) wrap(err error) error {
	var le *lineError
	if errors.As(err, &le) {
		return err
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		return &lineError{p.file, p.lineAt(se.Offset), "invalid JSON: " + se.Error()}
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &lineError{p.file, p.lineAt(int64(len(p.data))), "invalid JSON: unexpected end of input"}
	}
	return &lineError{p.file, p.lineAt(p.dec.InputOffset()), "invalid JSON: " + err.Error()}
}

func (p *jsonTreeParser) value(depth int) (*node, error) {
	if depth > maxTreeDepth {
		return nil, &lineError{p.file, p.start(), fmt.Sprintf("document nested deeper than %d levels", maxTreeDepth)}
	}
	if p.nodes++; p.nodes > maxTreeNodes {
		return nil, &lineError{p.file, p.start(), fmt.Sprintf("document has more than %d values", maxTreeNodes)}
	}
	line := p.start()
	tok, err := p.dec.Token()
	if err != nil {
		return nil, err
	}
	n := &node{line: line}
	switch t := tok.(type) {
	case nil:
		n.kind = kNull
	case bool:
		n.kind, n.str = kBool, strconv.FormatBool(t)
	case json.Number:
		n.kind, n.str = kNumber, t.String()
	case string:
		n.kind, n.str = kString, t
	case json.Delim:
		switch t {
		case '[':
			n.kind = kArray
			for p.dec.More() {
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		case '{':
			n.kind = kObject
			for p.dec.More() {
				kline := p.start()
				kt, err := p.dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				if n.get(k) != nil {
					return nil, &lineError{p.file, kline, fmt.Sprintf("duplicate key %q", k)}
				}
				v, err := p.value(depth + 1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k)
				n.vals = append(n.vals, v)
			}
		default:
			return nil, &lineError{p.file, line, fmt.Sprintf("unexpected %q", t)}
		}
		if _, err := p.dec.Token(); err != nil { // closing delimiter
			return nil, err
		}
	}
	return n, nil
}

// yamlTree converts a YAML node into a node tree, keeping every scalar the
// YAML author wrote as a string a string (yaml.v3 would turn 2012-10-17 into
// a time). Aliases are followed within the same caps.
func yamlTree(file string, y *yaml.Node) (*node, error) {
	count := 0
	var conv func(y *yaml.Node, depth int) (*node, error)
	conv = func(y *yaml.Node, depth int) (*node, error) {
		if depth > maxTreeDepth {
			return nil, &lineError{file, y.Line, fmt.Sprintf("document nested deeper than %d levels", maxTreeDepth)}
		}
		if count++; count > maxTreeNodes {
			return nil, &lineError{file, y.Line, fmt.Sprintf("document has more than %d values", maxTreeNodes)}
		}
		n := &node{line: y.Line}
		switch y.Kind {
		case yaml.DocumentNode:
			if len(y.Content) != 1 {
				return nil, &lineError{file, y.Line, "empty document"}
			}
			return conv(y.Content[0], depth)
		case yaml.AliasNode:
			if y.Alias == nil {
				return nil, &lineError{file, y.Line, "bad alias"}
			}
			return conv(y.Alias, depth+1)
		case yaml.SequenceNode:
			n.kind = kArray
			for _, c := range y.Content {
				v, err := conv(c, depth+1)
				if err != nil {
					return nil, err
				}
				n.items = append(n.items, v)
			}
		case yaml.MappingNode:
			n.kind = kObject
			for i := 0; i+1 < len(y.Content); i += 2 {
				kn := y.Content[i]
				if kn.Kind != yaml.ScalarNode {
					return nil, &lineError{file, kn.Line, "mapping keys must be strings"}
				}
				if n.get(kn.Value) != nil {
					return nil, &lineError{file, kn.Line, fmt.Sprintf("duplicate key %q", kn.Value)}
				}
				v, err := conv(y.Content[i+1], depth+1)
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, kn.Value)
				n.vals = append(n.vals, v)
			}
		case yaml.ScalarNode:
			switch y.ShortTag() {
			case "!!null":
				n.kind = kNull
			case "!!bool":
				var b bool
				if err := y.Decode(&b); err != nil {
					return nil, &lineError{file, y.Line, err.Error()}
				}
				n.kind, n.str = kBool, strconv.FormatBool(b)
			case "!!int", "!!float":
				n.kind, n.str = kNumber, y.Value
			default:
				n.kind, n.str = kString, y.Value
			}
		default:
			return nil, &lineError{file, y.Line, "unsupported YAML node"}
		}
		return n, nil
	}
	return conv(y, 0)
}
