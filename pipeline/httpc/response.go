package httpc

import (
	"bufio"
	"errors"
	"io"
	"net/http/httputil"
	"strings"
	"time"

	"github.com/mce-run/mce/internal/wire"
)

// maxHeaderBytes caps the response head a container may send: the status
// line and header fields of the answer and of any 1xx answers before it,
// counted together. The trailer section of a chunked body has a cap of its
// own, the same size.
const maxHeaderBytes = 64 << 10

// Errors of a malformed answer. They end up in a ModelError ("got no valid
// response from container ...").
var (
	errHeaderTooLarge  = errors.New("httpc: container response header exceeds 64 KiB")
	errStatusLine      = errors.New("httpc: malformed HTTP status line from container")
	errHeaderLine      = errors.New("httpc: malformed HTTP header line from container")
	errHeaderValue     = errors.New("httpc: invalid character in HTTP header value from container")
	errContentLength   = errors.New("httpc: bad Content-Length from container")
	errTransferCoding  = errors.New("httpc: unsupported Transfer-Encoding from container")
	errUnsolicitedData = errors.New("httpc: data from container after its response")
)

// bodyMode is how a response body is delimited.
type bodyMode uint8

const (
	bodyNone    bodyMode = iota // no body (1xx, 204, 304, HEAD)
	bodyLength                  // Content-Length bytes
	bodyChunked                 // Transfer-Encoding: chunked
	bodyEOF                     // until the container closes the connection
)

// response is what readResponse got from a container.
type response struct {
	status      int
	contentType string // the first Content-Type field, "" when none
	customAttrs string // the first X-Amzn-SageMaker-Custom-Attributes field
	// newSession and closedSession are the first
	// X-Amzn-SageMaker-New-Session-Id and -Closed-Session-Id fields.
	newSession, closedSession string
	announced                 int64  // Content-Length, -1 when not announced
	tooBig                    bool   // a 2xx body over the cap (not, or not wholly, read)
	errBody                   string // the body of a non-2xx answer, clipped
	// gotBytes reports whether any byte of an answer was read: a failure
	// before that, on a reused connection, is the idle-close race.
	gotBytes bool
	// streamed reports whether the body went to a Streamer.
	streamed bool
	// reusable reports whether the exchange ended cleanly at the end of the
	// body and the container allows another request on the connection.
	reusable bool
}

// head is the parsed status line and header section of one answer.
type head struct {
	status    int
	http10    bool
	length    int64 // -1 when no Content-Length
	chunked   bool
	close     bool // Connection: close
	keepAlive bool // Connection: keep-alive (matters for HTTP/1.0)
	ct, attrs string
	// newSession, closedSession: the stateful sessions' answer headers.
	newSession, closedSession string
	seenCT                    bool
	seenAttrs                 bool
	seenTE                    bool
	badTE                     bool // more than one Transfer-Encoding, or not "chunked"
	seenLength                bool
}

// readResponse reads one answer to a request with method from br: any 1xx
// informational answers (skipped, except 101), the final status line and
// header, and the body. A 2xx body goes to out, capped at limit bytes (the
// rest is left unread and tooBig set); the body of another status is
// clipped into errBody and at most errorBodyDrain more bytes of it are
// drained. lastCT is a Content-Type string seen before on this connection,
// reused when the container sends the same value again so that no string is
// allocated. b is where the body reader lives (it is reset here), so that
// it need not be allocated. It never reads more than the caps allow: maxHeaderBytes of head,
// limit+1 bytes of 2xx body (plus the chunk framing), errorBodyDrain bytes
// of error body and maxHeaderBytes of trailer.
func readResponse(br *bufio.Reader, method string, limit int, out *buffer, lastCT string, b *body) (response, error) {
	return readResponseTo(br, method, limit, out, lastCT, b, time.Time{}, nil)
}

