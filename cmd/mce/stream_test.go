package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/mce-run/mce/internal/testenv"
)

// notifyingWriter records what is written and signals the first write.
type notifyingWriter struct {
	mu    sync.Mutex
	b     strings.Builder
	first chan struct{}
	once  sync.Once
}

func (w *notifyingWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	w.once.Do(func() { close(w.first) })
	return len(p), nil
}

func (w *notifyingWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestInvokeStream: mce invoke --stream prints the first part while the
// probe still holds back the others (they follow only once a second call,
// made after the first part was printed, opens the probe's gate), and ends
// with exit status 1 and the ModelStreamError when the stream breaks.
func TestInvokeStream(t *testing.T) {
	cli := testenv.Docker(t)
	img := testenv.OwnImage(t, "probe")
	file := filepath.Join(t.TempDir(), "ep.yaml")
	os.WriteFile(file, []byte(`
Models:
  - ModelName: m
    PrimaryContainer: {Image: `+img+`}
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants: [{VariantName: AllTraffic, ModelName: m, InitialInstanceCount: 1, InstanceType: ml.c5.large}]
Endpoints:
  - {EndpointName: ep, EndpointConfigName: c}
`), 0o644)
	listen := freePort(t)
	f := serveFlagsFor(t, listen, file)
	ctx, url := serveInService(t, cli, f)

	flags := func(attrs string) invokeFlags {
		return invokeFlags{endpointURL: url, region: "us-east-1", customAttributes: attrs, timeout: 30 * time.Second, stream: true}
	}
	out := &notifyingWriter{first: make(chan struct{})}
	var errOut strings.Builder
	res := make(chan error, 1)
	go func() {
		res <- invoke(ctx, flags("stream=3,gate=cli"), []string{"ep", "hello"}, strings.NewReader(""), out, &errOut)
	}()
	select {
	case <-out.first:
	case err := <-res:
		t.Fatalf("invoke --stream ended before the gate opened: %v\n%s", err, out.String())
	case <-time.After(20 * time.Second):
		t.Fatal("no part printed")
	}
	if got := out.String(); got != "part 1 of 3, 5 bytes in\n" {
		t.Fatalf("first print %q", got)
	}
	if got, err := runCLI(ctx, "invoke", "ep", "--endpoint-url", url, "--custom-attributes", "open=cli", "x"); err != nil {
		t.Fatalf("opening the gate: %v\n%s", err, got)
	}
	if err := <-res; err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "part 1 of 3, 5 bytes in\npart 2 of 3, 5 bytes in\npart 3 of 3, 5 bytes in\n"; got != want {
		t.Errorf("printed %q, want %q", got, want)
	}

	got, err := runCLI(ctx, "invoke", "ep", "--stream", "--endpoint-url", url, "--custom-attributes", "stream=4,cut=1", "")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(ee.msg, "ModelStreamError (StreamBroken)") {
		t.Errorf("broken stream: err = %v, want exit 1 with ModelStreamError (StreamBroken)", err)
	}
	if got != "part 1 of 4, 0 bytes in\n" {
		t.Errorf("broken stream printed %q", got)
	}
	if _, err := runCLI(ctx, "invoke", "ep", "--stream", "--endpoint-url", url, "--target-model", "m.tar.gz", "x"); !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("--stream --target-model: %v, want exit status 2", err)
	}
}

// TestInvokeBidi: mce serve --bidi-listen serves bidirectional streams, and
// mce invoke --bidi sends each line of its input as a message and prints
// each answer as a line.
func TestInvokeBidi(t *testing.T) {
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	file := endpointFile(t, `PROBE_TAG: "echo"`)
	f := serveFlagsFor(t, freePort(t), file)
	bidi := freePort(t)
	f.bidiListen = bidi
	ctx, _ := serveInService(t, cli, f)
	got, err := runCLIWithInput(ctx, "hello\nsecond line\n", "invoke", "ep", "--bidi", "--endpoint-url", "http://"+bidi, "--timeout", "20s")
	if err != nil {
		t.Fatalf("invoke --bidi: %v\n%s", err, got)
	}
	if got != "echo:hello\necho:second line\n" {
		t.Errorf("printed %q", got)
	}
	var ee *exitError
	if _, err := runCLIWithInput(ctx, "x\n", "invoke", "nope", "--bidi", "--endpoint-url", "http://"+bidi); !errors.As(err, &ee) || ee.code != 1 || !strings.Contains(ee.msg, "InputValidationError") {
		t.Errorf("an unknown endpoint: %v", err)
	}
}

// runCLIWithInput is runCLI with input on standard input.
func runCLIWithInput(ctx context.Context, input string, args ...string) (string, error) {
	root := newRootCmd()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(input))
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	return out.String(), err
}
