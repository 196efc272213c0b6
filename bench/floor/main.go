// Command floor is a measuring instrument for make bench, not part of mce:
// the least a Go relay can do per call, so that the benchmark can say how
// much of mce's cost is its HTTP server, how much its own work (routing,
// authorization, metrics) and how much the Go runtime and the client side.
//
// It relays every POST to one upstream with mce's own container client
// (pipeline/httpc), in one of two ways:
//
//   - -server nethttp: net/http's server, as mce serves its API;
//   - -server loop: a goroutine per connection reading requests with
//     net/http's parser (http.ReadRequest) and writing the answer itself,
//     without net/http's server around it (no background read of the
//     connection, no per-request context, no response header map).
//
// Both answer with the upstream's body and Content-Type and nothing of
// mce's (no request ID, no variant). Only for make bench: it listens where
// it is told and relays anything to its one upstream.
package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/pipeline/httpc"
)

const maxBody = 6 << 20

var bufs = sync.Pool{New: func() any { b := make([]byte, 0, 16<<10); return &b }}

func main() {
	listen := flag.String("listen", "127.0.0.1:0", "address to listen on")
	upstream := flag.String("upstream", "", "the container's base URL, such as http://172.18.0.3:8080")
	server := flag.String("server", "nethttp", "nethttp or loop")
	flag.Parse()
	if *upstream == "" {
		log.Fatal("floor: -upstream is required")
	}
	cl := httpc.New(httpc.Options{Timeout: time.Minute, DialTimeout: 5 * time.Second, MaxBody: maxBody})
	relay := func(ctx context.Context, path, contentType string, body []byte, dst []byte) httpc.Result {
		req := httpc.Request{BaseURL: *upstream, Method: http.MethodPost, Path: path, Body: body}
		req.Header[0] = httpc.Header{Name: "Content-Type", Value: contentType}
		return cl.Do(ctx, &req, dst)
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Fprintln(os.Stdout, ln.Addr().String()) // the script reads the port from here
	switch *server {
	case "nethttp":
		log.Fatal(http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			in := bufs.Get().(*[]byte)
			defer bufs.Put(in)
			b, err := readAll(r.Body, (*in)[:0])
			*in = b[:0]
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			out := bufs.Get().(*[]byte)
			defer bufs.Put(out)
			res := relay(r.Context(), "/invocations", r.Header.Get("Content-Type"), b, (*out)[:0])
			*out = res.Body[:0]
			if res.Outcome != httpc.OK {
				http.Error(w, res.Outcome.String(), http.StatusBadGateway)
				return
			}
			w.Header().Set("Content-Type", res.ContentType)
			w.Header().Set("Content-Length", strconv.Itoa(len(res.Body)))
			w.Write(res.Body)
		})))
	case "loop":
		for {
			nc, err := ln.Accept()
			if err != nil {
				log.Fatal(err)
			}
			go serveLoop(nc, relay)
		}
	default:
		log.Fatalf("floor: -server %q: want nethttp or loop", *server)
	}
}

// serveLoop answers the requests of one keep-alive connection in turn.
func serveLoop(nc net.Conn, relay func(context.Context, string, string, []byte, []byte) httpc.Result) {
	defer nc.Close()
	br := bufio.NewReaderSize(nc, 4<<10)
	bw := bufio.NewWriterSize(nc, 4<<10)
	in := make([]byte, 0, 16<<10)
	out := make([]byte, 0, 16<<10)
	head := make([]byte, 0, 256)
	for {
		r, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		in, err = readAll(r.Body, in[:0])
		if err != nil {
			return
		}
		res := relay(context.Background(), "/invocations", r.Header.Get("Content-Type"), in, out[:0])
		out = res.Body
		status := "200 OK"
		if res.Outcome != httpc.OK {
			status, out = "502 Bad Gateway", append(out[:0], res.Outcome.String()...)
		}
		head = append(head[:0], "HTTP/1.1 "...)
		head = append(head, status...)
		head = append(head, "\r\nContent-Type: "...)
		head = append(head, res.ContentType...)
		head = append(head, "\r\nContent-Length: "...)
		head = strconv.AppendInt(head, int64(len(out)), 10)
		head = append(head, "\r\nDate: "...)
		head = time.Now().UTC().AppendFormat(head, http.TimeFormat)
		head = append(head, "\r\n\r\n"...)
		bw.Write(head)
		bw.Write(out)
		if bw.Flush() != nil || r.Close {
			return
		}
	}
}

// readAll appends r to b, at most maxBody bytes.
func readAll(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) > maxBody {
			return b, fmt.Errorf("body over %d bytes", maxBody)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
