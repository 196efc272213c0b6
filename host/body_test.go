package host

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"testing/iotest"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/mce-run/mce/host/apierr"
	"golang.org/x/sync/semaphore"
)

func TestReadLimited(t *testing.T) {
	big := bytes.Repeat([]byte("x"), 1<<20)
	cases := []struct {
		name    string
		in      []byte
		limit   int
		budget  int64
		wantErr error
	}{
		{"empty", nil, 100, 1 << 20, nil},
		{"small", []byte("hello"), 100, 1 << 20, nil},
		{"exactly the limit", big[:1000], 1000, 1 << 20, nil},
		{"one byte over", big[:1001], 1000, 1 << 20, errTooLarge},
		{"1 MiB", big, 1 << 20, 4 << 20, nil},
		{"budget too small", big, 1 << 20, 200 << 10, errBodyBudget},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			budget := semaphore.NewWeighted(c.budget)
			got, charged, err := readLimited(iotest.HalfReader(bytes.NewReader(c.in)), make([]byte, 0, 512), c.limit, budget)
			budget.Release(charged)
			if !budget.TryAcquire(c.budget) {
				t.Errorf("charged %d, but more was taken from the budget", charged)
			}
			if !errors.Is(err, c.wantErr) {
				t.Fatalf("err = %v, want %v", err, c.wantErr)
			}
			if err == nil && !bytes.Equal(got, c.in) {
				t.Fatalf("read %d bytes, want %d", len(got), len(c.in))
			}
			// Never charged far ahead of what arrived: at most a doubling,
			// or one step, beyond the bytes read.
			if charged > max(2*int64(len(got)), bodyChargeStep) {
				t.Errorf("charged %d for %d bytes", charged, len(got))
			}
			if int(charged) < len(got) {
				t.Errorf("charged %d < %d bytes held", charged, len(got))
			}
		})
	}
}

// stalledUpload opens a real TCP connection, sends an InvokeEndpoint whose
// Content-Length announces 6 MiB, sends the first send bytes of it and then
// nothing more. It reports the status and error code of the answer, and
// when it came (zero when the connection closed without one).
type stalledResult struct {
	status int
	code   string
	after  time.Duration
}

func stalledUpload(addr string, payload []byte, send int, sent *sync.WaitGroup) stalledResult {
	start := time.Now()
	var once sync.Once
	markSent := func() { once.Do(sent.Done) }
	defer markSent() // refused, or failed early
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return stalledResult{}
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	hdr := fmt.Sprintf("POST /endpoints/ab/invocations HTTP/1.1\r\nHost: mce\r\nContent-Type: text/plain\r\n"+
		"X-Amzn-Sagemaker-Target-Container-Hostname: german\r\nContent-Length: %d\r\n\r\n", MaxPayload)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if _, err := conn.Write([]byte(hdr)); err != nil {
			return
		}
		conn.Write(payload[:send]) // fails when mce refused and closed: fine
		markSent()
	}()
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	<-done
	if err != nil {
		return stalledResult{after: time.Since(start)}
	}
	resp.Body.Close()
	return stalledResult{status: resp.StatusCode, code: resp.Header.Get("X-Amzn-ErrorType"), after: time.Since(start)}
}

func heapInUse() uint64 {
	runtime.GC()
	runtime.GC() // what the first one found live while it was being dropped
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// TestStalledUploads is issue 9's memory exhaustion: 100 uploads announce
// 6 MiB and stall. mce's heap must grow by less than the body budget, each
// upload must be cut at the body deadline, and mce must keep answering
// meanwhile. Before the fix the bodies were read without a deadline or a
// budget: 60 such uploads grew mce by ~620 MiB.
func TestStalledUploads(t *testing.T) {
	const (
		uploads = 100
		budget  = 64 << 20
	)
	payload := bytes.Repeat([]byte("x"), MaxPayload)
	for _, tc := range []struct {
		name string
		send int // bytes sent before stalling
		// The deadline leaves the clients time to send what they send
		// (600 MiB in all for the second case, slow under -race), so that
		// the heap is measured while everything stalls: garbage collection
		// keeps what was live when it started, so bodies still arriving
		// would be counted twice.
		deadline time.Duration
	}{
		{"a few bytes each", 10, 3 * time.Second},
		{"all but a few bytes each", MaxPayload - 10, 10 * time.Second},
	} {
		deadline := tc.deadline
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, Config{BodyTimeout: deadline, BodyMemory: budget})
			if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:EN", "german:DE"}})); err != nil {
				t.Fatal(err)
			}
			addr := h.http.Listener.Addr().String()
			before := heapInUse()

			var sent, finished sync.WaitGroup
			results := make([]stalledResult, uploads)
			for i := range uploads {
				sent.Add(1)
				finished.Add(1)
				go func() {
					defer finished.Done()
					results[i] = stalledUpload(addr, payload, tc.send, &sent)
				}()
			}
			// Wait until the clients have sent what they send (refused
			// ones return early), or most of the deadline.
			waitTimeout(&sent, deadline-2*time.Second)
			start := time.Now()
			grown := int64(heapInUse()) - int64(before)

			t.Logf("heap grew by %.1f MiB with %d stalled uploads (budget %d MiB)", float64(grown)/(1<<20), uploads, budget>>20)
			if grown >= budget {
				t.Errorf("heap grew by %d bytes, not less than the budget of %d", grown, budget)
			}

			// mce keeps answering meanwhile.
			resp, err := h.http.Client().Get(h.http.URL + "/ping")
			if err != nil || resp.StatusCode != 200 {
				t.Errorf("/ping during the stall: %v %v", resp, err)
			} else {
				resp.Body.Close()
			}
			if tc.send < 1<<20 {
				// The stalled uploads hold little of the budget: other
				// calls still get through.
				out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"),
					Body: body("hi "), TargetContainerHostname: aws.String("english")})
				if err != nil || string(out.Body) != "hi EN" {
					t.Errorf("InvokeEndpoint during the stall: %v", err)
				}
			}
			if time.Since(start) > 2*deadline { // generous: -race on a busy machine is slow
				t.Errorf("answers during the stall took %s", time.Since(start))
			}

			finished.Wait()
			var cut, throttled int
			for i, r := range results {
				switch {
				case r.status == 400 && r.code == apierr.CodeRequestTimeout:
					cut++
					if r.after < deadline-500*time.Millisecond || r.after > deadline+5*time.Second {
						t.Errorf("upload %d cut after %s; the deadline is %s", i, r.after, deadline)
					}
				case r.status == 503 && r.code == apierr.CodeServiceUnavail:
					throttled++
				default:
					t.Errorf("upload %d: %+v, want 400 RequestTimeout or 503 ServiceUnavailable", i, r)
				}
			}
			t.Logf("%d cut at the deadline, %d refused beyond the budget", cut, throttled)
			if tc.send < 1<<20 && cut != uploads {
				t.Errorf("%d of %d small stalled uploads cut at the deadline", cut, uploads)
			}
			if tc.send > 1<<20 && throttled == 0 {
				t.Errorf("no upload refused though %d × 6 MiB exceed the budget", uploads)
			}
			// Everything was given back.
			if !h.srv.bodyBudget.TryAcquire(budget) {
				t.Errorf("the body budget was not given back in full")
			}
		})
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(d):
	}
}

