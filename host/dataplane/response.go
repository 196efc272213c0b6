package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// The answer is written by the rules of net/http's server (its response
// and chunkWriter, Go 1.26), restricted to what the loop takes: HTTP/1.1
// POST requests with a Content-Length, no 100-continue, no hijacking, no
// trailers. The differential test (dataplane_test.go) holds the bytes to
// net/http's for the answers mce's handlers write.

// bufferBeforeChunkingSize is net/http's: an answer without a
// Content-Length is chunked once the handler wrote more than this.
const bufferBeforeChunkingSize = 2048

// response is the loop's http.ResponseWriter, one per connection, reset
// for each request.
type response struct {
	c             *conn
	req           *http.Request
	handlerHeader http.Header
	calledHeader  bool
	wroteHeader   bool
	handlerDone   bool
	status        int
	contentLength int64 // from the handler's Content-Length; -1 when none
	written       int64
	wantsClose    bool // the client sent Connection: close

	closeAfterReply     bool
	requestBodyLimitHit bool

	w  *bufio.Writer // over cw, bufferBeforeChunkingSize
	cw chunkWriter

	clenBuf [20]byte
	dateBuf [len(http.TimeFormat)]byte
}

func (w *response) reset(req *http.Request) {
	// The last request's header map, emptied: its handler has returned and
	// its answer is written, so nothing reads it any more (the loop takes
	// only handlers that keep nothing of the ResponseWriter, see Fast).
	h := w.cw.header
	if h == nil {
		h = w.handlerHeader
	}
	if h == nil {
		h = make(http.Header)
	} else {
		clear(h)
	}
	*w = response{c: w.c, w: w.w, req: req, handlerHeader: h, contentLength: -1,
		wantsClose: hasToken(req.Header.Get("Connection"), "close")}
	w.cw = chunkWriter{res: w}
	w.w.Reset(&w.cw)
}

func (w *response) Header() http.Header {
	if w.handlerHeader == nil {
		// WriteHeader handed the map to the answer (see there): the
		// handler gets a copy, whose changes reach no wire, as in net/http.
		w.handlerHeader = w.cw.header.Clone()
	}
	if w.cw.header == nil && w.wroteHeader && !w.cw.wroteHeader {
		// Accessed between the logical and the physical write of the
		// header: snapshot what was logically written, as net/http does.
		w.cw.header = w.handlerHeader.Clone()
	}
	w.calledHeader = true
	return w.handlerHeader
}

func (w *response) WriteHeader(code int) {
	if w.wroteHeader {
		w.c.srv.logf("http: superfluous response.WriteHeader call")
		return
	}
	if code < 100 || code > 999 {
		panic(fmt.Sprintf("invalid WriteHeader code %v", code))
	}
	if code >= 100 && code <= 199 && code != http.StatusSwitchingProtocols {
		// An informational answer goes out at once, as net/http sends it.
		writeStatusLine(w.c.bw, code)
		w.handlerHeader.WriteSubset(w.c.bw, excludedHeadersNoBody)
		w.c.bw.Write(crlf)
		w.c.bw.Flush()
		return
	}
	if g := w.c.srv.UnreadBodyGrace; g > 0 && !w.c.bd.sawEOF {
		w.Header().Set("Connection", "close")
		w.c.rdl = time.Now().Add(g)
	}
	w.wroteHeader = true
	w.status = code
	cl := hget(w.handlerHeader, "Content-Length")
	badLength := false
	if cl != "" {
		v, err := strconv.ParseInt(cl, 10, 64)
		badLength = err != nil || v < 0
		if !badLength {
			w.contentLength = v
		}
	}
	if w.calledHeader && w.cw.header == nil {
		// net/http answers with a clone, so that the handler's later
		// changes reach no wire. Handing the map over does the same
		// without the copy; Header makes one if the handler asks again.
		if badLength {
			w.cw.header = w.handlerHeader.Clone()
		} else {
			w.cw.header, w.handlerHeader = w.handlerHeader, nil
		}
	}
	if badLength {
		w.c.srv.logf("http: invalid Content-Length of %q", cl)
		w.handlerHeader.Del("Content-Length")
	}
}

