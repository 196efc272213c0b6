// Package bidiclient is a client of InvokeEndpointWithBidirectionalStream
// built from aws-sdk-go-v2's own parts (its SigV4 request and event-stream
// signers, its event-stream encoder and decoder) over Go's HTTP/2 client:
// the wire format of the SDKs' sagemakerruntimehttp2 clients, which the Go
// module proxy does not serve. mce's tests and `mce invoke --bidi` use it.
package bidiclient

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream/eventstreamapi"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

// Client opens streams on one mce HTTP/2 listener.
type Client struct {
	// Endpoint is the listener's URL: http:// for h2c, https:// for TLS.
	Endpoint string
	Region   string
	// Credentials sign the request and every event; nil sends them unsigned.
	Credentials aws.CredentialsProvider
	// HTTP carries the request; nil means an HTTP/2 client that speaks h2c
	// to http:// URLs (no proxies).
	HTTP *http.Client
}

// NewH2CClient is an HTTP client that speaks HTTP/2 without TLS to http://
// URLs and HTTP/2 over TLS to https:// ones.
func NewH2CClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP2(true)
	return &http.Client{Transport: &http.Transport{Proxy: nil, Protocols: &p, ForceAttemptHTTP2: true}}
}

// Input is the request's optional headers.
type Input struct {
	TargetVariant, ModelInvocationPath, ModelQueryString string
}

// Stream is one open bidirectional stream.
type Stream struct {
	// InvokedProductionVariant is the variant that took the stream.
	InvokedProductionVariant string

	pw     *io.PipeWriter
	resp   *http.Response
	dec    *eventstream.Decoder
	signer *v4.StreamSigner
	mu     sync.Mutex
	enc    *eventstream.Encoder
	last   []byte // the last message written, as written
}

// APIError is an error answered before the stream started (restJson1).
type APIError struct {
	Status             int
	Type               string
	ErrorCode, Message string
	OriginalStatusCode int
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d): %s", e.Type, e.Status, e.Message)
}

// StreamError is an exception event that ended the stream.
type StreamError struct {
	Type, ErrorCode, Message string
}

func (e *StreamError) Error() string { return e.Type + ": " + e.Message }

const streamingPayload = "STREAMING-AWS4-HMAC-SHA256-EVENTS"

// Open starts a stream to endpoint. It returns once mce answered: an
// *APIError when it refused the stream.
func (c *Client) Open(ctx context.Context, endpoint string, in Input) (*Stream, error) {
	u, err := url.Parse(strings.TrimRight(c.Endpoint, "/") + "/endpoints/" + url.PathEscape(endpoint) + "/invocations-bidirectional-stream")
	if err != nil {
		return nil, err
	}
	pr, pw := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), pr)
	if err != nil {
		return nil, err
	}
	req.ContentLength = -1
	req.Header.Set("Content-Type", "application/vnd.amazon.eventstream")
	req.Header.Set("X-Amz-Content-Sha256", streamingPayload)
	for k, v := range map[string]string{"X-Amzn-SageMaker-Target-Variant": in.TargetVariant,
		"X-Amzn-SageMaker-Model-Invocation-Path": in.ModelInvocationPath, "X-Amzn-SageMaker-Model-Query-String": in.ModelQueryString} {
		if v != "" {
			req.Header.Set(k, v)
		}
	}
	s := &Stream{pw: pw, dec: eventstream.NewDecoder(), enc: eventstream.NewEncoder()}
	if c.Credentials != nil {
		creds, err := c.Credentials.Retrieve(ctx)
		if err != nil {
			return nil, err
		}
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, streamingPayload, "sagemaker", c.Region, time.Now().UTC()); err != nil {
			return nil, err
		}
		auth := req.Header.Get("Authorization")
		i := strings.LastIndex(auth, "Signature=")
		seed, err := hex.DecodeString(auth[i+len("Signature="):])
		if i < 0 || err != nil {
			return nil, errors.New("bidiclient: the signer made no signature")
		}
		s.signer = v4.NewStreamSigner(creds, "sagemaker", c.Region, seed)
	}
	hc := c.HTTP
	if hc == nil {
		hc = NewH2CClient()
	}
	resp, err := hc.Do(req)
	if err != nil {
		pw.CloseWithError(err)
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer resp.Body.Close()
		pw.CloseWithError(errors.New("refused"))
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
		var body struct {
			Message, ErrorCode string
			OriginalStatusCode int
		}
		json.Unmarshal(b, &body)
		return nil, &APIError{Status: resp.StatusCode, Type: resp.Header.Get("X-Amzn-ErrorType"), ErrorCode: body.ErrorCode,
			Message: body.Message, OriginalStatusCode: body.OriginalStatusCode}
	}
	s.resp = resp
	s.InvokedProductionVariant = resp.Header.Get("X-Amzn-Invoked-Production-Variant")
	return s, nil
}

