package probe

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestEchoOverRealServer sends bodies above the pooled-buffer size through a
// real net/http server: Go's HTTP/1 server may close the request body once
// the response headers are flushed, so an echo that writes before it has
// read everything comes back short.
func TestEchoOverRealServer(t *testing.T) {
	h, _ := newProbe(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	for _, n := range []int{64 << 10, 200 << 10, 1 << 20, 5 << 20} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			body := bytes.Repeat([]byte("0123456789abcdef"), n/16)
			resp, err := http.Post(srv.URL+"/invocations", "application/octet-stream", bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read answer of %d bytes: %v (got %d)", n, err, len(got))
			}
			want := append(body, h.tag...)
			if resp.StatusCode != http.StatusOK || !bytes.Equal(got, want) {
				t.Fatalf("status %d, %d bytes back, want %d", resp.StatusCode, len(got), len(want))
			}
		})
	}
}