var excludedHeadersNoBody = map[string]bool{"Content-Length": true, "Transfer-Encoding": true}

// BoundsUnreadBody reports whether the loop bounds a body left unread
// (Server.UnreadBodyGrace), so that a handler's own bound can stand aside.
func (w *response) BoundsUnreadBody() bool { return w.c.srv.UnreadBodyGrace > 0 }

func (w *response) Write(p []byte) (int, error) { return w.write(len(p), p, "") }

func (w *response) WriteString(s string) (int, error) { return w.write(len(s), nil, s) }

func (w *response) write(n int, b []byte, s string) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	if n == 0 {
		return 0, nil
	}
	if !bodyAllowedForStatus(w.status) {
		return 0, http.ErrBodyNotAllowed
	}
	w.written += int64(n)
	if w.contentLength != -1 && w.written > w.contentLength {
		return 0, http.ErrContentLength
	}
	if b != nil {
		return w.w.Write(b)
	}
	return w.w.WriteString(s)
}

// Flush sends what is buffered (http.Flusher).
func (w *response) Flush() { w.FlushError() }

// FlushError is Flush, with the error (http.ResponseController).
func (w *response) FlushError() error {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	err := w.w.Flush()
	e2 := w.cw.flush()
	if err == nil {
		err = e2
	}
	return err
}

// SetReadDeadline and SetWriteDeadline are the connection's, for
// http.ResponseController; a read deadline is applied at the next read of
// the socket (conn.rdl).
func (w *response) SetReadDeadline(t time.Time) error {
	w.c.rdl = t
	return nil
}
func (w *response) SetWriteDeadline(t time.Time) error { return w.c.nc.SetWriteDeadline(t) }

func (w *response) finishRequest() {
	w.handlerDone = true
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.w.Flush()
	w.cw.close()
	w.c.bw.Flush()
	w.req.Body.Close()
}

func (w *response) shouldReuseConnection() bool {
	if w.closeAfterReply {
		return false
	}
	if w.contentLength != -1 && bodyAllowedForStatus(w.status) && w.contentLength != w.written {
		return false // did not write what it announced
	}
	if w.c.werr != nil {
		return false
	}
	return !w.c.bd.closedEarly
}

func (w *response) requestTooLarge() {
	w.closeAfterReply = true
	w.requestBodyLimitHit = true
	if !w.wroteHeader {
		w.Header().Set("Connection", "close")
	}
}

// chunkWriter writes the header on the first write of the body, and the
// body, chunked when it has no length.
type chunkWriter struct {
	res         *response
	header      http.Header // the handler's header, snapshot at WriteHeader when needed
	wroteHeader bool
	chunking    bool
}

func (cw *chunkWriter) Write(p []byte) (int, error) {
	if !cw.wroteHeader {
		cw.writeHeader(p)
	}
	bw := cw.res.c.bw
	if cw.chunking {
		if _, err := fmt.Fprintf(bw, "%x\r\n", len(p)); err != nil {
			cw.res.c.nc.Close()
			return 0, err
		}
	}
	n, err := bw.Write(p)
	if cw.chunking && err == nil {
		_, err = bw.Write(crlf)
	}
	if err != nil {
		cw.res.c.nc.Close()
	}
	return n, err
}

func (cw *chunkWriter) flush() error {
	if !cw.wroteHeader {
		cw.writeHeader(nil)
	}
	return cw.res.c.bw.Flush()
}

func (cw *chunkWriter) close() {
	if !cw.wroteHeader {
		cw.writeHeader(nil)
	}
	if cw.chunking {
		bw := cw.res.c.bw
		bw.WriteString("0\r\n") // the last chunk; no trailers on this path
		bw.WriteString("\r\n")
	}
}

// extraHeader is what net/http adds to the handler's header, in its order.
type extraHeader struct {
	contentType, connection, transferEncoding string
	date, contentLength                       []byte
}