// readResponseTo is readResponse, except that with a sink a 2xx body is not
// read into out but handed to the sink as it arrives, without a cap on its
// length (deadline, the exchange's, bounds it and is passed on to the sink).
func readResponseTo(br *bufio.Reader, method string, limit int, out *buffer, lastCT string, b *body, deadline time.Time, sink Streamer) (response, error) {
	rsp := response{announced: -1}
	if _, err := br.Peek(1); err != nil {
		return rsp, err
	}
	rsp.gotBytes = true

	budget := maxHeaderBytes
	var h head
	for {
		h = head{length: -1}
		if err := readHead(br, &h, &budget, lastCT); err != nil {
			return rsp, err
		}
		// 1xx answers other than 101 Switching Protocols are interim:
		// the real one follows (100 Continue, 103 Early Hints).
		if h.status >= 200 || h.status == 101 {
			break
		}
	}
	if h.seenTE {
		if h.http10 {
			// Transfer-Encoding is not HTTP/1.0 (RFC 9112 §6.1): it is
			// ignored, as net/http does, and the connection closed.
			h.chunked, h.close = false, true
		} else if h.badTE {
			return rsp, errTransferCoding
		}
	}
	rsp.status = h.status
	rsp.contentType = h.ct
	rsp.customAttrs = h.attrs
	rsp.newSession, rsp.closedSession = h.newSession, h.closedSession

	*b = body{br: br}
	switch {
	case method == "HEAD" || h.status < 200 || h.status == 204 || h.status == 304:
		b.mode = bodyNone
	case h.chunked:
		b.mode = bodyChunked
		// A length next to chunked is ignored (RFC 9112 §6.3), and such
		// a connection is not trusted with another request.
		h.close = h.close || h.seenLength
	case h.length >= 0:
		b.mode, b.n = bodyLength, h.length
		rsp.announced = h.length
	default:
		b.mode = bodyEOF
		h.close = true
	}
	if h.status == 101 || (h.http10 && !h.keepAlive) {
		h.close = true
	}

	if h.status >= 200 && h.status < 300 && sink != nil {
		rsp.streamed = true
		if err := sink.Stream(StreamHead{ContentType: rsp.contentType, CustomAttributes: rsp.customAttrs, Deadline: deadline}, b); err != nil {
			return rsp, err
		}
	} else if h.status >= 200 && h.status < 300 {
		tooBig, err := readCapped(out, b, rsp.announced, limit)
		if err != nil {
			return rsp, err
		}
		rsp.tooBig = tooBig
	} else {
		if cap(out.b) < MaxErrorBody {
			out.b = make([]byte, 0, MaxErrorBody)
		}
		msg := out.b[:MaxErrorBody]
		n, err := io.ReadFull(b, msg)
		if err == nil {
			_, err = io.CopyN(io.Discard, b, errorBodyDrain)
			if err == io.EOF {
				err = nil
			}
		} else if err == io.EOF || (err == io.ErrUnexpectedEOF && b.done()) {
			err = nil
		}
		rsp.errBody = clip(msg[:n])
		out.b = out.b[:0]
		if err != nil {
			// The status is known: report it, with the connection
			// closed rather than failing the call over an error body.
			return rsp, nil
		}
	}
	rsp.reusable = !h.close && !rsp.tooBig && b.done() && br.Buffered() == 0
	return rsp, nil
}

// readHead reads a status line and the header fields after it into h,
// charging every byte to budget.
func readHead(br *bufio.Reader, h *head, budget *int, lastCT string) error {
	line, err := readLine(br, budget)
	if err != nil {
		return err
	}
	if err := parseStatusLine(line, h); err != nil {
		return err
	}
	for {
		line, err := readLine(br, budget)
		if err != nil {
			return err
		}
		if len(line) == 0 {
			return nil
		}
		if err := parseField(line, h, lastCT); err != nil {
			return err
		}
	}
}

// readLine returns the next line without its CRLF (or bare LF), charging
// its length to budget. The line is valid until the next read from br.
func readLine(br *bufio.Reader, budget *int) ([]byte, error) {
	line, err := br.ReadSlice('\n')
	if err == bufio.ErrBufferFull {
		// Longer than br's buffer: gather it, within the budget.
		long := append([]byte(nil), line...)
		for err == bufio.ErrBufferFull {
			if len(long) > *budget {
				return nil, errHeaderTooLarge
			}
			line, err = br.ReadSlice('\n')
			long = append(long, line...)
		}
		line = long
	}
	if len(line) > *budget {
		return nil, errHeaderTooLarge
	}
	*budget -= len(line)
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	line = line[:len(line)-1]
	if n := len(line); n > 0 && line[n-1] == '\r' {
		line = line[:n-1]
	}
	return line, nil
}

// parseStatusLine parses "HTTP/1.1 200 OK" (or HTTP/1.0; the reason phrase
// may be empty, and so may the space before it).
func parseStatusLine(line []byte, h *head) error {
	if len(line) < 12 || string(line[:7]) != "HTTP/1." || line[8] != ' ' {
		return errStatusLine
	}
	switch line[7] {
	case '0':
		h.http10 = true
	case '1':
	default:
		return errStatusLine
	}
	status := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return errStatusLine
		}
		status = status*10 + int(c-'0')
	}
	if status < 100 {
		return errStatusLine
	}
	if len(line) > 12 && (line[12] != ' ' || !validValue(line[13:])) {
		return errStatusLine
	}
	h.status = status
	return nil
}

