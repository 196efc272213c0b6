package host_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/aws/smithy-go"
)

// statefulFile is a 3-instance variant of the probe (sessions) and a
// 3-instance PREFIX_AWARE variant with a threshold of 2 (prefixes).
const statefulFile = `
Models:
  - ModelName: probe
    PrimaryContainer: {Image: mce-example/probe:latest}
EndpointConfigs:
  - EndpointConfigName: stateful
    ProductionVariants:
      - {VariantName: AllTraffic, ModelName: probe, InitialInstanceCount: 3, InstanceType: ml.c5.large}
  - EndpointConfigName: prefixes
    ProductionVariants:
      - VariantName: AllTraffic
        ModelName: probe
        InitialInstanceCount: 3
        InstanceType: ml.c5.large
        RoutingConfig:
          RoutingStrategy: PREFIX_AWARE
          PrefixAwareRoutingConfig: {PrefixLength: 1024, ConcurrencyThreshold: 2}
Endpoints:
  - {EndpointName: stateful, EndpointConfigName: stateful}
  - {EndpointName: prefixes, EndpointConfigName: prefixes}
`

func statefulHost(t *testing.T) *sagemakerruntime.Client {
	file := filepath.Join(t.TempDir(), "stateful.yaml")
	if err := os.WriteFile(file, []byte(statefulFile), 0o644); err != nil {
		t.Fatal(err)
	}
	return dockerHost(t, file)
}

func wantValidation(t *testing.T, err error, part string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.Contains(ae.ErrorMessage(), part) {
		t.Fatalf("err = %v, want a ValidationError naming %q", err, part)
	}
}

// TestSessionsOnDocker: 1,000 calls across 20 sessions on a 3-instance
// variant each land on the instance that opened their session (the probe
// answers with its hostname and the session's count of calls); a closed
// or expired session gets the ValidationError.
func TestSessionsOnDocker(t *testing.T) {
	c := statefulHost(t)
	type session struct{ id, host string }
	var ss []session
	hosts := map[string]int{}
	for range 20 {
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: []byte("{}"),
			SessionId: aws.String("NEW_SESSION")})
		if err != nil {
			t.Fatal(err)
		}
		id, _, ok := strings.Cut(aws.ToString(out.NewSessionId), ";")
		var a struct{ Instance, Session string }
		if !ok || json.Unmarshal(out.Body, &a) != nil || a.Session != id {
			t.Fatalf("NEW_SESSION: NewSessionId %q, body %s", aws.ToString(out.NewSessionId), out.Body)
		}
		ss = append(ss, session{id, a.Instance})
		hosts[a.Instance]++
	}
	t.Logf("sessions per instance: %v", hosts)
	if len(hosts) != 3 {
		t.Errorf("20 sessions opened on %d instances, want 3 (%v)", len(hosts), hosts)
	}
	var mu sync.Mutex
	calls := make([]int, len(ss))
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < 1000; i += 8 {
				k := i % len(ss)
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				out, err := c.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"),
					Body: []byte("{}"), SessionId: aws.String(ss[k].id)})
				cancel()
				if err != nil {
					errs <- fmt.Errorf("call %d of session %s: %w", i, ss[k].id, err)
					return
				}
				var a struct{ Instance string }
				if json.Unmarshal(out.Body, &a) != nil || a.Instance != ss[k].host {
					errs <- fmt.Errorf("call %d of session %s (opened on %s) answered by %s", i, ss[k].id, ss[k].host, out.Body)
					return
				}
				mu.Lock()
				calls[k]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k, n := range calls {
		if n != 50 {
			t.Errorf("session %d: %d calls on its instance, want 50", k, n)
		}
	}

	// Close: ClosedSessionId comes back; the session is then refused.
	out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: []byte("{}"),
		SessionId: aws.String(ss[0].id), CustomAttributes: aws.String("close-session")})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(out.ClosedSessionId) != ss[0].id {
		t.Fatalf("ClosedSessionId = %q, want %q", aws.ToString(out.ClosedSessionId), ss[0].id)
	}
	_, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: []byte("{}"),
		SessionId: aws.String(ss[0].id)})
	wantValidation(t, err, "Session "+ss[0].id+" is not an open session")

	// Expiry: a one-second session is refused once it passed.
	out, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: []byte("{}"),
		SessionId: aws.String("NEW_SESSION"), CustomAttributes: aws.String("session-ttl=1s")})
	if err != nil {
		t.Fatal(err)
	}
	short, _, _ := strings.Cut(aws.ToString(out.NewSessionId), ";")
	time.Sleep(2 * time.Second)
	_, err = invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("stateful"), Body: []byte("{}"),
		SessionId: aws.String(short)})
	wantValidation(t, err, short)

	// The response stream takes an open session.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	st, err := c.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("stateful"), Body: []byte("{}"), SessionId: aws.String(ss[1].id)})
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	for ev := range st.GetStream().Events() {
		if p, ok := ev.(*types.ResponseStreamMemberPayloadPart); ok {
			got = append(got, p.Value.Bytes...)
		}
	}
	st.GetStream().Close()
	var a struct{ Instance string }
	if json.Unmarshal(got, &a) != nil || a.Instance != ss[1].host {
		t.Fatalf("stream of session %s (opened on %s) answered %q", ss[1].id, ss[1].host, got)
	}
}

// TestPrefixAwareOnDocker measures PREFIX_AWARE on three probes with a
// threshold of 2: one at a time, calls sharing their first 1,024 bytes land
// on one instance; held concurrently, the third and later spill to the
// others.
func TestPrefixAwareOnDocker(t *testing.T) {
	c := statefulHost(t)
	prefix := strings.Repeat("You are a helpful assistant. ", 40)[:1024]
	hostOf := func(body, attrs string) string {
		out, err := invoke(t, c, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("prefixes"),
			Body: []byte(body), CustomAttributes: aws.String(attrs)})
		if err != nil {
			t.Fatal(err)
		}
		var info struct{ Instance string }
		if err := json.Unmarshal(out.Body, &info); err != nil || info.Instance == "" {
			t.Fatalf("info: %s", out.Body)
		}
		return info.Instance
	}
	owner := hostOf(prefix+"question 0", "info")
	for i := range 50 {
		if h := hostOf(prefix+fmt.Sprint("question ", i), "info"); h != owner {
			t.Fatalf("call %d sharing the prefix went to %s, the prefix's instance is %s", i, h, owner)
		}
	}
	distinct := map[string]bool{}
	for i := range 60 {
		distinct[hostOf(fmt.Sprintf("%04d", i)+prefix, "info")] = true
	}
	if len(distinct) != 3 {
		t.Errorf("60 different prefixes used %d instances, want 3", len(distinct))
	}
	// Six held calls, started 100 ms apart: two fill the owner up to the
	// threshold, the other four go elsewhere.
	var mu sync.Mutex
	count := map[string]int{}
	var wg sync.WaitGroup
	for i := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			h := hostOf(prefix+fmt.Sprint("held ", i), "sleep=2s,info")
			mu.Lock()
			count[h]++
			mu.Unlock()
		}()
		time.Sleep(100 * time.Millisecond)
	}
	wg.Wait()
	t.Logf("held calls per instance: %v (owner %s)", count, owner)
	if count[owner] != 2 {
		t.Errorf("the prefix's instance took %d of 6 held calls, want the threshold, 2", count[owner])
	}
}
