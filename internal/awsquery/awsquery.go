// Package awsquery speaks the wire of AWS's query protocol (awsQuery), the
// protocol older clients use for CloudWatch, and boto3 and the aws CLI use
// for IAM and STS: a request is a POST of an
// application/x-www-form-urlencoded body holding Action, Version and the
// operation's members flattened into names (Statistics.member.1,
// Dimensions.member.2.Name, Map.entry.1.key); an answer is XML,
// <ActionResponse xmlns=...><ActionResult>…</ActionResult>
// <ResponseMetadata><RequestId>…</RequestId></ResponseMetadata>, and an
// error <ErrorResponse><Error><Type>Sender</Type><Code>…</Code>
// <Message>…</Message></Error><RequestId>…</RequestId></ErrorResponse>.
//
// It owns only that wire: decoding a bounded form (Parse), reading members
// and lists out of it (Form), and writing answers and errors (Writer,
// WriteError). It knows no service: what the members mean, which are
// required and which error a bad one earns belong to the service package
// that calls it. It never reads a request body itself (the caller has read
// it, bounded) and never panics on hostile input.
package awsquery

import (
	"errors"
	"fmt"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Limits bound what Parse accepts; the zero value takes the defaults.
type Limits struct {
	// MaxParams is the most name=value pairs a body may hold (default 10000).
	MaxParams int
	// MaxNameLen is the longest name (default 512 bytes).
	MaxNameLen int
	// MaxIndex is the largest N of a .member.N or .entry.N (default 10000).
	MaxIndex int
}

func (l Limits) withDefaults() Limits {
	if l.MaxParams <= 0 {
		l.MaxParams = 10000
	}
	if l.MaxNameLen <= 0 {
		l.MaxNameLen = 512
	}
	if l.MaxIndex <= 0 {
		l.MaxIndex = 10000
	}
	return l
}

// ErrMalformed is the error of every body Parse refuses; the *ParseError
// says why. Query services answer it as MalformedQueryString (400).
var ErrMalformed = errors.New("malformed query string")

// ParseError says why a body is not a form Parse accepts.
type ParseError struct{ Reason string }

func (e *ParseError) Error() string { return "malformed query string: " + e.Reason }

// Unwrap makes errors.Is(err, ErrMalformed) true.
func (e *ParseError) Unwrap() error { return ErrMalformed }

// Form is a decoded query-protocol request. It is read-only after Parse and
// safe for concurrent readers.
type Form struct {
	values map[string]string
	// lists maps a list's prefix ("Statistics", "A.member.2.B") to the
	// indices present after it: prefix+".member."+N or prefix+".entry."+N.
	members map[string][]int
	entries map[string][]int
}

// Parse decodes an application/x-www-form-urlencoded body. A name given twice,
// a name or value that does not decode, more pairs than the limits allow or a
// list index outside 1..MaxIndex are refused with a *ParseError.
func Parse(body []byte, lim Limits) (*Form, error) {
	lim = lim.withDefaults()
	f := &Form{values: map[string]string{}, members: map[string][]int{}, entries: map[string][]int{}}
	s := string(body)
	n := 0
	for s != "" {
		var pair string
		pair, s, _ = strings.Cut(s, "&")
		if pair == "" {
			continue
		}
		n++
		if n > lim.MaxParams {
			return nil, &ParseError{fmt.Sprintf("more than %d parameters", lim.MaxParams)}
		}
		rawName, rawValue, _ := strings.Cut(pair, "=")
		if len(rawName) > 3*lim.MaxNameLen {
			return nil, &ParseError{"a parameter name is too long"}
		}
		name, err := url.QueryUnescape(rawName)
		if err != nil {
			return nil, &ParseError{"a parameter name does not decode"}
		}
		value, err := url.QueryUnescape(rawValue)
		if err != nil {
			return nil, &ParseError{"the value of " + quote(name) + " does not decode"}
		}
		if name == "" || len(name) > lim.MaxNameLen {
			return nil, &ParseError{"a parameter name is empty or too long"}
		}
		if _, dup := f.values[name]; dup {
			return nil, &ParseError{"parameter " + quote(name) + " is given more than once"}
		}
		f.values[name] = value
		if err := f.index(name, lim.MaxIndex); err != nil {
			return nil, err
		}
	}
	for _, m := range []map[string][]int{f.members, f.entries} {
		for k, idx := range m {
			sort.Ints(idx)
			m[k] = dedupe(idx)
		}
	}
	return f, nil
}

// index records every list position a name passes through:
// "A.member.2.B.member.1.C" is in list "A" at 2 and in "A.member.2.B" at 1.
func (f *Form) index(name string, maxIndex int) error {
	for off := 0; off < len(name); {
		i := strings.IndexByte(name[off:], '.')
		if i < 0 {
			return nil
		}
		dot := off + i
		rest := name[dot+1:]
		var m map[string][]int
		var word string
		switch {
		case strings.HasPrefix(rest, "member."):
			m, word = f.members, "member."
		case strings.HasPrefix(rest, "entry."):
			m, word = f.entries, "entry."
		default:
			off = dot + 1
			continue
		}
		numStart := dot + 1 + len(word)
		numEnd := numStart
		for numEnd < len(name) && name[numEnd] >= '0' && name[numEnd] <= '9' {
			numEnd++
		}
		if numEnd == numStart || (numEnd < len(name) && name[numEnd] != '.') {
			off = dot + 1
			continue
		}
		if numEnd-numStart > 6 {
			return &ParseError{"a list index in " + quote(name) + " is out of range"}
		}
		n, _ := strconv.Atoi(name[numStart:numEnd])
		if n < 1 || n > maxIndex {
			return &ParseError{"a list index in " + quote(name) + " is out of range"}
		}
		prefix := name[:dot]
		m[prefix] = append(m[prefix], n)
		off = numEnd
	}
	return nil
}

func dedupe(s []int) []int {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Action is the request's Action ("" when absent).
func (f *Form) Action() string { return f.values["Action"] }

// Version is the request's Version ("" when absent).
func (f *Form) Version() string { return f.values["Version"] }

// Len is the number of parameters.
func (f *Form) Len() int { return len(f.values) }

// String is the value of name and whether it was given.
func (f *Form) String(name string) (string, bool) {
	v, ok := f.values[name]
	return v, ok
}

// Has says whether name, or any member below it (name.…), was given.
func (f *Form) Has(name string) bool {
	if _, ok := f.values[name]; ok {
		return true
	}
	return len(f.members[name]) > 0 || len(f.entries[name]) > 0 || f.hasBelow(name+".")
}

func (f *Form) hasBelow(prefix string) bool {
	for k := range f.values {
		if strings.HasPrefix(k, prefix) {
			return true
		}
	}
	return false
}

// Members returns the names of the members of list name in index order:
// "name.member.1", "name.member.3" …. A list whose only member is empty
// (name= with no members) is an empty list, as botocore sends one.
func (f *Form) Members(name string) []string {
	idx := f.members[name]
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = name + ".member." + strconv.Itoa(n)
	}
	return out
}

// Strings returns the values of list name, in index order (nil when it
// has none).
func (f *Form) Strings(name string) []string {
	var out []string
	for _, m := range f.Members(name) {
		out = append(out, f.values[m])
	}
	return out
}

// Entries returns the prefixes of the entries of map name in index order
// ("name.entry.1" …); each has .key and .value below it.
func (f *Form) Entries(name string) []string {
	idx := f.entries[name]
	out := make([]string, len(idx))
	for i, n := range idx {
		out[i] = name + ".entry." + strconv.Itoa(n)
	}
	return out
}

// Int parses name as a decimal integer of at most 32 bits. ok is false when
// the name is absent; err is a *ValueError when it does not parse.
func (f *Form) Int(name string) (v int32, ok bool, err error) {
	s, ok := f.values[name]
	if !ok {
		return 0, false, nil
	}
	n, perr := strconv.ParseInt(strings.TrimSpace(s), 10, 32)
	if perr != nil {
		return 0, true, &ValueError{Name: name, Value: s}
	}
	return int32(n), true, nil
}

// Bool parses name as true or false (any case).
func (f *Form) Bool(name string) (v bool, ok bool, err error) {
	s, ok := f.values[name]
	if !ok {
		return false, false, nil
	}
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		return true, true, nil
	case "false":
		return false, true, nil
	}
	return false, true, &ValueError{Name: name, Value: s}
}

