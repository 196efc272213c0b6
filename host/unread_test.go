package host

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"
)

// A request refused before its body is read is answered, and its connection
// closed, within a moment, however slowly the caller sends the body it
// announced (issue 18: an unsigned call announcing 1000 bytes and sending
// one a second held its connection for minutes after its refusal).
func TestRefusalDoesNotWaitForBody(t *testing.T) {
	h := newHarness(t, Config{Authz: exampleAuthz(t)})
	if err := h.deploy(plan("my-mce", "Direct", map[string][]string{"AllTraffic": {"customIps1:A"}})); err != nil {
		t.Fatal(err)
	}
	// net/http's server alone (the middleware bounds the body), and the API
	// listener's loop as mce serve runs it (the loop does, for the calls it
	// takes: InvokeEndpoint's).
	servers := map[string]string{
		"net/http": strings.TrimPrefix(h.http.URL, "http://"),
		"loop":     strings.TrimPrefix(serveTCP(t, h.srv.Handler(), true), "http://"),
	}
	for _, tc := range []struct {
		name, path string
		status     int
	}{
		{"unsigned invocation", "/endpoints/my-mce/invocations", http.StatusForbidden},
		{"unsigned stream", "/endpoints/my-mce/invocations-response-stream", http.StatusForbidden},
		{"unknown operation", "/nowhere", http.StatusNotFound},
	} {
		for server, addr := range servers {
			t.Run(server+"/"+tc.name, func(t *testing.T) {
				c, err := net.Dial("tcp", addr)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				start := time.Now()
				fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 1000\r\n\r\nx", tc.path)
				// Trickle the body: a byte every 200 ms, until the server closes.
				stop := make(chan struct{})
				defer close(stop)
				go func() {
					for {
						select {
						case <-stop:
							return
						case <-time.After(200 * time.Millisecond):
							if _, err := c.Write([]byte("x")); err != nil {
								return
							}
						}
					}
				}()
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				rsp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("no answer: %v", err)
				}
				io.Copy(io.Discard, rsp.Body)
				if rsp.StatusCode != tc.status {
					t.Errorf("status %d, want %d", rsp.StatusCode, tc.status)
				}
				answered := time.Since(start)
				if !rsp.Close {
					t.Errorf("the answer does not close the connection (Connection: %q)", rsp.Header.Get("Connection"))
				}
				// The connection ends: EOF or a reset, not a read timeout.
				_, err = br.ReadByte()
				closed := time.Since(start)
				if errors.Is(err, os.ErrDeadlineExceeded) {
					t.Fatalf("the connection was still open %v after the request", closed)
				}
				if answered > 3*time.Second || closed > 3*time.Second {
					t.Errorf("answered after %v, closed after %v; want both within a few seconds", answered, closed)
				}
			})
		}
	}
}
