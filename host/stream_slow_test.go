//go:build linux

package host

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestResponseStreamBoundedForSlowReader: the container time limit bounds
// the whole response stream, also for a client that reads it slowly: the
// connection ends within the limit (and a little grace), however much the
// container still had to send and however much sits in socket buffers
// (issue 18: a stream read at 4 KiB every 2 s outlived a 10 s limit by
// minutes).
func TestResponseStreamBoundedForSlowReader(t *testing.T) {
	const limit = time.Second
	h := newHarness(t, Config{ContainerTimeout: limit})
	if err := h.deploy(plan("slow", "Serial", map[string][]string{"AllTraffic": {"primary:P"}})); err != nil {
		t.Fatal(err)
	}
	// A small receive buffer, set before the connection opens (the window
	// follows it): what the test measures is what mce still sends, not
	// what already sits in the client's own kernel buffer.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 16<<10)
		})
		return errors.Join(err, serr)
	}}
	c, err := d.Dial("tcp", strings.TrimPrefix(h.http.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	start := time.Now()
	fmt.Fprintf(c, "POST /endpoints/slow/invocations-response-stream HTTP/1.1\r\nHost: x\r\n"+
		"X-Amzn-SageMaker-Custom-Attributes: stream=%d\r\nContent-Type: text/plain\r\nContent-Length: 1\r\n\r\nx", 256<<20)
	br := bufio.NewReaderSize(c, 4<<10)
	rsp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if rsp.StatusCode != http.StatusOK {
		t.Fatalf("status %d", rsp.StatusCode)
	}
	// Read 4 KiB every 100 ms: 40 KiB/s, far slower than the container.
	buf := make([]byte, 4<<10)
	var got int
	c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		n, err := io.ReadFull(rsp.Body, buf)
		got += n
		if err != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
		if time.Since(start) > 8*time.Second {
			break
		}
	}
	took := time.Since(start)
	t.Logf("stream ended after %v, %d bytes read", took, got)
	if took > limit+4*time.Second {
		t.Errorf("the stream was still open %v after it began; want it ended within the %v limit and a little grace", took, limit)
	}
}