// Time parses name as an ISO 8601 timestamp as query clients send them
// (2016-10-03T23:00:00Z, with fractional seconds or an offset; without a zone
// it is UTC), or as epoch seconds.
func (f *Form) Time(name string) (v time.Time, ok bool, err error) {
	s, ok := f.values[name]
	if !ok {
		return time.Time{}, false, nil
	}
	t, perr := ParseTime(s)
	if perr != nil {
		return time.Time{}, true, &ValueError{Name: name, Value: s}
	}
	return t, true, nil
}

// ParseTime reads the timestamp forms Form.Time accepts.
func ParseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999999", "2006-01-02T15:04:05Z0700", "2006-01-02"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t.UTC(), nil
		}
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && f > -1e11 && f < 1e11 {
		sec := int64(f)
		return time.Unix(sec, int64((f-float64(sec))*1e9)).UTC(), nil
	}
	return time.Time{}, errors.New("not a timestamp")
}

// ValueError is a member whose value does not parse as its type.
type ValueError struct{ Name, Value string }

func (e *ValueError) Error() string {
	return "the value " + quote(e.Value) + " for parameter " + e.Name + " is invalid"
}

// quote shows an outside string in a message, cut at 128 bytes.
func quote(s string) string {
	if len(s) > 128 {
		s = s[:128] + "…"
	}
	return strconv.Quote(s)
}

// Quoted shows a caller's string in a message in single quotes, as IAM and
// STS write values (…Value 'x' at 'roleName'…), cut at 128 bytes, with
// what is not printable escaped.
func Quoted(s string) string {
	if len(s) > 128 {
		s = s[:128] + "…"
	}
	q := strconv.Quote(s)
	return "'" + q[1:len(q)-1] + "'"
}
