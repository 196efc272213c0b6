package host

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/authz"
	"github.com/mce-run/mce/host/bidistream"
	"github.com/mce-run/mce/host/bidistream/bidiclient"
)

// bidiFront serves BidiHandler for h on an h2c listener.
func bidiFront(t *testing.T, h *harness, o bidistream.HandlerOptions) string {
	srv := httptest.NewUnstartedServer(BidiHandler(h.srv, o))
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	srv.Config.Protocols = &p
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestBidirectionalStreamAuthorized: a stream signed by a caller the
// policies allow reaches the variant's container and back; an anonymous one
// is denied, a wrong secret is refused, and events outside the signature
// chain (unsigned, replayed) end the stream.
func TestBidirectionalStreamAuthorized(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	dir := t.TempDir()
	creds := `Credentials:
  - {AccessKeyId: AKIABOB00000EXAMPLE, SecretAccessKey: bob-example-secret-key-00000000000000, Arn: "arn:aws:iam::123456789012:user/bob",
     Policies: [{Statement: {Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/my-mce"}}]}
  - {AccessKeyId: AKIAEVE00000EXAMPLE, SecretAccessKey: eve-example-secret-key-00000000000000, Arn: "arn:aws:iam::123456789012:user/eve",
     Policies: [{Statement: {Effect: Allow, Action: "sagemaker:InvokeEndpoint", Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/other"}}]}
`
	if err := os.WriteFile(filepath.Join(dir, "creds.yaml"), []byte(creds), 0o600); err != nil {
		t.Fatal(err)
	}
	az, err := authz.Load(ctx, authz.Config{CredentialsFile: filepath.Join(dir, "creds.yaml"), Region: "us-east-1", Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{Authz: az})
	if err := h.deploy(plan("my-mce", "Serial", map[string][]string{"AllTraffic": {"model:v1"}})); err != nil {
		t.Fatal(err)
	}
	url := bidiFront(t, h, bidistream.HandlerOptions{Options: bidistream.Options{DrainIdle: 200 * time.Millisecond}})
	as := func(key, secret string) *bidiclient.Client {
		c := &bidiclient.Client{Endpoint: url, Region: "us-east-1"}
		if key != "" {
			c.Credentials = credentials.NewStaticCredentialsProvider(key, secret, "")
		}
		return c
	}
	bob := as("AKIABOB00000EXAMPLE", "bob-example-secret-key-00000000000000")

	s, err := bob.Open(ctx, "my-mce", bidiclient.Input{})
	if err != nil {
		t.Fatal(err)
	}
	if s.InvokedProductionVariant != "AllTraffic" {
		t.Errorf("variant %q", s.InvokedProductionVariant)
	}
	for _, m := range []string{"one", "two"} {
		if err := s.Send(ctx, []byte(m), true, true); err != nil {
			t.Fatal(err)
		}
		p, err := s.Recv()
		if err != nil || string(p.Bytes) != "v1:"+m || !p.Text {
			t.Fatalf("echo of %q: %+v %v", m, p, err)
		}
	}
	s.CloseSend(ctx)
	if _, err := s.Recv(); !errors.Is(err, io.EOF) {
		t.Errorf("end: %v", err)
	}

	var ae *bidiclient.APIError
	for name, tc := range map[string]struct {
		c        *bidiclient.Client
		endpoint string
		status   int
		typ      string
	}{
		"anonymous":                 {as("", ""), "my-mce", 403, "AccessDeniedException"},
		"another endpoint's caller": {as("AKIAEVE00000EXAMPLE", "eve-example-secret-key-00000000000000"), "my-mce", 403, "AccessDeniedException"},
		"wrong secret":              {as("AKIABOB00000EXAMPLE", "not-the-secret"), "my-mce", 403, "InvalidSignatureException"},
		"unknown endpoint":          {as("AKIAEVE00000EXAMPLE", "eve-example-secret-key-00000000000000"), "other", 400, "InputValidationError"},
	} {
		_, err := tc.c.Open(ctx, tc.endpoint, bidiclient.Input{})
		if !errors.As(err, &ae) || ae.Status != tc.status || ae.Type != tc.typ {
			t.Errorf("%s: %v, want %d %s", name, err, tc.status, tc.typ)
		}
	}

	for name, bad := range map[string]func(*bidiclient.Stream) error{
		"an unsigned event": func(s *bidiclient.Stream) error {
			return s.WriteUnsigned([]byte{0, 0, 0, 16, 0, 0, 0, 0, 0x05, 0xc2, 0x48, 0xeb, 0x7d, 0x98, 0xc8, 0xff})
		},
		"a replayed event": func(s *bidiclient.Stream) error {
			s.Send(ctx, []byte("x"), true, true)
			s.Recv()
			return s.ReplayLast()
		},
	} {
		s, err := bob.Open(ctx, "my-mce", bidiclient.Input{})
		if err != nil {
			t.Fatal(err)
		}
		bad(s)
		_, err = s.Recv()
		var se *bidiclient.StreamError
		if !errors.As(err, &se) || !strings.Contains(se.Message, "signature") {
			t.Errorf("%s: %v, want the stream ended for its signature", name, err)
		}
		s.Close()
	}
}

// A container whose image lacks the bidirectional-streaming label is
// refused at once, naming the label, without trying its WebSocket.
func TestBidirectionalStreamNeedsTheLabel(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	h := newHarness(t, Config{})
	if err := h.deploy(plan("plain", "Serial", map[string][]string{"AllTraffic": {"model:nobidi"}})); err != nil {
		t.Fatal(err)
	}
	url := bidiFront(t, h, bidistream.HandlerOptions{})
	start := time.Now()
	_, err := (&bidiclient.Client{Endpoint: url, Region: "us-east-1"}).Open(ctx, "plain", bidiclient.Input{})
	var ae *bidiclient.APIError
	if !errors.As(err, &ae) || ae.Status != 400 || ae.Type != "InputValidationError" || !strings.Contains(ae.Message, "com.amazonaws.sagemaker.capabilities.bidirectional-streaming=true") {
		t.Fatalf("%v", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("refused after %s: the container's WebSocket was tried", took)
	}
	if n := h.backend.container("plain/AllTraffic/model").calls.Load(); n != 0 {
		t.Errorf("the container got %d calls", n)
	}
}
