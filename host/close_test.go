package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
)

// A Create* whose caller has gone (its context is done) stores nothing and
// launches nothing, and says so with a 400, not an internal error.
func TestCreateAfterTheCallerLeftCreatesNothing(t *testing.T) {
	b := &fakeBackend{t: t}
	s := New(Config{Backend: b, Store: openStore(t), Logger: zerolog.Nop()})
	t.Cleanup(func() { s.Close(context.Background()) })
	gone, cancel := context.WithCancel(t.Context())
	cancel()
	wantEnded := func(what string, err error) {
		t.Helper()
		var api *apierr.Error
		if !errors.As(err, &api) || api.Status != 400 || api.Code != apierr.CodeRequestTimeout || !strings.Contains(api.Message, "nothing was created") {
			t.Fatalf("%s with a done context: err = %v, want a 400 %s saying nothing was created", what, err, apierr.CodeRequestTimeout)
		}
	}

	model := spec.CreateModelInput{ModelName: "m", PrimaryContainer: &spec.ContainerDefinition{Image: "tag"}}
	_, err := s.CreateModel(gone, model, "")
	wantEnded("CreateModel", err)
	if _, err := s.getModel("m"); err == nil {
		t.Fatal("CreateModel stored the model of a caller that had gone")
	}
	if _, err := s.CreateModel(t.Context(), model, ""); err != nil {
		t.Fatal(err)
	}

	cfg := spec.CreateEndpointConfigInput{EndpointConfigName: "c", ProductionVariants: []spec.ProductionVariant{
		{VariantName: "AllTraffic", ModelName: "m", InitialInstanceCount: new(int32(1)), InstanceType: "ml.m5.large"}}}
	_, err = s.CreateEndpointConfig(gone, cfg)
	wantEnded("CreateEndpointConfig", err)
	if _, err := s.getConfig("c"); err == nil {
		t.Fatal("CreateEndpointConfig stored the configuration of a caller that had gone")
	}
	if _, err := s.CreateEndpointConfig(t.Context(), cfg); err != nil {
		t.Fatal(err)
	}

	_, err = s.CreateEndpoint(gone, spec.CreateEndpointInput{EndpointName: "e", EndpointConfigName: "c"})
	wantEnded("CreateEndpoint", err)
	if s.reg.get("e") != nil || b.launches.Load() != 0 {
		t.Fatalf("CreateEndpoint registered or launched the endpoint of a caller that had gone (%d launches)", b.launches.Load())
	}
	// The launch outlives the request that asked for it.
	ctx, cancelCreate := context.WithCancel(t.Context())
	if _, err := s.CreateEndpoint(ctx, spec.CreateEndpointInput{EndpointName: "e", EndpointConfigName: "c"}); err != nil {
		t.Fatal(err)
	}
	cancelCreate()
	wctx, wcancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer wcancel()
	if err := s.WaitEndpoint(wctx, "e"); err != nil {
		t.Fatalf("the endpoint did not come up once its request ended: %v", err)
	}
}

// Close closes every endpoint's generation at once and reports every
// failure.
func TestCloseClosesEveryGenerationAtOnceAndJoinsErrors(t *testing.T) {
	h := newHarness(t, Config{})
	const n = 3
	for i := range n {
		if err := h.deploy(plan(fmt.Sprintf("e%d", i), "Serial", map[string][]string{"AllTraffic": {"c:T"}})); err != nil {
			t.Fatal(err)
		}
	}
	var running atomic.Int32
	all := make(chan struct{})
	h.backend.onClose = func() error {
		if running.Add(1) == n {
			close(all)
		}
		select { // every Close must be under way before any returns
		case <-all:
			return errors.New("close failed")
		case <-time.After(5 * time.Second):
			return errors.New("closed one at a time")
		}
	}
	start := time.Now()
	err := h.srv.Close(t.Context())
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Close took %v: the generations were not closed at once", took)
	}
	if got := h.backend.closed.Load(); got != n {
		t.Fatalf("Close closed %d generations, want %d", got, n)
	}
	if err == nil || strings.Count(err.Error(), "close failed") != n {
		t.Errorf("Close = %v, want the %d failures joined", err, n)
	}
}

// A deletion draining a call in flight does not hold up Close: the drain
// ends with the server's lifetime.
func TestCloseDoesNotWaitOutADeletionsDrain(t *testing.T) {
	h := newHarness(t, Config{ContainerTimeout: time.Minute})
	if err := h.deploy(plan("slow", "Serial", map[string][]string{"AllTraffic": {"c:T"}})); err != nil {
		t.Fatal(err)
	}
	callCtx, endCall := context.WithCancel(t.Context())
	defer endCall()
	called := make(chan error, 1)
	go func() {
		_, err := h.client.InvokeEndpoint(callCtx, &sagemakerruntime.InvokeEndpointInput{
			EndpointName: aws.String("slow"), Body: body("x"), CustomAttributes: aws.String("sleep=50s")})
		called <- err
	}()
	e := h.srv.reg.get("slow")
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if r := e.route.Load(); r != nil && r.Variants()[0].Instances()[0].Outstanding() > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the call never reached the container")
		}
	}
	h.srv.deleteEndpoint(e) // drains the call in flight in the background
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := h.srv.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Close took %v: it waited for the deletion's drain", took)
	}
	if h.backend.closed.Load() != 1 {
		t.Errorf("the deleted endpoint's generation was closed %d times, want once", h.backend.closed.Load())
	}
	endCall()
	<-called
}
