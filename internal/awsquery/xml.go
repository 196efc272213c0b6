package awsquery

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"strconv"
	"time"
)

// ContentType is the Content-Type of query-protocol answers.
const ContentType = "text/xml"

// Writer builds the XML of one answer. Elements are written in the order
// they are opened; text is escaped. The zero value is not usable: use
// NewResponse.
type Writer struct {
	buf   bytes.Buffer
	stack []string
	// action and requestID close the answer in Bytes.
	action, requestID string
}

// NewResponse starts <ActionResponse xmlns=namespace><ActionResult>.
func NewResponse(action, namespace, requestID string) *Writer {
	w := &Writer{action: action, requestID: requestID}
	w.buf.WriteString(xml.Header[:len(xml.Header)-1])
	w.buf.WriteString("<" + action + "Response xmlns=\"")
	xml.EscapeText(&w.buf, []byte(namespace))
	w.buf.WriteString("\">")
	w.Start(action + "Result")
	return w
}

// Start opens element name.
func (w *Writer) Start(name string) {
	w.buf.WriteString("<" + name + ">")
	w.stack = append(w.stack, name)
}

// End closes the element opened last.
func (w *Writer) End() {
	name := w.stack[len(w.stack)-1]
	w.stack = w.stack[:len(w.stack)-1]
	w.buf.WriteString("</" + name + ">")
}

// Text writes <name>text</name>.
func (w *Writer) Text(name, text string) {
	w.buf.WriteString("<" + name + ">")
	xml.EscapeText(&w.buf, []byte(text))
	w.buf.WriteString("</" + name + ">")
}

// Float writes <name>v</name> in the shortest form that reads back as v.
func (w *Writer) Float(name string, v float64) {
	w.Text(name, strconv.FormatFloat(v, 'g', -1, 64))
}

// Time writes <name> as ISO 8601 in UTC with milliseconds, as AWS does.
func (w *Writer) Time(name string, t time.Time) {
	w.Text(name, t.UTC().Format("2006-01-02T15:04:05.000Z"))
}

// Bytes closes the result and the response (with ResponseMetadata) and
// returns the document.
func (w *Writer) Bytes() []byte {
	for len(w.stack) > 0 {
		w.End()
	}
	w.Start("ResponseMetadata")
	w.Text("RequestId", w.requestID)
	w.End()
	w.buf.WriteString("</" + w.action + "Response>")
	return w.buf.Bytes()
}

// Send sends the document with status 200.
func (w *Writer) Send(rw http.ResponseWriter) {
	b := w.Bytes()
	rw.Header().Set("Content-Type", ContentType)
	rw.Header().Set("Content-Length", strconv.Itoa(len(b)))
	rw.WriteHeader(http.StatusOK)
	rw.Write(b)
}

// Fault is who an error is the fault of: the caller (Sender) or the
// service (Receiver).
type Fault string

const (
	Sender   Fault = "Sender"
	Receiver Fault = "Receiver"
)

// ErrorDocument is the XML of an error answer.
func ErrorDocument(namespace string, fault Fault, code, message, requestID string) []byte {
	var b bytes.Buffer
	b.WriteString(xml.Header[:len(xml.Header)-1])
	b.WriteString("<ErrorResponse xmlns=\"")
	xml.EscapeText(&b, []byte(namespace))
	b.WriteString("\"><Error><Type>")
	xml.EscapeText(&b, []byte(fault))
	b.WriteString("</Type><Code>")
	xml.EscapeText(&b, []byte(code))
	b.WriteString("</Code><Message>")
	xml.EscapeText(&b, []byte(message))
	b.WriteString("</Message></Error><RequestId>")
	xml.EscapeText(&b, []byte(requestID))
	b.WriteString("</RequestId></ErrorResponse>")
	return b.Bytes()
}

// WriteError sends an error answer with status.
func WriteError(rw http.ResponseWriter, status int, namespace string, fault Fault, code, message, requestID string) {
	b := ErrorDocument(namespace, fault, code, message, requestID)
	rw.Header().Set("Content-Type", ContentType)
	rw.Header().Set("Content-Length", strconv.Itoa(len(b)))
	rw.WriteHeader(status)
	rw.Write(b)
}
