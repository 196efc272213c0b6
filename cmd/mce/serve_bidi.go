package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/bidistream"
)

// startBidi serves SageMaker's HTTP/2 runtime service
// (InvokeEndpointWithBidirectionalStream) on --bidi-listen: h2c (HTTP/2
// without TLS, as the SDKs speak it to an http:// endpoint URL), or HTTP/2
// over TLS with --bidi-tls-cert and --bidi-tls-key. As the API listener,
// it refuses an address beyond loopback without policies unless --insecure.
func (s *serving) startBidi(context.Context) (func(), error) {
	f := s.f
	if f.bidiListen == "" || f.bidiListen == "off" {
		return nil, nil
	}
	if (f.bidiTLSCert == "") != (f.bidiTLSKey == "") {
		return nil, &exitError{code: 2, msg: "--bidi-tls-cert and --bidi-tls-key go together"}
	}
	loopback, err := isLoopback(f.bidiListen)
	if err != nil {
		return nil, &exitError{code: 2, msg: "--bidi-listen: " + err.Error()}
	}
	if !loopback && !s.az.Enabled() && !f.insecure {
		return nil, &exitError{code: 2, msg: "refusing to listen on " + f.bidiListen + " (beyond loopback) without policies: give --credentials/--policies/--rego, or --insecure to accept that anyone may do anything"}
	}
	ln, err := net.Listen("tcp", f.bidiListen)
	if err != nil {
		return nil, fmt.Errorf("--bidi-listen: %w", err)
	}
	scheme := "https"
	if f.bidiTLSCert == "" {
		scheme = "http"
	}
	hs := newBidiServer(host.BidiHandler(s.srv, bidistream.HandlerOptions{}), f.bidiTLSCert == "")
	go func() {
		var err error
		if f.bidiTLSCert != "" {
			err = hs.ServeTLS(ln, f.bidiTLSCert, f.bidiTLSKey)
		} else {
			err = hs.Serve(ln)
		}
		if err != nil && err != http.ErrServerClosed {
			s.log.Error().Err(err).Msg("the bidirectional streaming listener stopped")
		}
	}()
	s.log.Info().Str("listen", ln.Addr().String()).Str("endpoint_url", scheme+"://"+ln.Addr().String()).
		Msg("SageMaker Runtime HTTP2 (InvokeEndpointWithBidirectionalStream)")
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.drain)
		defer cancel()
		if hs.Shutdown(ctx) != nil {
			hs.Close() // streams still open after the drain are cut
		}
	}, nil
}

// bidiMaxStreams is how many streams one HTTP/2 connection of --bidi-listen
// may have open at once.
const bidiMaxStreams = 100

// newBidiServer is --bidi-listen's server: HTTP/2 only (h2c when
// unencrypted), with Go's bounds on what one client may open and buffer; Go
// counts reset streams against their connection, so a flood of HEADERS and
// RST_STREAM ("rapid reset") runs no more handlers than that.
func newBidiServer(h http.Handler, unencrypted bool) *http.Server {
	var p http.Protocols
	p.SetHTTP2(true)
	if unencrypted {
		p.SetUnencryptedHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		Protocols:         &p,
		ReadHeaderTimeout: readHeaderTimeout,
		MaxHeaderBytes:    64 << 10,
		HTTP2:             &http.HTTP2Config{MaxConcurrentStreams: bidiMaxStreams, MaxReceiveBufferPerStream: 1 << 20, MaxReceiveBufferPerConnection: 4 << 20},
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12},
	}
}
