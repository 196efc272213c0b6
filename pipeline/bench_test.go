package pipeline

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
)

// Benchmarks against in-process loopback servers. Reported allocations
// include the test servers' own (net/http server side) allocations; compare
// with BenchmarkBaselineClient, a bare http.Client call to the same kind of
// server, to see what the pipeline adds.

// benchServer is a trivial container: it reads the body and answers a fixed
// JSON document.
func benchServer(b *testing.B) *httptest.Server {
	b.Helper()
	out := []byte(`{"predictions":[0.1,0.9]}`)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(out)))
		_, _ = w.Write(out)
	}))
	b.Cleanup(srv.Close)
	return srv
}

// benchPayload is a small JSON request body.
func benchPayload() []byte { return bytes.Repeat([]byte(`{"x":1}`), 16) }

func benchInvoke(b *testing.B, route *Route, req *Request, parallel bool) {
	iv := NewInvoker(Options{})
	b.Cleanup(iv.Close)
	ctx := context.Background()
	one := func() {
		resp, err := iv.Invoke(ctx, route, req)
		if err != nil {
			b.Error(err)
			return
		}
		resp.Release()
	}
	one() // warm the transport
	b.ReportAllocs()
	b.SetBytes(int64(len(req.Body)))
	b.ResetTimer()
	if parallel {
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				one()
			}
		})
		return
	}
	for b.Loop() {
		one()
	}
}

func BenchmarkDirect(b *testing.B) {
	srv := benchServer(b)
	cs := []Container{newFake("a", srv.URL), newFake("b", srv.URL)}
	route := NewRoute("bench", Direct, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
	req := &Request{Body: benchPayload(), ContentType: "application/json", Accept: "application/json", TargetContainerHostname: "b"}
	b.Run("serial-clients", func(b *testing.B) { benchInvoke(b, route, req, false) })
	b.Run("parallel-clients", func(b *testing.B) { benchInvoke(b, route, req, true) })
}

func BenchmarkSerial5(b *testing.B) {
	cs := make([]Container, 5)
	for i := range cs {
		cs[i] = newFake("c"+strconv.Itoa(i+1), benchServer(b).URL)
	}
	route := NewRoute("bench", Serial, []*Variant{NewVariant("v", 1, []*Instance{NewInstance(cs)})})
	req := &Request{Body: benchPayload(), ContentType: "application/json", Accept: "application/json"}
	b.Run("serial-clients", func(b *testing.B) { benchInvoke(b, route, req, false) })
	b.Run("parallel-clients", func(b *testing.B) { benchInvoke(b, route, req, true) })
}

// BenchmarkBaselineClient is one plain http.Client POST to the same kind of
// server, reading the whole answer: the floor the pipeline builds on.
func BenchmarkBaselineClient(b *testing.B) {
	srv := benchServer(b)
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 512, DisableCompression: true}}
	b.Cleanup(client.CloseIdleConnections)
	body := benchPayload()
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		resp, err := client.Post(srv.URL+"/invocations", "application/json", bytes.NewReader(body))
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
}
