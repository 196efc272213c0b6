package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"

	"github.com/mce-run/mce/internal/testenv"
)

// streamEndpoints are probe endpoints of every shape a stream can take.
const streamEndpoints = `
Models:
  - ModelName: streamer
    PrimaryContainer: {Image: PROBE_IMAGE}
  - ModelName: stream-chain
    Containers:
      - {ContainerHostname: first, Image: PROBE_IMAGE, Environment: {PROBE_TAG: " (first)"}}
      - {ContainerHostname: last, Image: PROBE_IMAGE, Environment: {PROBE_TAG: " (last)"}}
    InferenceExecutionConfig: {Mode: Serial}
  - ModelName: stream-direct
    Containers:
      - {ContainerHostname: alpha, Image: PROBE_IMAGE, Environment: {PROBE_TAG: " (alpha)"}}
      - {ContainerHostname: beta, Image: PROBE_IMAGE, Environment: {PROBE_TAG: " (beta)"}}
    InferenceExecutionConfig: {Mode: Direct}
EndpointConfigs:
  - EndpointConfigName: streamer
    ProductionVariants: [{VariantName: Only, ModelName: streamer, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
  - EndpointConfigName: stream-chain
    ProductionVariants: [{VariantName: AllTraffic, ModelName: stream-chain, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
  - EndpointConfigName: stream-direct
    ProductionVariants: [{VariantName: AllTraffic, ModelName: stream-direct, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: streamer, EndpointConfigName: streamer}
  - {EndpointName: stream-chain, EndpointConfigName: stream-chain}
  - {EndpointName: stream-direct, EndpointConfigName: stream-direct}
`

// parts is what the probe streams for stream=n with a body of in bytes.
func parts(n, in int, tag string) []string {
	var out []string
	for i := 1; i <= n; i++ {
		out = append(out, fmt.Sprintf("part %d of %d, %d bytes in%s\n", i, n, in, tag))
	}
	return out
}

// stream is one InvokeEndpointWithResponseStream as aws-sdk-go-v2 reads it.
type stream struct {
	out    *sagemakerruntime.InvokeEndpointWithResponseStreamOutput
	events <-chan types.ResponseStream
	got    strings.Builder
	n      int // PayloadPart events
}

func startStream(t *testing.T, ctx context.Context, c *sagemakerruntime.Client, in *sagemakerruntime.InvokeEndpointWithResponseStreamInput) (*stream, error) {
	t.Helper()
	out, err := c.InvokeEndpointWithResponseStream(ctx, in)
	if err != nil {
		return nil, err
	}
	s := &stream{out: out, events: out.GetStream().Events()}
	t.Cleanup(s.close)
	return s, nil
}

// close closes the stream and waits until its reader goroutine has ended:
// aws-sdk-go-v2's event-stream readers of one client share a decoder
// (smithy-go's eventstream.Codec), so a reader still running when the next
// stream starts is a data race inside the SDK.
func (s *stream) close() {
	s.out.GetStream().Close()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case _, ok := <-s.events:
			if !ok {
				return
			}
		case <-timeout:
			return
		}
	}
}

// next waits for the next PayloadPart; false at the stream's end.
func (s *stream) next(t *testing.T, within time.Duration) bool {
	t.Helper()
	select {
	case ev, ok := <-s.events:
		if !ok {
			return false
		}
		p, isPart := ev.(*types.ResponseStreamMemberPayloadPart)
		if !isPart {
			t.Fatalf("event %T, want PayloadPart", ev)
		}
		s.got.Write(p.Value.Bytes)
		s.n++
		return true
	case <-time.After(within):
		t.Fatalf("no event within %s; so far %q", within, s.got.String())
		return false
	}
}

// rest reads to the end and returns the stream's error.
func (s *stream) rest(t *testing.T) error {
	t.Helper()
	for s.next(t, 20*time.Second) {
	}
	return s.out.GetStream().Err()
}

