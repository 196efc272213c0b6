package sdkhttp

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
)

// TestBodyArrives: the server sees exactly the body the SDK sent, through a
// real SDK client, and a body the Client declines to copy (no length) still
// goes through.
func TestBodyArrives(t *testing.T) {
	var got []byte
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ = io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	rt := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &Client{Next: srv.Client()}})
	body := bytes.Repeat([]byte("abc"), 1000)
	out, err := rt.InvokeEndpoint(context.Background(), &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ep"), Body: body})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, body) || string(out.Body) != "ok" {
		t.Fatalf("server got %d bytes (want %d), client got %q", len(got), len(body), out.Body)
	}

	req, _ := http.NewRequest("POST", srv.URL, io.NopCloser(bytes.NewReader([]byte("xyz"))))
	req.ContentLength = -1
	resp, err := (&Client{Next: srv.Client()}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if string(got) != "xyz" {
		t.Fatalf("unknown-length body arrived as %q", got)
	}
}

// closingBody stands for smithy-go's request body wrapper: once closed, its
// WriteTo answers io.EOF as an error.
type closingBody struct {
	r      *bytes.Reader
	closed bool
}

func (b *closingBody) Read(p []byte) (int, error) {
	if b.closed {
		return 0, io.EOF
	}
	return b.r.Read(p)
}

func (b *closingBody) WriteTo(w io.Writer) (int64, error) {
	if b.closed {
		return 0, io.EOF
	}
	return b.r.WriteTo(w)
}

func (b *closingBody) Close() error { b.closed = true; return nil }

// TestTransportNeverSeesTheSDKsBody: the body the transport reads is a copy,
// so closing the SDK's wrapper afterwards (as smithy-go does when the
// response headers arrive) cannot fail the transport's write.
func TestTransportNeverSeesTheSDKsBody(t *testing.T) {
	var seen io.ReadCloser
	next := doerFunc(func(r *http.Request) (*http.Response, error) {
		seen = r.Body
		return &http.Response{StatusCode: 200, Body: http.NoBody}, nil
	})
	sdkBody := &closingBody{r: bytes.NewReader([]byte("hello"))}
	req, _ := http.NewRequest("POST", "http://127.0.0.1:1/", sdkBody)
	req.ContentLength = 5
	if _, err := (&Client{Next: next}).Do(req); err != nil {
		t.Fatal(err)
	}
	sdkBody.Close()
	b, err := io.ReadAll(seen)
	if err != nil || string(b) != "hello" {
		t.Fatalf("transport read %q, %v", b, err)
	}
	if n, err := io.Copy(io.Discard, seen); n != 0 || err != nil {
		t.Fatalf("the transport's check for extra bytes got %d, %v; want 0, nil", n, err)
	}

	short, _ := http.NewRequest("POST", "http://127.0.0.1:1/", &closingBody{r: bytes.NewReader([]byte("hi"))})
	short.ContentLength = 5
	if _, err := (&Client{Next: next}).Do(short); err == nil {
		t.Fatal("a body shorter than its Content-Length was sent")
	}
}

type doerFunc func(*http.Request) (*http.Response, error)

func (f doerFunc) Do(r *http.Request) (*http.Response, error) { return f(r) }
