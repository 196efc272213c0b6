package dataplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"testing"

	"golang.org/x/net/http/httpguts"
)

// The heads of real clients' InvokeEndpoint calls (their keys as each
// writes them) and the edges of what the loop's reader takes.
var headCases = []struct {
	name  string
	head  string
	taken bool // the loop's reader reads it (false: http.ReadRequest does)
}{
	{"boto3", "POST /endpoints/my-endpoint/invocations HTTP/1.1\r\nHost: localhost:8080\r\nAccept-Encoding: identity\r\n" +
		"Content-Type: application/json\r\nAccept: application/json\r\nUser-Agent: Boto3/1.43.0 md/Botocore#1.43.0\r\n" +
		"X-Amz-Date: 20261129T120000Z\r\nX-Amz-Content-SHA256: abc\r\nAuthorization: AWS4-HMAC-SHA256 Credential=x/20261129/us-east-1/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature=00\r\n" +
		"amz-sdk-invocation-id: 6f1c\r\namz-sdk-request: attempt=1\r\nContent-Length: 5\r\n\r\nhello", true},
	{"go sdk", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: 127.0.0.1:8080\r\nUser-Agent: aws-sdk-go-v2/1.47.7\r\n" +
		"Content-Length: 3\r\nAmz-Sdk-Invocation-Id: 1\r\nAmz-Sdk-Request: attempt=1; max=3\r\nContent-Type: text/csv\r\n" +
		"X-Amzn-Sagemaker-Target-Container-Hostname: b\r\nAccept-Encoding: gzip\r\n\r\n1,2", true},
	{"no body", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", true},
	{"close", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nConnection: keep-alive, Close\r\nContent-Length: 1\r\n\r\nx", true},
	{"repeated key", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A: 1\r\nx-a: 2\r\nX-B: \t3 \t\r\nContent-Length: 1\r\n\r\nx", true},
	{"empty value", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A:\r\nX-B:   \r\nContent-Length: 1\r\n\r\nx", true},
	{"obs-text", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A: caf\xc3\xa9\r\nContent-Length: 1\r\n\r\nx", true},
	{"leading zeros", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n1234567", true},
	{"bad host", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: a b\r\nContent-Length: 0\r\n\r\n", true},
	{"truncated body", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 10\r\n\r\nabc", true},

	{"space before colon", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A : 1\r\nContent-Length: 0\r\n\r\n", false},
	{"control byte", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A: a\x01b\r\nContent-Length: 0\r\n\r\n", false},
	{"bare LF", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A: a\nX-B: b\r\nContent-Length: 0\r\n\r\n", false},
	{"bare CR", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\nContent-Length: 0\r\n\r\n", false},
	{"pragma", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\nContent-Length: 0\r\n\r\n", false},
	{"trailer", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nTrailer: X\r\nContent-Length: 0\r\n\r\n", false},
	{"signed length", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: +1\r\n\r\nx", false},
	{"empty length", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: \r\n\r\n", false},
	{"huge length", "POST /endpoints/e/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999\r\n\r\n", false},
	{"escaped path", "POST /endpoints/e%2D/invocations HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false},
	{"query", "POST /endpoints/e/invocations?x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false},
	{"HTTP/1.0", "POST /endpoints/e/invocations HTTP/1.0\r\nHost: h\r\nContent-Length: 0\r\n\r\n", false},
	{"no host", "POST /endpoints/e/invocations HTTP/1.1\r\nContent-Length: 0\r\n\r\n", false},
}

// TestHeadLikeReadRequest reads each head with the loop's reader and with
// http.ReadRequest plus net/http's server's checks, and wants the same
// request and body from both wherever the loop's reader takes a head.
func TestHeadLikeReadRequest(t *testing.T) {
	for _, tc := range headCases {
		t.Run(tc.name, func(t *testing.T) {
			taken, why := sameAsReadRequest([]byte(tc.head))
			if why != "" {
				t.Fatal(why)
			}
			if taken != tc.taken {
				t.Fatalf("the loop's reader took it: %v, want %v", taken, tc.taken)
			}
		})
	}
}

// FuzzHead holds the loop's reader to http.ReadRequest on any bytes: where
// it takes a head, net/http reads the same request from it.
func FuzzHead(f *testing.F) {
	for _, tc := range headCases {
		f.Add([]byte(tc.head))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if _, why := sameAsReadRequest(b); why != "" {
			t.Fatal(why)
		}
	})
}

// sameAsReadRequest reads b both ways; why says how they differ ("" when
// they do not, or when the loop's reader does not take b).
func sameAsReadRequest(b []byte) (taken bool, why string) {
	end := bytes.Index(b, []byte("\r\n\r\n"))
	if end < 0 {
		return false, ""
	}
	var h headReader
	var got http.Request
	if !h.read(b[:end+4], &got) {
		return false, ""
	}
	br := bufio.NewReader(bytes.NewReader(b))
	want, err := http.ReadRequest(br)
	if err != nil {
		return true, "the loop's reader took a head http.ReadRequest refuses: " + err.Error()
	}
	for k, vv := range want.Header {
		if !httpguts.ValidHeaderFieldName(k) {
			return true, "the loop's reader took a header name net/http's server refuses: " + k
		}
		for _, v := range vv {
			if !httpguts.ValidHeaderFieldValue(v) {
				return true, "the loop's reader took a header value net/http's server refuses: " + v
			}
		}
	}
	type fields struct {
		Method, Proto, Host, RequestURI string
		Major, Minor                    int
		URL                             any
		Header                          http.Header
		Length                          int64
		Close                           bool
		TE                              []string
		Trailer                         http.Header
	}
	of := func(r *http.Request) fields {
		return fields{r.Method, r.Proto, r.Host, r.RequestURI, r.ProtoMajor, r.ProtoMinor, *r.URL, r.Header,
			r.ContentLength, r.Close, r.TransferEncoding, r.Trailer}
	}
	if g, w := of(&got), of(want); !reflect.DeepEqual(g, w) {
		return true, fmt.Sprintf("\n got  %+v\n want %+v", g, w)
	}
	gotBody := io.Reader(http.NoBody)
	if got.ContentLength > 0 {
		gotBody = &limitedBody{br: bufio.NewReader(bytes.NewReader(b[end+4:])), left: got.ContentLength}
	} else if got.Body != http.NoBody {
		return true, "a request without a body does not have http.NoBody"
	}
	gb, gerr := io.ReadAll(gotBody)
	wb, werr := io.ReadAll(want.Body)
	if !bytes.Equal(gb, wb) || !sameError(gerr, werr) {
		return true, fmt.Sprintf("bodies differ: %q, %v against %q, %v", gb, gerr, wb, werr)
	}
	// And a read after the end, or after an early end, says the same.
	_, gerr = gotBody.Read(make([]byte, 1))
	_, werr = want.Body.Read(make([]byte, 1))
	if !sameError(gerr, werr) {
		return true, fmt.Sprintf("a read after the body's end says %v, net/http's %v", gerr, werr)
	}
	return true, ""
}

func sameError(a, b error) bool {
	return errors.Is(a, b) || a != nil && b != nil && a.Error() == b.Error()
}

// BenchmarkHead reads boto3's InvokeEndpoint head with net/http's parser
// and with the loop's reader (the request, its header and URL; the body
// reader is the connection's).
func BenchmarkHead(b *testing.B) {
	raw := []byte(headCases[0].head)
	end := bytes.Index(raw, []byte("\r\n\r\n")) + 4
	b.Run("http.ReadRequest", func(b *testing.B) {
		b.ReportAllocs()
		rd := bytes.NewReader(raw)
		br := bufio.NewReaderSize(rd, readBufSize)
		for b.Loop() {
			rd.Reset(raw)
			br.Reset(rd)
			if _, err := http.ReadRequest(br); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("loop", func(b *testing.B) {
		b.ReportAllocs()
		var h headReader
		for b.Loop() {
			var r http.Request
			if !h.read(raw[:end], &r) {
				b.Fatal("not taken")
			}
		}
	})
}
