package host_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/host/bidistream/bidiclient"
	"github.com/mce-run/mce/internal/testenv"
)

const bidiEndpoints = `
Models:
  - ModelName: talker
    PrimaryContainer: {Image: PROBE_IMAGE, Environment: {PROBE_TAG: "t"}}
  - ModelName: chain
    Containers:
      - {ContainerHostname: first, Image: PROBE_IMAGE}
      - {ContainerHostname: second, Image: PROBE_IMAGE}
EndpointConfigs:
  - EndpointConfigName: talker
    ProductionVariants: [{VariantName: Only, ModelName: talker, InitialInstanceCount: 2, InstanceType: ml.c5.large}]
  - EndpointConfigName: chain
    ProductionVariants: [{VariantName: AllTraffic, ModelName: chain, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: talker, EndpointConfigName: talker}
  - {EndpointName: chain, EndpointConfigName: chain}
`

// TestBidirectionalStreamOnDocker streams to the probe's WebSocket on the
// real engine: 1 MiB each way in parts, every byte back in order; 200
// streams at once across two instances; a long stream in bounded memory; the errors of a model of two
// containers and of a path the container does not serve.
func TestBidirectionalStreamOnDocker(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "bidi.yaml")
	if err := os.WriteFile(file, []byte(strings.ReplaceAll(bidiEndpoints, "PROBE_IMAGE", testenv.OwnImage(t, "probe"))), 0o644); err != nil {
		t.Fatal(err)
	}
	h := dockerHostOn(t, 5*time.Second, file)
	srv := httptest.NewUnstartedServer(host.BidiHandler(h.Server, bidistream.HandlerOptions{Options: bidistream.Options{DrainIdle: 500 * time.Millisecond}}))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	c := &bidiclient.Client{Endpoint: srv.URL, Region: "us-east-1"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("1 MiB each way, in order", func(t *testing.T) {
		s, err := c.Open(ctx, "talker", bidiclient.Input{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		if s.InvokedProductionVariant != "Only" {
			t.Errorf("variant %q", s.InvokedProductionVariant)
		}
		sent := make([]byte, 1<<20)
		rand.Read(sent)
		var got bytes.Buffer
		done := make(chan error, 1)
		go func() {
			for got.Len() < len(sent) {
				p, err := s.Recv()
				if err != nil {
					done <- err
					return
				}
				got.Write(p.Bytes)
			}
			done <- nil
		}()
		for off := 0; off < len(sent); off += 16 << 10 { // 64 binary messages of 16 KiB, each in two parts
			part := sent[off : off+16<<10]
			if err := s.Send(ctx, part[:5000], false, false); err != nil {
				t.Fatal(err)
			}
			if err := s.Send(ctx, part[5000:], false, true); err != nil {
				t.Fatal(err)
			}
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), sent) {
			t.Fatalf("%d bytes back, not the %d sent in order", got.Len(), len(sent))
		}
		s.CloseSend(ctx)
		if _, err := s.Recv(); !errors.Is(err, io.EOF) {
			t.Errorf("end: %v", err)
		}
	})

	t.Run("200 streams at once", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 200)
		for i := range 200 {
			wg.Go(func() {
				s, err := c.Open(ctx, "talker", bidiclient.Input{})
				if err != nil {
					errs <- err
					return
				}
				defer s.Close()
				for j := range 5 {
					msg := strings.Repeat("x", i+j+1)
					if err := s.Send(ctx, []byte(msg), true, true); err != nil {
						errs <- err
						return
					}
					p, err := s.Recv()
					if err != nil || string(p.Bytes) != "t:"+msg {
						errs <- errors.New("stream " + msg + ": " + string(p.Bytes))
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
	})

	t.Run("a long stream, bounded memory", func(t *testing.T) {
		// MCE_BIDI_SOAK=10m makes it the ten-minute stream; by
		// default it runs a few seconds.
		d := 3 * time.Second
		if v := os.Getenv("MCE_BIDI_SOAK"); v != "" {
			var err error
			if d, err = time.ParseDuration(v); err != nil {
				t.Fatal(err)
			}
		}
		lctx, lcancel := context.WithTimeout(context.Background(), d+time.Minute)
		defer lcancel()
		s, err := c.Open(lctx, "talker", bidiclient.Input{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		base, peak := ms.HeapInuse, ms.HeapInuse
		msg := make([]byte, 64<<10)
		var sent, back int64
		end := time.Now().Add(d)
		for i := 0; time.Now().Before(end); i++ {
			binary.BigEndian.PutUint64(msg, uint64(i)) // each answer must be the next in order
			if err := s.Send(lctx, msg, false, true); err != nil {
				t.Fatal(err)
			}
			sent += int64(len(msg))
			var got []byte
			for {
				p, err := s.Recv()
				if err != nil {
					t.Fatalf("after %d bytes back: %v", back, err)
				}
				got = append(got, p.Bytes...)
				if p.Complete {
					break
				}
			}
			if len(got) != len(msg) || binary.BigEndian.Uint64(got) != uint64(i) {
				t.Fatalf("answer %d: %d bytes, number %d", i, len(got), binary.BigEndian.Uint64(got))
			}
			back += int64(len(got))
			if i%200 == 0 {
				// What the heap holds after a collection: between
				// collections the pacer lets it reach twice what the
				// whole test binary holds (its parallel tests too), which
				// says nothing of what this stream keeps.
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapInuse)
			}
		}
		t.Logf("%s: %d MiB each way in order; heap in use after a collection %d MiB at start, %d MiB at most", d, sent>>20, base>>20, peak>>20)
		if peak > base+64<<20 {
			t.Errorf("the heap grew by %d MiB during the stream", (peak-base)>>20)
		}
	})

	t.Run("refusals", func(t *testing.T) {
		var ae *bidiclient.APIError
		if _, err := c.Open(ctx, "chain", bidiclient.Input{}); !errors.As(err, &ae) || ae.Status != 400 || !strings.Contains(ae.Message, "2 containers") {
			t.Errorf("a model of two containers: %v", err)
		}
		if _, err := c.Open(ctx, "talker", bidiclient.Input{ModelInvocationPath: "elsewhere"}); !errors.As(err, &ae) || ae.Status != 424 || ae.OriginalStatusCode != 404 {
			t.Errorf("a path the container does not serve: %v", err)
		}
		s, err := c.Open(ctx, "talker", bidiclient.Input{})
		if err != nil {
			t.Fatal(err)
		}
		s.Send(ctx, []byte("close:1011"), true, true)
		var se *bidiclient.StreamError
		if _, err := s.Recv(); !errors.As(err, &se) || se.Type != "ModelStreamError" {
			t.Errorf("a container closing with 1011: %v", err)
		}
	})
}
