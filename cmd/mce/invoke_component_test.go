package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
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