func TestResponseStreamOnDocker(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "stream.yaml")
	yaml := strings.ReplaceAll(streamEndpoints, "PROBE_IMAGE", testenv.OwnImage(t, "probe"))
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	c, url := dockerHostURL(t, file)
	ctx := context.Background()
	call := func(endpoint, attrs string, body string) *sagemakerruntime.InvokeEndpointWithResponseStreamInput {
		return &sagemakerruntime.InvokeEndpointWithResponseStreamInput{EndpointName: aws.String(endpoint),
			CustomAttributes: aws.String(attrs), Body: []byte(body)}
	}

	t.Run("incremental", func(t *testing.T) {
		// The probe sends part 1, then waits for its gate; only a
		// request that comes after part 1 reached the client opens it.
		// A relay that held the answer back would never deliver part 1.
		s, err := startStream(t, ctx, c, call("streamer", "stream=3,gate=incremental", "hello"))
		if err != nil {
			t.Fatal(err)
		}
		if got := aws.ToString(s.out.ContentType); got != "text/plain" {
			t.Errorf("ContentType = %q", got)
		}
		if got := aws.ToString(s.out.InvokedProductionVariant); got != "Only" {
			t.Errorf("InvokedProductionVariant = %q", got)
		}
		if !s.next(t, 10*time.Second) || s.got.String() != parts(3, 5, "")[0] {
			t.Fatalf("first event %q", s.got.String())
		}
		if _, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("streamer"),
			CustomAttributes: aws.String("open=incremental"), Body: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := s.rest(t); err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(parts(3, 5, ""), ""); s.got.String() != want {
			t.Errorf("stream = %q, want %q", s.got.String(), want)
		}
	})

	t.Run("many parts, attributes and Accept", func(t *testing.T) {
		in := call("streamer", "stream=3000,attrs=k=v,ct=text/x-parts", "")
		in.Accept = aws.String("text/x-parts")
		s, err := startStream(t, ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.rest(t); err != nil {
			t.Fatal(err)
		}
		if want := strings.Join(parts(3000, 0, ""), ""); s.got.String() != want {
			t.Errorf("stream of %d bytes differs from the probe's %d", s.got.Len(), len(want))
		}
		if s.n < 2 {
			t.Errorf("%d events; want the answer in several", s.n)
		}
		if aws.ToString(s.out.ContentType) != "text/x-parts" || aws.ToString(s.out.CustomAttributes) != "k=v" {
			t.Errorf("ContentType %q, CustomAttributes %q", aws.ToString(s.out.ContentType), aws.ToString(s.out.CustomAttributes))
		}
	})

	t.Run("headers reach the container; an unstreamed answer comes through", func(t *testing.T) {
		in := call("streamer", "info", "x")
		in.Accept, in.ContentType = aws.String("text/x-accept"), aws.String("text/x-ct")
		s, err := startStream(t, ctx, c, in)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.rest(t); err != nil {
			t.Fatal(err)
		}
		var info struct {
			ContentType      string `json:"content_type"`
			Accept           string `json:"accept"`
			CustomAttributes string `json:"custom_attributes"`
		}
		if err := json.Unmarshal([]byte(s.got.String()), &info); err != nil {
			t.Fatalf("%v: %q", err, s.got.String())
		}
		if info.ContentType != "text/x-ct" || info.Accept != "text/x-accept" || info.CustomAttributes != "info" {
			t.Errorf("the container received %+v", info)
		}
		if aws.ToString(s.out.ContentType) != "application/json" {
			t.Errorf("ContentType = %q", aws.ToString(s.out.ContentType))
		}
	})

	t.Run("serial: the last container streams", func(t *testing.T) {
		s, err := startStream(t, ctx, c, call("stream-chain", "stream=2", "hello"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.rest(t); err != nil {
			t.Fatal(err)
		}
		// The last container read what the first one answered.
		first := strings.Join(parts(2, 5, " (first)"), "")
		if want := strings.Join(parts(2, len(first), " (last)"), ""); s.got.String() != want {
			t.Errorf("stream = %q, want %q", s.got.String(), want)
		}
	})

	t.Run("direct: the target container streams", func(t *testing.T) {
		for _, host := range []string{"alpha", "beta"} {
			in := call("stream-direct", "stream=2", "hi")
			in.TargetContainerHostname = aws.String(host)
			s, err := startStream(t, ctx, c, in)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.rest(t); err != nil {
				t.Fatal(err)
			}
			if want := strings.Join(parts(2, 2, " ("+host+")"), ""); s.got.String() != want {
				t.Errorf("%s: stream = %q, want %q", host, s.got.String(), want)
			}
		}
		_, err := c.InvokeEndpointWithResponseStream(ctx, call("stream-direct", "stream=2", "hi"))
		wantAPIError(t, err, "ValidationError", "TargetContainerHostname")
	})

	t.Run("container error before the stream", func(t *testing.T) {
		_, err := c.InvokeEndpointWithResponseStream(ctx, call("streamer", "status=503", "x"))
		var me *types.ModelError
		if !errors.As(err, &me) || aws.ToInt32(me.OriginalStatusCode) != 503 {
			t.Fatalf("err = %v, want ModelError with OriginalStatusCode 503", err)
		}
	})

	t.Run("broken mid-stream", func(t *testing.T) {
		s, err := startStream(t, ctx, c, call("streamer", "stream=5,cut=2", ""))
		if err != nil {
			t.Fatal(err)
		}
		err = s.rest(t)
		wantStreamError(t, err, "StreamBroken")
		if want := strings.Join(parts(5, 0, "")[:2], ""); s.got.String() != want {
			t.Errorf("before the break: %q, want %q", s.got.String(), want)
		}
	})

	t.Run("time limit mid-stream", func(t *testing.T) {
		start := time.Now()
		s, err := startStream(t, ctx, c, call("streamer", "stream=5,stall=1", ""))
		if err != nil {
			t.Fatal(err)
		}
		err = s.rest(t)
		wantStreamError(t, err, "ModelInvocationTimeExceeded")
		if d := time.Since(start); d < 4*time.Second || d > 15*time.Second {
			t.Errorf("the stream ended after %s; the container time limit is 5 s", d)
		}
	})

	t.Run("client hang-up cuts the container call", func(t *testing.T) {
		before := invocations(t, url, "streamer")
		cctx, cancel := context.WithCancel(ctx)
		s, err := startStream(t, cctx, c, call("streamer", "stream=3,gate=never-opened", ""))
		if err != nil {
			t.Fatal(err)
		}
		if !s.next(t, 10*time.Second) {
			t.Fatal("no first part")
		}
		cancel()
		s.close()
		// The handler ends (and counts the call) once the container call
		// is cut: well before the 5 s container time limit would end it.
		left := time.Now()
		for invocations(t, url, "streamer") == before {
			if time.Since(left) > 2*time.Second {
				t.Fatal("the streamed call still runs 2 s after the client left")
			}
			time.Sleep(20 * time.Millisecond)
		}
		t.Logf("the streamed call ended %s after the client left", time.Since(left).Round(time.Millisecond))
	})

	t.Run("container dies mid-stream", func(t *testing.T) {
		s, err := startStream(t, ctx, c, call("streamer", "stream=5,die=1", ""))
		if err != nil {
			t.Fatal(err)
		}
		wantStreamError(t, s.rest(t), "StreamBroken")
	})

	t.Run("unknown endpoint", func(t *testing.T) {
		_, err := c.InvokeEndpointWithResponseStream(ctx, call("nope", "", "x"))
		wantAPIError(t, err, "ValidationError", "Endpoint nope of account")
	})

	t.Run("time to first byte metric", func(t *testing.T) {
		m := metricsText(t, url)
		if !regexp.MustCompile(`mce_time_to_first_byte_seconds_count\{endpoint="stream-chain",variant="AllTraffic"\} [1-9]`).MatchString(m) {
			t.Errorf("no time to first byte for stream-chain in:\n%s", grepLines(m, "first_byte"))
		}
	})
}

func wantStreamError(t *testing.T, err error, code string) {
	t.Helper()
	var se *types.ModelStreamError
	if !errors.As(err, &se) {
		t.Fatalf("stream error = %v (%T), want ModelStreamError %s", err, err, code)
	}
	if aws.ToString(se.ErrorCode_) != code || aws.ToString(se.Message) == "" {
		t.Fatalf("ModelStreamError %q: %q, want ErrorCode %s", aws.ToString(se.ErrorCode_), aws.ToString(se.Message), code)
	}
}

func wantAPIError(t *testing.T, err error, code, msgPart string) {
	t.Helper()
	type apiError interface {
		ErrorCode() string
		ErrorMessage() string
	}
	var ae apiError
	if !errors.As(err, &ae) || ae.ErrorCode() != code || !strings.Contains(ae.ErrorMessage(), msgPart) {
		t.Fatalf("err = %v, want %s containing %q", err, code, msgPart)
	}
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// invocations is the Invocations counter of an endpoint's variants, summed.
func invocations(t *testing.T, url, endpoint string) float64 {
	t.Helper()
	var sum float64
	re := regexp.MustCompile(`(?m)^(?:Invocations|mce_invocations_total)\{[^}]*(?:EndpointName|endpoint)="` + regexp.QuoteMeta(endpoint) + `"[^}]*\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(metricsText(t, url), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		sum += v
	}
	return sum
}

func grepLines(s, part string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, part) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
