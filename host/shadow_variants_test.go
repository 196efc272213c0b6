package host

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	rttypes "github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/pipeline"
)

// createShadowed makes, with the SDK, an endpoint name whose production
// variant AllTraffic runs one fake container "prod" (tag -prod) and whose
// shadow variant Shadow runs one fake container "shadow" (tag -shadow) of
// weight shadowWeight, and waits for InService.
func createShadowed(t *testing.T, h *harness, name string, shadowWeight float64) {
	t.Helper()
	sm, ctx := h.sm(), context.Background()
	for _, m := range []string{"prod", "shadow"} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name + "-" + m),
			Containers: []smtypes.ContainerDefinition{{ContainerHostname: aws.String(m), Image: aws.String("-" + m)}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(name + "-prod"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large, InitialVariantWeight: aws.Float32(1)}},
		ShadowProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("Shadow"), ModelName: aws.String(name + "-shadow"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large,
			InitialVariantWeight: aws.Float32(float32(shadowWeight))}},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-config")}); err != nil {
		t.Fatal(err)
	}
	waitInService(t, sm, name)
}

func waitInService(t *testing.T, sm *sagemaker.Client, name string) {
	t.Helper()
	w := sagemaker.NewEndpointInServiceWaiter(sm, func(o *sagemaker.EndpointInServiceWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}, 60*time.Second); err != nil {
		t.Fatal(err)
	}
}

