package host

import (
	"context"
	"fmt"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/internal/sdkhttp"
)

// schedBackend stands in for an engine whose cluster's scheduler places
// copies: a cluster of gpus GPUs in all, no node bigger than that; a launch
// that asks for more than is free fails as the scheduler's verdict.
type schedBackend struct {
	*fakeBackend
	containers.LaunchPlacer // the scheduler decides at launch
	gpus                    int

	mu    sync.Mutex
	used  int
	plans []containers.EndpointPlan
}

var _ containers.CopyPlacer = (*schedBackend)(nil)

func (b *schedBackend) CopyFits(_ context.Context, _ containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	if n.GPUs > b.gpus {
		return fmt.Sprintf("accelerator devices (a copy asks for nvidia.com/gpu: %d, a node has at most %d)", n.GPUs, b.gpus), nil
	}
	return "", nil
}

func (b *schedBackend) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	n, _ := strconv.Atoi(p.Variants[0].Containers[0].GPUs)
	b.mu.Lock()
	b.plans = append(b.plans, p)
	if b.used+n > b.gpus {
		b.mu.Unlock()
		return nil, &containers.UnschedulableError{Short: []string{"accelerator devices"},
			Message: fmt.Sprintf("not enough accelerator devices (0/1 nodes are available: 1 Insufficient nvidia.com/gpu; %d instance(s))", p.Variants[0].CopyInstances)}
	}
	b.used += n
	b.mu.Unlock()
	l, err := b.fakeBackend.Launch(ctx, p, gen)
	if err != nil {
		return nil, err
	}
	return &schedLaunched{Launched: l, free: func() { b.mu.Lock(); b.used -= n; b.mu.Unlock() }}, nil
}

type schedLaunched struct {
	containers.Launched
	once sync.Once
	free func()
}

func (l *schedLaunched) Close(ctx context.Context) error {
	l.once.Do(l.free)
	return l.Launched.Close(ctx)
}

// TestInferenceComponentsPlacedByTheScheduler: on an engine whose scheduler
// places copies, mce pins no GPU and packs nothing; copies carry their
// resources (GPUs as a count, memory request Min and limit Max) and the
// variant's instance bound; a copy the scheduler refuses is reported, the
// others serve; scaling to 0 frees what they held.
func TestInferenceComponentsPlacedByTheScheduler(t *testing.T) {
	b := &schedBackend{fakeBackend: &fakeBackend{t: t}, gpus: 2}
	s := New(Config{Backend: b, Logger: zerolog.Nop(), Store: openStore(t)})
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close(context.Background())
	})
	rt := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: hs.Client()}})
	h := &harness{t: t, srv: s, http: hs, backend: b.fakeBackend, client: rt}
	sm := h.sm()
	ctx := context.Background()

	// A variant of 1 instance whose ManagedInstanceScaling allows 3.
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("k-config"),
		ExecutionRoleArn: aws.String(roleARN),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"),
			InitialInstanceCount: aws.Int32(1), InstanceType: "ml.g5.xlarge",
			ManagedInstanceScaling: &smtypes.ProductionVariantManagedInstanceScaling{Status: smtypes.ManagedInstanceScalingStatusEnabled,
				MinInstanceCount: aws.Int32(1), MaxInstanceCount: aws.Int32(3)}}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("k"), EndpointConfigName: aws.String("k-config")}); err != nil {
		t.Fatal(err)
	}
	cfg, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("k-config")})
	if err != nil {
		t.Fatal(err)
	}
	if m := cfg.ProductionVariants[0].ManagedInstanceScaling; m == nil || aws.ToInt32(m.MaxInstanceCount) != 3 || m.Status != smtypes.ManagedInstanceScalingStatusEnabled {
		t.Fatalf("ManagedInstanceScaling echoed as %+v", m)
	}

	container := func(tag string, gpus float32) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(tag)},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.5),
				MinMemoryRequiredInMb: aws.Int32(256), MaxMemoryRequiredInMb: aws.Int32(512), NumberOfAcceleratorDevicesRequired: aws.Float32(gpus)}}
	}
	// The pre-flight is the engine's: no node has 3 GPUs.
	err = createIC(ctx, sm, "huge", "k", container("-h", 3), 1)
	wantMessage(t, err, "ResourceLimitExceeded", "One copy of the inference component needs more than an instance of variant AllTraffic (ml.g5.xlarge) has: not enough accelerator devices (a copy asks for nvidia.com/gpu: 3, a node has at most 2).")

	if err := createIC(ctx, sm, "g", "k", container("-g", 1), 3); err != nil {
		t.Fatal(err)
	}
	d := waitIC(t, sm, "g")
	want := "2 of 3 copies of the inference component are running. The copies left could not be placed: not enough accelerator devices (0/1 nodes are available: 1 Insufficient nvidia.com/gpu; 3 instance(s))"
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToString(d.FailureReason) != want ||
		aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 || aws.ToInt32(d.RuntimeConfig.DesiredCopyCount) != 3 {
		t.Fatalf("%s %+v %q\nwant Failed, 2 of 3, %q", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason), want)
	}
	if got, err := h.invokeIC("k", "g"); err != nil || got != "x-g" {
		t.Fatalf("invoke the copies that run = %q, %v", got, err)
	}
	b.mu.Lock()
	for _, p := range b.plans {
		v := p.Variants[0]
		c := v.Containers[0]
		if c.GPUs != "1" || c.Resources.Cpus != 0.5 || c.Resources.MemoryMiB != 512 || c.MemoryRequestMiB != 256 || v.CopyInstances != 3 {
			t.Errorf("copy plan: GPUs %q, resources %+v, memory request %d, instances %d; want a count of 1, 0.5 cores, 512 MiB limit, 256 MiB request, 3 instances",
				c.GPUs, c.Resources, c.MemoryRequestMiB, v.CopyInstances)
		}
	}
	b.mu.Unlock()
	for _, r := range s.ics.Get("g").Record().Copies {
		if r.Instance != -1 || len(r.GPUs) != 0 {
			t.Errorf("copy record %+v: the scheduler places it; mce pins nothing", r)
		}
	}
	rec := httptest.NewRecorder()
	s.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if line := `mce_inference_component_gpus{endpoint="k",inference_component="g",variant="AllTraffic"} 2`; !strings.Contains(rec.Body.String(), line) {
		t.Errorf("metrics lack %s", line)
	}

	// To 0 and back: what the copies held is free again.
	for _, n := range []int32{0, 2} {
		if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("g"),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(10 * time.Millisecond)
		d := waitIC(t, sm, "g")
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != n {
			t.Fatalf("scaled to %d: %s %+v %q", n, d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
		}
	}
}
