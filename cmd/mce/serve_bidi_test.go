package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// TestBidiListenerFloods: the --bidi-listen server keeps one client to its
// stream limit and survives a rapid-reset flood (HEADERS then RST_STREAM,
// thousands of times) without running more handlers than the limit, and
// serves a fresh client afterwards.
func TestBidiListenerFloods(t *testing.T) {
	var running, most atomic.Int64
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := running.Add(1)
		defer running.Add(-1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		if r.URL.Path == "/hold" {
			<-r.Context().Done() // a stream that stays open until reset
		}
		w.Write([]byte("ok"))
	})
	srv := newBidiServer(h, true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()

	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Write([]byte(http2.ClientPreface))
	fr := http2.NewFramer(conn, conn)
	fr.WriteSettings()
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	headers := func(id uint32) error {
		hb.Reset()
		for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", "mce"}, {":path", "/hold"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
	}
	// The server's frames are read (and dropped) as they come, so its
	// writes never block the flood.
	go io.Copy(io.Discard, conn)
	id := uint32(1)
	for range 150 { // 150 streams held open: past the limit of 100
		if headers(id) != nil {
			break
		}
		id += 2
	}
	for i := 0; i < 20000; i++ { // rapid reset
		if headers(id) != nil || fr.WriteRSTStream(id, http2.ErrCodeCancel) != nil {
			break // the server closed the connection: also a fine answer to a flood
		}
		id += 2
	}
	time.Sleep(200 * time.Millisecond)
	if m := most.Load(); m > bidiMaxStreams {
		t.Errorf("%d handlers ran at once for one connection, past the limit of %d", m, bidiMaxStreams)
	}
	conn.Close()

	// A fresh client is served.
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	c := &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 10 * time.Second}
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+ln.Addr().String()+"/fresh", nil)
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("a fresh client after the flood: %v", err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.ProtoMajor != 2 {
		t.Errorf("a fresh client: %d over HTTP/%d", resp.StatusCode, resp.ProtoMajor)
	}
}
