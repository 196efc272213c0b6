package dataplane

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/url"

	"golang.org/x/net/http/httpguts"
)

// The loop reads the heads it takes (see plainHead) itself instead of with
// http.ReadRequest, whose textproto reader allocates the request, a string
// per key and value, the URL and two body readers (11 allocations of the
// 54 a call makes over TCP, and a tenth of mce's CPU under load): here the
// whole head becomes one string whose substrings are the keys and values,
// and the body is read through a reader the connection keeps.
//
// It reads only what it can read exactly as net/http does: a head with a
// byte textproto would refuse or read otherwise, a header net/http rewrites
// (Pragma, Trailer), a Content-Length that is not plain digits or more
// fields than maxHeadFields goes to http.ReadRequest, which reads the same
// bytes (nothing is consumed until the head is taken) and gives net/http's
// answer. FuzzHead and TestHeadLikeReadRequest hold the two readers to the
// same result.

// maxHeadFields bounds the fields the loop's reader takes; a head with more
// is http.ReadRequest's (a SigV4-signed call from boto3 has about ten).
const maxHeadFields = 32

type span struct{ k0, k1, v0, v1 int }

// headReader is a connection's reader of heads, reused call after call.
type headReader struct {
	scratch []byte
	fields  [maxHeadFields]span
}

// read reads the head b (the request line to the blank line, its last CRLF
// included), which plainHead took and InvokeEndpointLine's request line
// begins, into r, as http.ReadRequest and net/http's server would (Host
// moved out of the header into r.Host). It reports false, having changed
// nothing, when the head is not one it reads exactly so.
func (h *headReader) read(b []byte, r *http.Request) bool {
	lineEnd := indexCRLF(b)
	if lineEnd < 0 {
		return false
	}
	if cap(h.scratch) < len(b) {
		h.scratch = make([]byte, len(b), readBufSize)
	}
	s := h.scratch[:len(b)]
	copy(s, b)

	// The request line: InvokeEndpointLine's "POST <path> HTTP/1.1".
	const method, proto = "POST ", " HTTP/1.1"
	if lineEnd < len(method)+1+len(proto) || string(s[:len(method)]) != method ||
		string(s[lineEnd-len(proto):lineEnd]) != proto {
		return false
	}
	uri0, uri1 := len(method), lineEnd-len(proto)
	for _, c := range s[uri0:uri1] {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '.' || c == '~' || c == '/') {
			return false // a path url.ParseRequestURI would do more with than keep
		}
	}
	if s[uri0] != '/' || uri1-uri0 > 1 && s[uri0+1] == '/' {
		return false
	}

	// The fields, each "Key:" then its value, canonicalized in the copy.
	n := 0
	hostField, lengthField := -1, -1
	for i := lineEnd + 2; ; {
		end := indexCRLF(s[i:])
		if end < 0 {
			return false
		}
		end += i
		if end == i {
			break // the blank line
		}
		if n == maxHeadFields {
			return false
		}
		colon := bytes.IndexByte(s[i:end], ':')
		if colon <= 0 {
			return false
		}
		colon += i
		upper := true
		for j := i; j < colon; j++ {
			c := s[j]
			if !httpguts.IsTokenRune(rune(c)) {
				return false // textproto refuses it, or keeps it uncanonicalized
			}
			if upper && 'a' <= c && c <= 'z' {
				c -= 'a' - 'A'
			} else if !upper && 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			s[j] = c
			upper = c == '-'
		}
		v0, v1 := colon+1, end
		for j := v0; j < v1; j++ {
			if !validHeaderValueByte(s[j]) {
				return false
			}
		}
		for v0 < v1 && (s[v0] == ' ' || s[v0] == '\t') {
			v0++
		}
		for v1 > v0 && (s[v1-1] == ' ' || s[v1-1] == '\t') {
			v1--
		}
		switch string(s[i:colon]) {
		case "Host":
			if hostField >= 0 {
				return false
			}
			hostField = n
		case "Content-Length":
			if lengthField >= 0 {
				return false
			}
			lengthField = n
		case "Pragma", "Trailer":
			return false // net/http rewrites the header around these
		}
		h.fields[n] = span{i, colon, v0, v1}
		n++
		i = end + 2
	}
	if hostField < 0 || lengthField < 0 {
		return false
	}
	f := h.fields[lengthField]
	if f.v1 == f.v0 || f.v1-f.v0 > 18 {
		return false // empty, or one ParseUint might refuse: net/http's error
	}
	length := int64(0)
	for _, c := range s[f.v0:f.v1] {
		if c < '0' || c > '9' {
			return false
		}
		length = length*10 + int64(c-'0')
	}

	// One string for the whole head; the keys, values and path are its.
	str := string(s)
	vals := make([]string, n)
	hdr := make(http.Header, n)
	for k := 0; k < n; k++ {
		f := h.fields[k]
		if k == hostField {
			continue
		}
		key, val := str[f.k0:f.k1], str[f.v0:f.v1]
		if vv, ok := hdr[key]; ok {
			hdr[key] = append(vv, val)
			continue
		}
		vals[k] = val
		hdr[key] = vals[k : k+1 : k+1]
	}
	f = h.fields[hostField]
	uri := str[uri0:uri1]
	*r = http.Request{
		Method:        http.MethodPost,
		URL:           &url.URL{Path: uri},
		Proto:         "HTTP/1.1",
		ProtoMajor:    1,
		ProtoMinor:    1,
		Header:        hdr,
		ContentLength: length,
		Close:         httpguts.HeaderValuesContainsToken(hdr["Connection"], "close"),
		Host:          str[f.v0:f.v1],
		RequestURI:    uri,
	}
	if length == 0 {
		r.Body = http.NoBody
	}
	return true
}

// indexCRLF is the index of b's first line end, a CRLF; -1 when there is
// none or the first LF is bare (textproto ends a line there: the reader
// leaves such a head to http.ReadRequest).
func indexCRLF(b []byte) int {
	i := bytes.IndexByte(b, '\n')
	if i < 1 || b[i-1] != '\r' {
		return -1
	}
	return i - 1
}

// validHeaderValueByte is textproto's rule for a byte of a field's value:
// VCHAR, SP, HTAB or obs-text.
func validHeaderValueByte(c byte) bool {
	return c >= 0x20 && c != 0x7f || c == '\t'
}

// limitedBody reads a body of a known length from the connection's buffer,
// as net/http's body reader does: io.ErrUnexpectedEOF when the connection
// ends first, and io.EOF after that.
type limitedBody struct {
	br     *bufio.Reader
	left   int64
	sawEOF bool
}

func (l *limitedBody) Read(p []byte) (int, error) {
	if l.left <= 0 || l.sawEOF {
		return 0, io.EOF
	}
	if int64(len(p)) > l.left {
		p = p[:l.left]
	}
	n, err := l.br.Read(p)
	l.left -= int64(n)
	if err == io.EOF {
		l.sawEOF = true
		if l.left > 0 {
			err = io.ErrUnexpectedEOF
		}
	}
	return n, err
}

func (l *limitedBody) Close() error { return nil }