// TestUnauthorizableRefusedBeforeBody: with policies enforced, callers the
// headers already refuse get their answer at once, with no body sent at
// all (before the fix mce waited for the whole body first).
func TestUnauthorizableRefusedBeforeBody(t *testing.T) {
	h := newHarness(t, Config{Authz: exampleAuthz(t), BodyTimeout: 30 * time.Second})
	if err := h.deploy(plan("my-mce", "Direct", map[string][]string{"AllTraffic": {"customIps1:A"}})); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	auth := func(key string, at time.Time) string {
		return "Authorization: AWS4-HMAC-SHA256 Credential=" + key + "/" + at.Format("20060102") +
			"/us-east-1/sagemaker/aws4_request, SignedHeaders=host;x-amz-date, Signature=" + strings.Repeat("0", 64) +
			"\r\nX-Amz-Date: " + at.Format("20060102T150405Z") + "\r\n"
	}
	for _, c := range []struct {
		name, path, headers, code string
	}{
		{"unsigned runtime call", "/endpoints/my-mce/invocations", "", "AccessDeniedException"},
		{"unknown key", "/endpoints/my-mce/invocations", auth("AKIANOBODY000EXAMPLE", now), "UnrecognizedClientException"},
		{"expired date", "/endpoints/my-mce/invocations", auth("AKIAALICE0000EXAMPLE", now.Add(-time.Hour)), "InvalidSignatureException"},
		{"control plane, unknown key", "/", "X-Amz-Target: SageMaker.DescribeEndpoint\r\n" + auth("AKIANOBODY000EXAMPLE", now), "UnrecognizedClientException"},
	} {
		t.Run(c.name, func(t *testing.T) {
			conn, err := net.Dial("tcp", h.http.Listener.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			conn.SetDeadline(time.Now().Add(10 * time.Second))
			fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: mce\r\nContent-Type: application/json\r\n%sContent-Length: %d\r\n\r\n",
				c.path, c.headers, MaxPayload/2)
			resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
			if err != nil {
				t.Fatalf("no answer before the body: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if got := resp.Header.Get("X-Amzn-ErrorType"); got != c.code {
				t.Fatalf("%d %s %s, want %s", resp.StatusCode, got, b, c.code)
			}
		})
	}
}

// BenchmarkReadBody is the hot path's cost of the body limits: a 1 KiB body
// read into a pooled buffer, charged to and released from the budget.
func BenchmarkReadBody(b *testing.B) {
	s := New(Config{Store: nil})
	payload := bytes.Repeat([]byte("x"), 1<<10)
	rd := bytes.NewReader(payload)
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/endpoints/x/invocations", rd)
	b.ReportAllocs()
	for b.Loop() {
		rd.Reset(payload)
		rb, api := s.readBody(w, r, MaxPayload, payloadTooLarge)
		if api != nil || len(rb.bytes()) != len(payload) {
			b.Fatal(api)
		}
		rb.release()
	}
}

// TestBodyDeadlineSparesLongInvocations: the body deadline covers the body
// only; an invocation that takes longer than it still gets its answer, on a
// fresh and on a kept-alive connection.
func TestBodyDeadlineSparesLongInvocations(t *testing.T) {
	h := newHarness(t, Config{BodyTimeout: 500 * time.Millisecond})
	if err := h.deploy(plan("ab", "Direct", map[string][]string{"AllTraffic": {"english:EN"}})); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second on the kept-alive connection
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("ab"), Body: body("slow "),
			TargetContainerHostname: aws.String("english"), CustomAttributes: aws.String("sleep=1500ms")})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Body) != "slow EN" {
			t.Fatalf("body %q", out.Body)
		}
	}
}