func (h extraHeader) write(w *bufio.Writer) {
	if h.date != nil {
		w.WriteString("Date: ")
		w.Write(h.date)
		w.Write(crlf)
	}
	if h.contentLength != nil {
		w.WriteString("Content-Length: ")
		w.Write(h.contentLength)
		w.Write(crlf)
	}
	for i, v := range [...]string{h.contentType, h.connection, h.transferEncoding} {
		if v != "" {
			w.WriteString([...]string{"Content-Type", "Connection", "Transfer-Encoding"}[i])
			w.WriteString(": ")
			w.WriteString(v)
			w.Write(crlf)
		}
	}
}

// writeHeader decides the answer's framing and writes its head, by
// net/http's rules (chunkWriter.writeHeader): p is the first piece of the
// body, or all of it when the handler is done.
func (cw *chunkWriter) writeHeader(p []byte) {
	if cw.wroteHeader {
		return
	}
	cw.wroteHeader = true
	w := cw.res
	keepAlivesEnabled := !w.c.srv.shutting.Load()

	header := cw.header
	owned := header != nil
	if !owned {
		header = w.handlerHeader
	}
	var excludeHeader map[string]bool
	delHeader := func(key string) {
		if owned {
			header.Del(key)
			return
		}
		if _, ok := header[key]; !ok {
			return
		}
		if excludeHeader == nil {
			excludeHeader = make(map[string]bool)
		}
		excludeHeader[key] = true
	}
	var setHeader extraHeader

	te := hget(header, "Transfer-Encoding")
	hasTE := te != ""
	trailers := len(header["Trailer"]) > 0
	for k := range header {
		if strings.HasPrefix(k, http.TrailerPrefix) {
			trailers = true
		}
	}
	if trailers {
		// Trailers are not on this path; the handlers it serves set none.
		panic("dataplane: a handler on the loop set trailers")
	}

	if w.handlerDone && !hasTE && bodyAllowedForStatus(w.status) && !hhas(header, "Content-Length") {
		w.contentLength = int64(len(p))
		setHeader.contentLength = strconv.AppendInt(w.clenBuf[:0], int64(len(p)), 10)
	}
	hasCL := w.contentLength != -1

	if w.wantsClose {
		w.closeAfterReply = true
	}
	if hget(header, "Connection") == "close" || !keepAlivesEnabled {
		w.closeAfterReply = true
	}

	if w.req.ContentLength != 0 && !w.closeAfterReply {
		var discard, tooBig bool
		bd := &w.c.bd
		switch {
		case bd.closed:
			if !bd.sawEOF {
				w.closeAfterReply = true
			}
		case bd.left >= maxPostHandlerReadBytes:
			tooBig = true
		default:
			discard = true
		}
		if discard {
			err := io.EOF // a body read to its end: what CopyN would say, without its reader
			if !bd.sawEOF {
				_, err = io.CopyN(io.Discard, bd, maxPostHandlerReadBytes+1)
			}
			switch err {
			case nil:
				tooBig = true
			case http.ErrBodyReadAfterClose:
			case io.EOF:
				if bd.Close() != nil {
					w.closeAfterReply = true
				}
			default:
				w.closeAfterReply = true
			}
		}
		if tooBig {
			w.requestTooLarge()
			delHeader("Connection")
			setHeader.connection = "close"
		}
	}

	code := w.status
	if bodyAllowedForStatus(code) {
		_, haveType := header["Content-Type"]
		hasCE := len(header.Get("Content-Encoding")) > 0
		if !hasCE && !haveType && !hasTE && len(p) > 0 {
			setHeader.contentType = http.DetectContentType(p)
		}
	} else {
		for _, k := range suppressedHeaders(code) {
			delHeader(k)
		}
	}

	if !hhas(header, "Date") {
		setHeader.date = appendDate(w.dateBuf[:0], time.Now())
	}

	if hasCL && hasTE && te != "identity" {
		w.c.srv.logf("http: WriteHeader called with both Transfer-Encoding of %q and a Content-Length of %d", te, w.contentLength)
		delHeader("Content-Length")
		hasCL = false
	}

	switch {
	case !bodyAllowedForStatus(code) || code == http.StatusNoContent:
		delHeader("Transfer-Encoding")
	case hasCL:
		delHeader("Transfer-Encoding")
	case hasTE && te == "identity":
		cw.chunking = false
		w.closeAfterReply = true
		delHeader("Transfer-Encoding")
	default:
		cw.chunking = true
		setHeader.transferEncoding = "chunked"
		if hasTE && te == "chunked" {
			delHeader("Transfer-Encoding")
		}
	}
	if cw.chunking {
		delHeader("Content-Length")
	}

	// The Connection header: close when the connection closes after this
	// answer, unless the handler's header already says so.
	if w.closeAfterReply && (!keepAlivesEnabled || !hasToken(hget(cw.header, "Connection"), "close")) {
		delHeader("Connection")
		setHeader.connection = "close"
	}

	bw := w.c.bw
	writeStatusLine(bw, code)
	cw.header.WriteSubset(bw, excludeHeader)
	setHeader.write(bw)
	bw.Write(crlf)
}

