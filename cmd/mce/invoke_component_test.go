package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/store"
)

// TestInvokeInferenceComponent: mce invoke --inference-component sends the
// component's name in SageMaker's header, in both call styles.
func TestInvokeInferenceComponent(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+" "+r.Header.Get("X-Amzn-SageMaker-Inference-Component"))
		mu.Unlock()
		w.Header().Set("Content-Type", "text/plain")
		w.Write([]byte("ok"))
	}))
	defer srv.Close()
	var out, errOut strings.Builder
	f := invokeFlags{endpointURL: srv.URL, region: "us-east-1", timeout: 10 * time.Second, component: "comp-a"}
	if err := invoke(context.Background(), f, []string{"shared", "hello"}, strings.NewReader(""), &out, &errOut); err != nil {
		t.Fatalf("invoke: %v (%s)", err, errOut.String())
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "/endpoints/shared/invocations comp-a" || out.String() != "ok\n" {
		t.Fatalf("requests %q, output %q", seen, out.String())
	}
}

// TestEndpointsListsComponents: mce endpoints lists an endpoint's inference
// components with their copies and failure reason.
func TestEndpointsListsComponents(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	srv := host.New(host.Config{Backend: failingEngine{}, Store: st, Logger: zerolog.Nop()})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() { hs.Close(); srv.Close(context.Background()) })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL), Credentials: aws.AnonymousCredentials{}})
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c"),
		ExecutionRoleArn:   aws.String("arn:aws:iam::123456789012:role/r"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlC5Large}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("shared"), EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatal(err)
	}
	if err := srv.WaitEndpoint(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("comp"),
		EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("missing-image")},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	var out string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if out, err = runCLI(ctx, "endpoints", "--endpoint-url", hs.URL); err != nil {
			t.Fatalf("mce endpoints: %v\n%s", err, out)
		}
		if strings.Contains(out, "Failed") {
			break
		}
	}
	if d, err := runCLI(ctx, "describe", "comp", "--endpoint-url", hs.URL); err != nil || !strings.Contains(d, `"InferenceComponentStatus": "Failed"`) || !strings.Contains(d, `"DesiredCopyCount": 1`) || strings.Contains(d, `: ""`) {
		t.Errorf("mce describe comp: %v\n%s", err, d)
	}
	if !strings.Contains(out, "INFERENCE COMPONENT") || !regexp.MustCompile(`comp +shared +AllTraffic +Failed +0/1 +0 of 1 copies .*image missing-image not found`).MatchString(out) {
		t.Fatalf("mce endpoints:\n%s", out)
	}
}