// metricsText scrapes the API listener's /metrics (Config.MetricsOnAPI).
func (h *harness) metricsText(t *testing.T) string {
	t.Helper()
	resp, err := h.http.Client().Get(h.http.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// eventually waits, generously, until cond holds.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestShadowVariant: with aws-sdk-go-v2 on both APIs, a shadow variant of
// weight 1 gets a copy of every production call (InvokeEndpoint, its
// response stream, and a call its production container failed), never
// answers one, has its own series, is listed by DescribeEndpoint and
// echoed by DescribeEndpointConfig, can be re-weighted and scaled by
// UpdateEndpointWeightsAndCapacities (weight 0: no more copies), and goes
// with its endpoint.
func TestShadowVariant(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	sm, ctx := h.sm(), context.Background()
	createShadowed(t, h, "sh", 1)
	shadowC := h.backend.container("sh/Shadow/shadow")
	prodC := h.backend.container("sh/AllTraffic/prod")
	if shadowC == nil || prodC == nil {
		t.Fatal("the fake backend launched no container for a variant")
	}

	for range 20 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("sh"), Body: body("x")})
		if err != nil {
			t.Fatal(err)
		}
		if string(out.Body) != "x-prod" || aws.ToString(out.InvokedProductionVariant) != "AllTraffic" {
			t.Fatalf("answer %q from %s, want the production variant's", out.Body, aws.ToString(out.InvokedProductionVariant))
		}
	}
	st, err := h.client.InvokeEndpointWithResponseStream(ctx, &sagemakerruntime.InvokeEndpointWithResponseStreamInput{
		EndpointName: aws.String("sh"), Body: body("s")})
	if err != nil {
		t.Fatal(err)
	}
	var streamed strings.Builder
	for ev := range st.GetStream().Events() {
		if p, ok := ev.(*rttypes.ResponseStreamMemberPayloadPart); ok {
			streamed.Write(p.Value.Bytes)
		}
	}
	st.GetStream().Close()
	if streamed.String() != "s-prod" {
		t.Fatalf("streamed answer %q, want the production variant's", streamed.String())
	}
	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("sh"), Body: body("f"),
		CustomAttributes: aws.String("fail=prod:400")})
	wantAPIError(t, err, "ModelError", "400")
	eventually(t, "22 copies at the shadow", func() bool { return shadowC.calls.Load() == 22 })
	if n := prodC.calls.Load(); n != 22 {
		t.Errorf("production container got %d calls, want 22", n)
	}
	eventually(t, "the shadow's series", func() bool {
		return strings.Contains(h.metricsText(t), `mce_invocations_total{endpoint="sh",variant="Shadow"} 22`)
	})
	text := h.metricsText(t)
	for _, want := range []string{
		`mce_invocations_total{endpoint="sh",variant="AllTraffic"} 22`,
		`mce_model_latency_seconds_count{endpoint="sh",variant="Shadow"} 22`,
		`mce_invocation_4xx_errors_total{endpoint="sh",variant="Shadow"} 0`,
		`mce_container_invocations_total{container="shadow",endpoint="sh",variant="Shadow"} 22`,
		`mce_variant_desired_instances{endpoint="sh",variant="Shadow"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}

	_, err = h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("sh"), Body: body("x"), TargetVariant: aws.String("Shadow")})
	wantAPIError(t, err, "ValidationError", "Variant Shadow is a shadow variant of endpoint sh")

	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("sh")})
	if err != nil {
		t.Fatal(err)
	}
	if len(d.ProductionVariants) != 1 || aws.ToString(d.ProductionVariants[0].VariantName) != "AllTraffic" ||
		len(d.ShadowProductionVariants) != 1 || aws.ToString(d.ShadowProductionVariants[0].VariantName) != "Shadow" ||
		aws.ToFloat32(d.ShadowProductionVariants[0].CurrentWeight) != 1 || aws.ToInt32(d.ShadowProductionVariants[0].CurrentInstanceCount) != 1 ||
		len(d.ShadowProductionVariants[0].DeployedImages) != 1 || aws.ToString(d.ShadowProductionVariants[0].DeployedImages[0].SpecifiedImage) != "-shadow" {
		t.Fatalf("DescribeEndpoint: production %+v, shadow %+v", d.ProductionVariants, d.ShadowProductionVariants)
	}
	dc, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("sh-config")})
	if err != nil {
		t.Fatal(err)
	}
	if len(dc.ShadowProductionVariants) != 1 || aws.ToString(dc.ShadowProductionVariants[0].ModelName) != "sh-shadow" {
		t.Errorf("DescribeEndpointConfig's ShadowProductionVariants = %+v", dc.ShadowProductionVariants)
	}
	le, err := sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{})
	if err != nil || len(le.Endpoints) != 1 || aws.ToString(le.Endpoints[0].EndpointName) != "sh" {
		t.Errorf("ListEndpoints = %+v, %v; want the one endpoint", le, err)
	}

	if _, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("sh"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("Shadow"),
			DesiredWeight: aws.Float32(0), DesiredInstanceCount: aws.Int32(2)}}}); err != nil {
		t.Fatal(err)
	}
	waitInService(t, sm, "sh")
	d, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("sh")})
	if err != nil {
		t.Fatal(err)
	}
	if s := d.ShadowProductionVariants; len(s) != 1 || aws.ToFloat32(s[0].CurrentWeight) != 0 || aws.ToInt32(s[0].CurrentInstanceCount) != 2 {
		t.Fatalf("after the update, shadow = %+v, want weight 0 and 2 instances", s)
	}
	for range 10 {
		if _, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("sh"), Body: body("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if n := shadowC.calls.Load(); n != 22 {
		t.Errorf("a shadow of weight 0 got copies: %d calls, want still 22", n)
	}

	closedBefore := h.backend.closed.Load()
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("sh")}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the endpoint gone", func() bool { return h.srv.reg.get("sh") == nil })
	if h.backend.closed.Load() == closedBefore {
		t.Error("deleting the endpoint closed no launched generation")
	}
	if strings.Contains(h.metricsText(t), `variant="Shadow"`) {
		t.Error("the deleted endpoint's shadow series are still served")
	}
}

// TestShadowIsolation: a shadow that fails, or never answers, leaves every
// production answer as it was and as fast: the production calls never
// wait for it; the copies a silent shadow holds stop at their bound and
// those beyond are dropped and counted.
func TestShadowIsolation(t *testing.T) {
	h := newHarness(t, Config{MetricsOnAPI: true})
	createShadowed(t, h, "iso", 1)
	shadowC := h.backend.container("iso/Shadow/shadow")

	call := func(attrs string) time.Duration {
		t.Helper()
		start := time.Now()
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("iso"), Body: body("x"),
			CustomAttributes: aws.String(attrs)})
		if err != nil {
			t.Fatalf("production call with %s: %v", attrs, err)
		}
		if string(out.Body) != "x-prod" {
			t.Fatalf("production answer %q with %s", out.Body, attrs)
		}
		return time.Since(start)
	}
	for range 10 {
		call("fail=shadow:500")
	}
	eventually(t, "10 failed copies counted", func() bool {
		return strings.Contains(h.metricsText(t), `mce_invocation_5xx_errors_total{endpoint="iso",variant="Shadow"} 10`)
	})

	const calls = 70 // DefaultShadowInFlight (64) copies held, then 6 dropped
	var slowest time.Duration
	for range calls {
		slowest = max(slowest, call("sleepon=shadow:1h"))
	}
	if slowest > 5*time.Second {
		t.Errorf("with a silent shadow the slowest production call took %v", slowest)
	}
	eventually(t, "the silent shadow holding its bound", func() bool { return shadowC.inside.Load() == 64 })
	text := h.metricsText(t)
	if want := `mce_shadow_copies_dropped_total{endpoint="iso",reason="in_flight",variant="Shadow"} 6`; !strings.Contains(text, want) {
		t.Errorf("/metrics lacks %s", want)
	}
	if want := `mce_invocations_total{endpoint="iso",variant="AllTraffic"} 80`; !strings.Contains(text, want) {
		t.Errorf("/metrics lacks %s", want)
	}
}

// TestShadowRefusals: what SageMaker refuses of shadow variants, and its
// InferenceExperiment operations, which mce does not serve.
func TestShadowRefusals(t *testing.T) {
	h := newHarness(t, Config{})
	sm, ctx := h.sm(), context.Background()
	for _, m := range []struct {
		name  string
		hosts []string
	}{{"one", []string{"a"}}, {"two", []string{"a", "b"}}} {
		in := &sagemaker.CreateModelInput{ModelName: aws.String(m.name)}
		for _, host := range m.hosts {
			in.Containers = append(in.Containers, smtypes.ContainerDefinition{ContainerHostname: aws.String(host), Image: aws.String("-" + host)})
		}
		if _, err := sm.CreateModel(ctx, in); err != nil {
			t.Fatal(err)
		}
	}
	variant := func(name, model string) smtypes.ProductionVariant {
		return smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String(model),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}
	}
	for _, tt := range []struct {
		name string
		in   sagemaker.CreateEndpointConfigInput
		want string
	}{
		{"two shadows", sagemaker.CreateEndpointConfigInput{ProductionVariants: []smtypes.ProductionVariant{variant("p", "one")},
			ShadowProductionVariants: []smtypes.ProductionVariant{variant("s1", "one"), variant("s2", "one")}},
			"you can only specify one variant for ProductionVariants and one variant for ShadowProductionVariants"},
		{"multi-container shadow", sagemaker.CreateEndpointConfigInput{ProductionVariants: []smtypes.ProductionVariant{variant("p", "one")},
			ShadowProductionVariants: []smtypes.ProductionVariant{variant("s", "two")}},
			`SageMaker does not run shadow variants on multiple-container endpoints; model "two" of variant "s" has 2 containers.`},
		{"shadow of a missing model", sagemaker.CreateEndpointConfigInput{ProductionVariants: []smtypes.ProductionVariant{variant("p", "one")},
			ShadowProductionVariants: []smtypes.ProductionVariant{variant("s", "none")}}, "Could not find model"},
		{"asynchronous", sagemaker.CreateEndpointConfigInput{ProductionVariants: []smtypes.ProductionVariant{variant("p", "one")},
			ShadowProductionVariants: []smtypes.ProductionVariant{variant("s", "one")},
			AsyncInferenceConfig:     &smtypes.AsyncInferenceConfig{OutputConfig: &smtypes.AsyncInferenceOutputConfig{S3OutputPath: aws.String("s3://b/out")}}},
			"SageMaker does not run shadow variants on asynchronous inference endpoints"},
	} {
		tt.in.EndpointConfigName = aws.String("c")
		_, err := sm.CreateEndpointConfig(ctx, &tt.in)
		code, msg := apiCode(t, err)
		if code != apierr.CodeValidationException || !strings.Contains(msg, tt.want) {
			t.Errorf("%s: %s %q, want ValidationException with %q", tt.name, code, msg, tt.want)
		}
	}
	_, err := sm.CreateInferenceExperiment(ctx, &sagemaker.CreateInferenceExperimentInput{Name: aws.String("x"),
		Type: smtypes.InferenceExperimentTypeShadowMode, EndpointName: aws.String("e"), RoleArn: aws.String("arn:aws:iam::123456789012:role/r"),
		ModelVariants: []smtypes.ModelVariantConfig{{ModelName: aws.String("one"), VariantName: aws.String("v"),
			InfrastructureConfig: &smtypes.ModelInfrastructureConfig{InfrastructureType: smtypes.ModelInfrastructureTypeRealTimeInference,
				RealTimeInferenceConfig: &smtypes.RealTimeInferenceConfig{InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large, InstanceCount: aws.Int32(1)}}}},
		ShadowModeConfig: &smtypes.ShadowModeConfig{SourceModelVariantName: aws.String("v"),
			ShadowModelVariants: []smtypes.ShadowModelVariantConfig{{ShadowModelVariantName: aws.String("s"), SamplingPercentage: aws.Int32(50)}}}})
	code, msg := apiCode(t, err)
	if code != apierr.CodeUnknownOperation || !strings.Contains(msg, "CreateInferenceExperiment") || !strings.Contains(msg, "ShadowProductionVariants") {
		t.Errorf("CreateInferenceExperiment: %s %q, want %s naming ShadowProductionVariants", code, msg, apierr.CodeUnknownOperation)
	}
	_, err = sm.ListInferenceExperiments(ctx, &sagemaker.ListInferenceExperimentsInput{})
	if code, msg := apiCode(t, err); code != apierr.CodeUnknownOperation || !strings.Contains(msg, "ShadowProductionVariants") {
		t.Errorf("ListInferenceExperiments: %s %q", code, msg)
	}
}

// shadowBenchBackend launches the production variant on one loopback
// server and the shadow on another.
type shadowBenchBackend struct{ prod, shadow string }

func (b shadowBenchBackend) Launch(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return shadowBenchLaunched(b), nil
}
func (b shadowBenchBackend) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return shadowBenchLaunched(b), nil
}
func (shadowBenchBackend) Reconcile(context.Context) error { return nil }

type shadowBenchLaunched shadowBenchBackend

func (l shadowBenchLaunched) Copies(v string) [][]pipeline.Container {
	if v == "Shadow" {
		return [][]pipeline.Container{{benchContainer{l.shadow}}}
	}
	return [][]pipeline.Container{{benchContainer{l.prod}}}
}
func (shadowBenchLaunched) Scale(context.Context, string, int) error { return nil }
func (shadowBenchLaunched) Close(context.Context) error              { return nil }

// BenchmarkInvokeShadow is the host's whole InvokeEndpoint path (as
// BenchmarkInvoke) for one client, calls one after another, with no shadow
// and beside a shadow variant of weight 1 that answers as fast, sleeps
// 200 ms, or answers 500; it reports the production calls' p50 and p99,
// to compare as ratios within one run:
//
//	go test -run '^$' -bench InvokeShadow -benchmem ./host/
func BenchmarkInvokeShadow(b *testing.B) {
	echo := func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		io.Copy(w, r.Body)
	}
	servers := map[string]http.HandlerFunc{
		"fast": echo,
		"slow": func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-time.After(200 * time.Millisecond):
			case <-r.Context().Done():
			}
			echo(w, r)
		},
		"failing": func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) },
	}
	urls := map[string]string{}
	for name, h := range servers {
		srv := httptest.NewServer(h)
		defer srv.Close()
		urls[name] = srv.URL
	}
	for _, shadow := range []string{"none", "fast", "slow", "failing"} {
		b.Run(shadow, func(b *testing.B) {
			s := New(Config{Backend: shadowBenchBackend{urls["fast"], urls[shadow]}, Store: openStore(b), Logger: zerolog.Nop()})
			defer s.Close(context.Background())
			p := plan("bench", "Serial", map[string][]string{"AllTraffic": {"echo:e"}, "Shadow": {"echo:s"}})
			if shadow == "none" {
				p.Variants = p.Variants[:1]
			} else {
				p.Variants[1].Shadow = true
			}
			if _, err := s.startEndpoint(p, nil, p.ConfigName, nil); err != nil {
				b.Fatal(err)
			}
			if err := s.WaitEndpoint(context.Background(), "bench"); err != nil {
				b.Fatal(err)
			}
			h := s.Handler()
			payload := bytes.Repeat([]byte("x"), 1024)
			lat := make([]time.Duration, 0, 1<<16)
			b.ReportAllocs()
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/endpoints/bench/invocations", bytes.NewReader(payload))
				req.Header.Set("Content-Type", "text/plain")
				w := httptest.NewRecorder()
				t0 := time.Now()
				h.ServeHTTP(w, req)
				lat = append(lat, time.Since(t0))
				if w.Code != 200 {
					b.Fatalf("status %d: %s", w.Code, w.Body)
				}
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds())/1e3, "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Nanoseconds())/1e3, "p99-µs")
		})
	}
}