// hget and hhas read a header key as written, without canonicalizing it,
// as net/http's server reads the handler's header.
func hget(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func hhas(h http.Header, key string) bool {
	_, ok := h[key]
	return ok
}

func writeStatusLine(bw *bufio.Writer, code int) {
	bw.WriteString("HTTP/1.1 ")
	if text := http.StatusText(code); text != "" {
		var scratch [3]byte
		bw.Write(strconv.AppendInt(scratch[:0], int64(code), 10))
		bw.WriteByte(' ')
		bw.WriteString(text)
		bw.WriteString("\r\n")
		return
	}
	fmt.Fprintf(bw, "%03d status code %d\r\n", code, code)
}

func bodyAllowedForStatus(status int) bool {
	switch {
	case status >= 100 && status <= 199, status == 204, status == 304:
		return false
	}
	return true
}

func suppressedHeaders(status int) []string {
	switch {
	case status == 304:
		return []string{"Content-Type", "Last-Modified", "Transfer-Encoding"} // RFC 7232 section 4.1
	case !bodyAllowedForStatus(status):
		return []string{"Content-Length", "Transfer-Encoding"}
	}
	return nil
}

// hasToken says whether v, a comma-separated list, holds token
// (ASCII case-insensitively), as net/http reads Connection.
func hasToken(v, token string) bool {
	if len(token) > len(v) || token == "" {
		return false
	}
	if v == token {
		return true
	}
	for sp := 0; sp <= len(v)-len(token); sp++ {
		if b := v[sp]; b != token[0] && b|0x20 != token[0] {
			continue
		}
		if sp > 0 && !isTokenBoundary(v[sp-1]) {
			continue
		}
		if endPos := sp + len(token); endPos != len(v) && !isTokenBoundary(v[endPos]) {
			continue
		}
		if strings.EqualFold(v[sp:sp+len(token)], token) {
			return true
		}
	}
	return false
}

func isTokenBoundary(b byte) bool { return b == ' ' || b == ',' || b == '\t' }

// dateStamp is the Date header's value for one second.
type dateStamp struct {
	sec int64
	b   [len(http.TimeFormat)]byte
}

// lastDate is the Date of the latest second an answer was written in:
// formatting it once a second, not once a call, saves about 1 % of the
// loop's CPU (docs/performance.md). The value is the same to the second.
var lastDate atomic.Pointer[dateStamp]

// appendDate appends now as http.TimeFormat.
func appendDate(dst []byte, now time.Time) []byte {
	sec := now.Unix()
	if d := lastDate.Load(); d != nil && d.sec == sec {
		return append(dst, d.b[:]...)
	}
	d := &dateStamp{sec: sec}
	now.UTC().AppendFormat(d.b[:0], http.TimeFormat)
	lastDate.Store(d)
	return append(dst, d.b[:]...)
}
