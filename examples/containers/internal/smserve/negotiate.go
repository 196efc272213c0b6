package smserve

import (
	"fmt"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"
)

// maxAcceptRanges bounds the work spent on one Accept header.
const maxAcceptRanges = 64

// MediaRange is one element of an Accept header: type/subtype (either may be "*") and its quality.
type MediaRange struct {
	Type, Subtype string
	Q             float64
}

// ParseAccept parses an Accept header value (RFC 9110 §12.5.1). Types are lower-cased, parameters other than
// q are ignored, and malformed elements (no slash, "*/json", a q outside 0–1) are skipped. At most 64
// ranges are returned.
func ParseAccept(h string) []MediaRange {
	var out []MediaRange
	for elem := range strings.SplitSeq(h, ",") {
		if len(out) == maxAcceptRanges {
			break
		}
		typ, params, _ := strings.Cut(elem, ";")
		t, s, ok := strings.Cut(strings.ToLower(strings.TrimSpace(typ)), "/")
		if !ok || !isToken(t) || !isToken(s) || (t == "*" && s != "*") {
			continue
		}
		mr := MediaRange{Type: t, Subtype: s, Q: 1}
		valid := true
		for p := range strings.SplitSeq(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if !strings.EqualFold(strings.TrimSpace(k), "q") {
				continue
			}
			q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil || !(q >= 0 && q <= 1) {
				valid = false
				break
			}
			mr.Q = q
		}
		if valid {
			out = append(out, mr)
		}
	}
	return out
}

// isToken reports whether s is a non-empty RFC 9110 token.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0:
		default:
			return false
		}
	}
	return true
}

// Negotiator decides a request's input media type and its response media type. Build it with
// NewNegotiator; it is immutable and safe for concurrent use.
type Negotiator struct {
	consumes []string
	produces []string
}

// NewNegotiator returns a Negotiator for a handler that reads the media types in consumes (the first is
// assumed when a request has no Content-Type) and writes those in produces (the first is the default).
// defaultAccept, normally Config.DefaultAccept, overrides the default output type; it must be one of
// produces, else the error wraps ErrConfig.
func NewNegotiator(consumes, produces []string, defaultAccept string) (Negotiator, error) {
	if len(consumes) == 0 || len(produces) == 0 {
		return Negotiator{}, fmt.Errorf("%w: a negotiator needs input and output media types", ErrConfig)
	}
	n := Negotiator{consumes: slices.Clone(consumes), produces: slices.Clone(produces)}
	if defaultAccept != "" {
		mt, _, err := mime.ParseMediaType(defaultAccept)
		i := slices.Index(n.produces, mt)
		if err != nil || i < 0 {
			return Negotiator{}, fmt.Errorf("%w: %s=%q is not one of the supported output types %s",
				ErrConfig, EnvDefaultAccept, defaultAccept, strings.Join(produces, ", "))
		}
		n.produces = append([]string{mt}, slices.Delete(n.produces, i, i+1)...)
	}
	return n, nil
}

// Consumes returns the accepted input types, the assumed one first.
func (n Negotiator) Consumes() []string { return slices.Clone(n.consumes) }

// Produces returns the output types, the default first.
func (n Negotiator) Produces() []string { return slices.Clone(n.produces) }

// RequestType returns the media type (lower-case, without parameters) of the request's Content-Type, or the
// first of consumes when it has none. Parameters such as "; charset=utf-8" are allowed; a charset other than
// UTF-8 or US-ASCII, a malformed header or an unlisted type gives a 415 *Error wrapping
// ErrUnsupportedMediaType.
func (n Negotiator) RequestType(r *http.Request) (string, error) {
	ct := r.Header.Get("Content-Type")
	if strings.TrimSpace(ct) == "" {
		return n.consumes[0], nil
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err != nil {
		return "", n.unsupported("malformed Content-Type %q", ct)
	}
	if !slices.Contains(n.consumes, mt) {
		return "", n.unsupported("unsupported Content-Type %q", ct)
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "us-ascii") {
		return "", n.unsupported("unsupported charset %q in Content-Type", cs)
	}
	return mt, nil
}

func (n Negotiator) unsupported(format string, a ...any) error {
	return &Error{
		Status:  http.StatusUnsupportedMediaType,
		Message: fmt.Sprintf(format, a...) + "; supported: " + strings.Join(n.consumes, ", "),
		Err:     ErrUnsupportedMediaType,
	}
}

// ResponseType picks the response media type from the request's Accept headers: the supported type with
// the highest quality, ties going to the more specific range, then to the default order. An empty Accept,
// "*/*", or one with no well-formed range gives the default. If every supported type has quality 0 it
// returns a 406 *Error wrapping ErrNotAcceptable.
func (n Negotiator) ResponseType(r *http.Request) (string, error) {
	values := r.Header.Values("Accept")
	if len(values) == 0 {
		return n.produces[0], nil
	}
	ranges := ParseAccept(strings.Join(values, ","))
	if len(ranges) == 0 {
		return n.produces[0], nil
	}
	best, bestQ, bestSpec := "", 0.0, -1
	for _, p := range n.produces {
		q, spec := quality(ranges, p)
		if q > bestQ || (q == bestQ && q > 0 && spec > bestSpec) {
			best, bestQ, bestSpec = p, q, spec
		}
	}
	if best == "" {
		return "", &Error{
			Status: http.StatusNotAcceptable,
			Message: fmt.Sprintf("cannot produce any type in Accept %q; supported: %s",
				strings.Join(values, ", "), strings.Join(n.produces, ", ")),
			Err: ErrNotAcceptable,
		}
	}
	return best, nil
}

// quality returns the q of the most specific range matching mediaType and that range's specificity
// (2 exact, 1 type/*, 0 */*); (0, -1) when none matches.
func quality(ranges []MediaRange, mediaType string) (q float64, spec int) {
	t, s, _ := strings.Cut(mediaType, "/")
	spec = -1
	for _, r := range ranges {
		var sp int
		switch {
		case r.Type == t && r.Subtype == s:
			sp = 2
		case r.Type == t && r.Subtype == "*":
			sp = 1
		case r.Type == "*" && r.Subtype == "*":
			sp = 0
		default:
			continue
		}
		if sp > spec {
			q, spec = r.Q, sp
		}
	}
	return q, spec
}

// Accept is the start of every /invocations handler: the request's content
// type (415 if unsupported), the answer's type from Accept (406), and the
// body read under its cap (413), in that order.
func (n Negotiator) Accept(w http.ResponseWriter, r *http.Request) (in, out string, body []byte, err error) {
	if in, err = n.RequestType(r); err != nil {
		return "", "", nil, err
	}
	if out, err = n.ResponseType(r); err != nil {
		return "", "", nil, err
	}
	if body, err = ReadBody(w, r); err != nil {
		return "", "", nil, err
	}
	return in, out, body, nil
}