// Send sends one PayloadPart: UTF8 when text, else BINARY; PARTIAL unless
// complete.
func (s *Stream) Send(ctx context.Context, p []byte, text, complete bool) error {
	dt, cs := "BINARY", "PARTIAL"
	if text {
		dt = "UTF8"
	}
	if complete {
		cs = "COMPLETE"
	}
	var ev bytes.Buffer
	if err := s.enc.Encode(&ev, eventstream.Message{Headers: eventstream.Headers{
		{Name: ":message-type", Value: eventstream.StringValue("event")},
		{Name: ":event-type", Value: eventstream.StringValue("PayloadPart")},
		{Name: ":content-type", Value: eventstream.StringValue("application/octet-stream")},
		{Name: "DataType", Value: eventstream.StringValue(dt)},
		{Name: "CompletionState", Value: eventstream.StringValue(cs)},
	}, Payload: p}); err != nil {
		return err
	}
	return s.write(ctx, ev.Bytes())
}

// SendRaw writes b, an encoded message, as the stream's next message,
// signed as Send signs (for tests of what mce refuses).
func (s *Stream) SendRaw(ctx context.Context, b []byte) error { return s.write(ctx, b) }

// write sends payload (an encoded event, or nothing for the end) in a
// signed message, or as it is for an unsigned stream.
func (s *Stream) write(ctx context.Context, payload []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.signer == nil {
		if len(payload) == 0 {
			return nil
		}
		_, err := s.pw.Write(payload)
		return err
	}
	now := time.Now().UTC().Truncate(time.Millisecond)
	date := eventstream.TimestampValue(now)
	var hb bytes.Buffer
	if err := eventstream.EncodeHeaders(&hb, eventstream.Headers{{Name: eventstreamapi.DateHeader, Value: date}}); err != nil {
		return err
	}
	sig, err := s.signer.GetSignature(ctx, hb.Bytes(), payload, now)
	if err != nil {
		return err
	}
	var msg bytes.Buffer
	if err := s.enc.Encode(&msg, eventstream.Message{Headers: eventstream.Headers{
		{Name: eventstreamapi.DateHeader, Value: date},
		{Name: eventstreamapi.ChunkSignatureHeader, Value: eventstream.BytesValue(sig)},
	}, Payload: payload}); err != nil {
		return err
	}
	s.last = msg.Bytes()
	_, err = s.pw.Write(s.last)
	return err
}

// WriteUnsigned writes b to the body as it is, outside the signature chain
// (for tests of what mce refuses).
func (s *Stream) WriteUnsigned(b []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.pw.Write(b)
	return err
}

// ReplayLast writes the last signed message again (for tests of what mce
// refuses).
func (s *Stream) ReplayLast() error { return s.WriteUnsigned(s.last) }

// CloseSend ends the client's input (the signed empty message); the model's
// answers keep coming until it closes.
func (s *Stream) CloseSend(ctx context.Context) error {
	err := s.write(ctx, nil)
	s.pw.Close()
	return err
}

// Part is one PayloadPart from the model.
type Part struct {
	Bytes    []byte
	Text     bool
	Complete bool
}

// Recv returns the model's next part; io.EOF when the stream ended
// normally, a *StreamError for an exception event.
func (s *Stream) Recv() (Part, error) {
	m, err := s.dec.Decode(s.resp.Body, nil)
	if err != nil {
		if errors.Is(err, io.EOF) {
			return Part{}, io.EOF
		}
		return Part{}, err
	}
	str := func(name string) string {
		if v, ok := m.Headers.Get(name).(eventstream.StringValue); ok {
			return string(v)
		}
		return ""
	}
	switch str(":message-type") {
	case "event":
		if et := str(":event-type"); et != "PayloadPart" {
			return Part{}, fmt.Errorf("bidiclient: unexpected event %q", et)
		}
		return Part{Bytes: m.Payload, Text: str("DataType") == "UTF8", Complete: str("CompletionState") != "PARTIAL"}, nil
	case "exception":
		var body struct{ Message, ErrorCode string }
		json.Unmarshal(m.Payload, &body)
		return Part{}, &StreamError{Type: str(":exception-type"), ErrorCode: body.ErrorCode, Message: body.Message}
	default:
		return Part{}, fmt.Errorf("bidiclient: unexpected message type %q: %s", str(":message-type"), m.Payload)
	}
}

// Close ends the stream from the client's side at once.
func (s *Stream) Close() error {
	s.pw.CloseWithError(errors.New("closed"))
	return s.resp.Body.Close()
}