// parseField parses one "Name: value" header line into h; only the fields
// Result reports are kept, but every line must be well formed.
func parseField(line []byte, h *head, lastCT string) error {
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !isTokenChar(c) { // also rejects obs-fold and "Name :"
			return errHeaderLine
		}
	}
	if colon <= 0 {
		return errHeaderLine
	}
	name, value := line[:colon], trimOWS(line[colon+1:])
	if !validValue(value) {
		return errHeaderValue
	}
	switch len(name) {
	case len("content-type"):
		if !h.seenCT && equalFold(name, "content-type") {
			h.seenCT = true
			if string(value) == lastCT {
				h.ct = lastCT
			} else {
				h.ct = string(value)
			}
		}
	case len("content-length"):
		if equalFold(name, "content-length") {
			n, ok := parseLength(value)
			if !ok || (h.seenLength && n != h.length) {
				return errContentLength
			}
			h.seenLength, h.length = true, n
		}
	case len("transfer-encoding"):
		if equalFold(name, "transfer-encoding") {
			// Judged once the head is read: HTTP/1.0 answers ignore it.
			h.badTE = h.badTE || h.seenTE || !equalFold(value, "chunked")
			h.seenTE, h.chunked = true, true
		}
	case len("connection"):
		if equalFold(name, "connection") {
			for len(value) > 0 {
				var tok []byte
				tok, value = cutComma(value)
				switch tok = trimOWS(tok); {
				case equalFold(tok, "close"):
					h.close = true
				case equalFold(tok, "keep-alive"):
					h.keepAlive = true
				}
			}
		}
	case len(wire.HeaderCustomAttributes): // also len(wire.HeaderClosedSessionID)
		switch {
		case !h.seenAttrs && equalFold(name, lowerCustomAttributes):
			h.seenAttrs = true
			h.attrs = string(value)
		case h.closedSession == "" && equalFold(name, lowerClosedSession):
			h.closedSession = string(value)
		}
	case len(wire.HeaderNewSessionID):
		if h.newSession == "" && equalFold(name, lowerNewSession) {
			h.newSession = string(value)
		}
	}
	return nil
}

// body reads a response body as its head delimits it, and says whether it
// reached the body's end.
type body struct {
	br      *bufio.Reader
	mode    bodyMode
	n       int64     // bytes left, for bodyLength
	chunked io.Reader // for bodyChunked, made on first read
	end     bool      // the end was reached (chunked, EOF)
}

func (b *body) done() bool {
	switch b.mode {
	case bodyNone:
		return true
	case bodyLength:
		return b.n == 0
	default:
		return b.end
	}
}

func (b *body) Read(p []byte) (int, error) {
	switch b.mode {
	case bodyNone:
		return 0, io.EOF
	case bodyLength:
		if b.n == 0 {
			return 0, io.EOF
		}
		if int64(len(p)) > b.n {
			p = p[:b.n]
		}
		n, err := b.br.Read(p)
		b.n -= int64(n)
		if err == io.EOF && b.n > 0 {
			err = io.ErrUnexpectedEOF
		}
		return n, err
	case bodyChunked:
		if b.end {
			return 0, io.EOF
		}
		if b.chunked == nil {
			b.chunked = httputil.NewChunkedReader(b.br)
		}
		n, err := b.chunked.Read(p)
		if err == io.EOF {
			// The last chunk: the trailer section and its empty line
			// follow; they are read and ignored.
			budget := maxHeaderBytes
			for {
				line, lerr := readLine(b.br, &budget)
				if lerr != nil {
					return n, lerr
				}
				if len(line) == 0 {
					break
				}
				if colon := indexByte(line, ':'); colon <= 0 || !validValue(line[colon+1:]) {
					return n, errHeaderLine
				}
			}
			b.end = true
		}
		return n, err
	default:
		n, err := b.br.Read(p)
		if err == io.EOF {
			b.end = true
		}
		return n, err
	}
}

// validValue reports whether v may be a header field value (or reason
// phrase): no control characters but horizontal tab, so no CR, LF or NUL
// can reach a header mce writes.
func validValue[T string | []byte](v T) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}

// isTokenChar reports whether c may appear in a header field name (RFC 9110
// token).
func isTokenChar(c byte) bool { return tokenChars[c] }

var tokenChars = func() (t [256]bool) {
	for c := range 256 {
		t[c] = 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
			strings.IndexByte("!#$%&'*+-.^_`|~", byte(c)) >= 0
	}
	return t
}()

// validToken reports whether s is a non-empty token (header name, method).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTokenChar(s[i]) {
			return false
		}
	}
	return true
}

// lowerCustomAttributes is the lower-case name equalFold compares with.
var lowerCustomAttributes = strings.ToLower(wire.HeaderCustomAttributes)

// lowerNewSession and lowerClosedSession are the stateful sessions' answer
// headers in lower case.
var (
	lowerNewSession    = strings.ToLower(wire.HeaderNewSessionID)
	lowerClosedSession = strings.ToLower(wire.HeaderClosedSessionID)
)

// equalFold reports whether b equals lower, a lower-case ASCII string,
// ignoring ASCII case.
func equalFold[T string | []byte](b T, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

func trimOWS(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t') {
		b = b[:len(b)-1]
	}
	return b
}

func cutComma(b []byte) (before, after []byte) {
	if i := indexByte(b, ','); i >= 0 {
		return b[:i], b[i+1:]
	}
	return b, nil
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// parseLength parses a Content-Length value: decimal digits only.
func parseLength(v []byte) (int64, bool) {
	if len(v) == 0 || len(v) > 18 {
		return 0, false
	}
	var n int64
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
