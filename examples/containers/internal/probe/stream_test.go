package probe

import (
	"bufio"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestStreamGate: the first part reaches a real HTTP client while the probe waits on its gate; opening
// the gate releases the others.
func TestStreamGate(t *testing.T) {
	h, _ := newProbe(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/invocations", strings.NewReader("x"))
	req.Header.Set(AttributesHeader, "stream=3,gate=g1")
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/plain" || len(resp.TransferEncoding) == 0 || resp.TransferEncoding[0] != "chunked" {
		t.Fatalf("head = %v %v", resp.Header, resp.TransferEncoding)
	}
	br := bufio.NewReader(resp.Body)
	line, err := br.ReadString('\n')
	if err != nil || line != "part 1 of 3, 1 bytes in\n" {
		t.Fatalf("first part = %q, %v", line, err)
	}
	if rec := post(h, "", AttributesHeader, "open=g1"); rec.Code != 200 {
		t.Fatalf("open: %d %s", rec.Code, rec.Body)
	}
	rest, err := bufio.NewReader(br).ReadString(0)
	if rest != "part 2 of 3, 1 bytes in\npart 3 of 3, 1 bytes in\n" {
		t.Fatalf("rest = %q (%v)", rest, err)
	}
}

func TestStreamEndings(t *testing.T) {
	h, code := newProbe(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	call := func(attrs string) (string, error) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/invocations", nil)
		req.Header.Set(AttributesHeader, attrs)
		c := srv.Client()
		c.Timeout = 2 * time.Second
		resp, err := c.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var b strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&b)
		return b.String(), err
	}
	if got, err := call("stream=2,every=10ms"); err != nil || got != "part 1 of 2, 0 bytes in\npart 2 of 2, 0 bytes in\n" {
		t.Errorf("stream=2: %q, %v", got, err)
	}
	if got, err := call("stream=5,cut=2"); err == nil || got != "part 1 of 5, 0 bytes in\npart 2 of 5, 0 bytes in\n" {
		t.Errorf("cut=2: %q, %v; want two parts and an error", got, err)
	}
	if got, err := call("stream=5,stall=1"); err == nil || got != "part 1 of 5, 0 bytes in\n" {
		t.Errorf("stall=1: %q, %v; want one part and the client's timeout", got, err)
	}
	got, _ := call("stream=5,die=3")
	if !strings.HasPrefix(got, "part 1 of 5, 0 bytes in\npart 2 of 5, 0 bytes in\npart 3 of 5, 0 bytes in\n") || code.Load() != 1 {
		t.Errorf("die=3: %q, exit code %d", got, code.Load())
	}
	for _, bad := range []string{"stream=-1", "stream=x", "every=1h", "gate=", "open=" + strings.Repeat("g", 65), "cut=100001"} {
		if _, err := ParseAttributes(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
