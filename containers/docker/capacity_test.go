package docker_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// fourGPUs is NVML (go-nvml's mock) reporting four GPUs.
func fourGPUs() *gpu.Inventory {
	dev := func(i int) *mock.Device {
		return &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", i), nvml.SUCCESS
			},
			GetNameFunc:       func() (string, nvml.Return) { return "Fake GPU", nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 1 << 30, Free: 1 << 30}, nvml.SUCCESS },
			GetMigModeFunc:    func() (int, int, nvml.Return) { return 0, 0, nvml.ERROR_NOT_SUPPORTED },
		}
	}
	return gpu.NewInventory(&mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 4, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return dev(i), nvml.SUCCESS },
	})
}

// TestInferenceComponentGPUPlacement: the Docker engine reports the
// engine's CPUs and memory and NVML's GPUs; copies of a component that
// needs one GPU each are planned with a GPU of their own, as Docker device
// requests for those devices alone, and a fifth copy is reported short.
func TestInferenceComponentGPUPlacement(t *testing.T) {
	// Each copy's plan pins its own devices, and the engine gets a device
	// request for those devices alone.
	var rec *recorder
	h := hostenv.New(t, hostenv.Options{
		Runtime: func(o *docker.Options) { o.GPUs = fourGPUs() },
		Wrap:    func(e *docker.Engine) containers.Engine { rec = &recorder{Engine: e}; return rec },
	})
	c, err := rec.Engine.InstanceCapacity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if c.CPUs < 1 || c.MemoryMiB < 64 || !slices.Equal(c.GPUs, []string{"0", "1", "2", "3"}) {
		t.Fatalf("InstanceCapacity = %+v", c)
	}
	sm := h.SageMakerClient()
	ctx := context.Background()
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("gpus-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlG512xlarge}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("gpus"), EndpointConfigName: aws.String("gpus-config")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, "gpus"); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("llm"),
		EndpointName: aws.String("gpus"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("mce-example/probe:latest")},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128),
				NumberOfAcceleratorDevicesRequired: aws.Float32(1)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(5)}}); err != nil {
		t.Fatal(err)
	}
	d := settledIC(t, sm, "llm")
	// This machine has no NVIDIA runtime: the engine check refuses each
	// copy's device request, and the fifth copy was never placed.
	why := aws.ToString(d.FailureReason)
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToInt32(d.RuntimeConfig.DesiredCopyCount) != 5 ||
		!strings.HasPrefix(why, "0 of 5 copies of the inference component are running. The copies left could not be placed on the 1 instance(s) of variant AllTraffic: not enough accelerator devices (a copy needs 1 whole GPUs of its own; the instance type has 4 per instance, 0 of this machine's 4 GPUs are free).") {
		t.Fatalf("%s %+v %q", d.InferenceComponentStatus, d.RuntimeConfig, why)
	}
	pinned := pinnedDevices(t, rec)
	if !slices.Equal(pinned, []string{"0", "1", "2", "3"}) {
		t.Fatalf("copies pinned to GPUs %v, want 0, 1, 2 and 3 once each", pinned)
	}
}

// settledIC polls component name until it is no longer Creating (a minute
// at most) and returns its description.
func settledIC(t *testing.T, sm *sagemaker.Client, name string) *sagemaker.DescribeInferenceComponentOutput {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(50 * time.Millisecond) {
		d, err := sm.DescribeInferenceComponent(context.Background(), &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusCreating || time.Now().After(deadline) {
			return d
		}
	}
}

// pinnedDevices is the device each copy launched through rec was pinned
// to, sorted, having checked that each copy's plan pins one device and that
// the engine's device request names that one alone.
func pinnedDevices(t *testing.T, rec *recorder) []string {
	t.Helper()
	var pinned []string
	for _, p := range rec.plans() {
		es, err := docker.SpecOf(p)
		if err != nil {
			t.Fatal(err)
		}
		g := es.Variants[0].Containers[0].GPUs
		reqs := docker.DeviceRequestsFor(g, gpu.ModeRuntime, nil)
		if len(g.DeviceIDs) != 1 || len(reqs) != 1 || !slices.Equal(reqs[0].DeviceIDs, g.DeviceIDs) {
			t.Fatalf("copy GPUs %+v, device requests %+v", g, reqs)
		}
		pinned = append(pinned, g.DeviceIDs[0])
	}
	slices.Sort(pinned)
	return pinned
}

// recorder keeps the plans launched through the Docker backend.
type recorder struct {
	*docker.Engine
	mu    sync.Mutex
	saved []containers.EndpointPlan
}

func (r *recorder) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	r.mu.Lock()
	r.saved = append(r.saved, p)
	r.mu.Unlock()
	return r.Engine.Launch(ctx, p, gen)
}

func (r *recorder) plans() []containers.EndpointPlan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.saved)
}

// migGPUs is NVML (go-nvml's mock) reporting GPU 0 whole and GPU 1 in MIG
// mode, carved into two 3g.40gb partitions.
func migGPUs() *gpu.Inventory {
	part := func(j int) *mock.Device {
		return &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("MIG-00000000-0000-0000-0000-00000000000%d", j), nvml.SUCCESS
			},
			GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3 MIG 3g.40gb", nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 40 << 30}, nvml.SUCCESS },
		}
	}
	dev := func(i int) *mock.Device {
		return &mock.Device{
			GetUUIDFunc: func() (string, nvml.Return) {
				return fmt.Sprintf("GPU-00000000-0000-0000-0000-00000000000%d", i), nvml.SUCCESS
			},
			GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
			GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 << 30, Free: 80 << 30}, nvml.SUCCESS },
			GetMigModeFunc: func() (int, int, nvml.Return) {
				if i == 1 {
					return nvml.DEVICE_MIG_ENABLE, nvml.DEVICE_MIG_ENABLE, nvml.SUCCESS
				}
				return nvml.DEVICE_MIG_DISABLE, nvml.DEVICE_MIG_DISABLE, nvml.SUCCESS
			},
			GetMaxMigDeviceCountFunc: func() (int, nvml.Return) { return 7, nvml.SUCCESS },
			GetMigDeviceHandleByIndexFunc: func(j int) (nvml.Device, nvml.Return) {
				if j < 2 {
					return part(j), nvml.SUCCESS
				}
				return nil, nvml.ERROR_NOT_FOUND
			},
		}
	}
	return gpu.NewInventory(&mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 2, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) { return dev(i), nvml.SUCCESS },
	})
}

// TestInferenceComponentPartitionPlacement: on the Docker engine, with NVML
// listing a GPU in MIG mode, a variant whose AcceleratorPartitionLayouts the
// GPU carries goes InService, one whose layout no GPU carries is Failed in
// words that name what is missing, and each copy of a component with an
// AcceleratorPartitionType is planned on a MIG partition of its own, as a
// device request for that partition's UUID; a third copy on two partitions
// is reported short.
func TestInferenceComponentPartitionPlacement(t *testing.T) {
	var rec *recorder
	h := hostenv.New(t, hostenv.Options{
		Runtime: func(o *docker.Options) { o.GPUs = migGPUs() },
		Wrap:    func(e *docker.Engine) containers.Engine { rec = &recorder{Engine: e}; return rec },
	})
	c, err := rec.Engine.InstanceCapacity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(c.GPUs, []string{"0"}) || len(c.Partitions) != 2 || c.Partitions[1] != (containers.Partition{ID: "MIG-00000000-0000-0000-0000-000000000001", Profile: "mig-3g.40gb", GPU: 1}) {
		t.Fatalf("InstanceCapacity = %+v", c)
	}
	sm := h.SageMakerClient()
	ctx := context.Background()
	endpoint := func(name string, layout ...string) *sagemaker.DescribeEndpointOutput {
		t.Helper()
		if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-config"),
			ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
				InstanceType: smtypes.ProductionVariantInstanceType("local_gpu"), AcceleratorPartitionLayouts: []smtypes.AcceleratorPartitionLayout{{AcceleratorPartitionTypes: layout}}}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-config")}); err != nil {
			t.Fatal(err)
		}
		h.Server.WaitEndpoint(ctx, name)
		d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := endpoint("small", "mig-1g.10gb", "mig-1g.10gb"); d.EndpointStatus != smtypes.EndpointStatusFailed ||
		!strings.Contains(aws.ToString(d.FailureReason), "AcceleratorPartitionLayouts asks for mig-1g.10gb ×2 on each GPU, and no GPU of this machine carries them (GPU 1: mig-3g.40gb ×2)") {
		t.Errorf("a layout no GPU carries: %s %q", d.EndpointStatus, aws.ToString(d.FailureReason))
	}
	if d := endpoint("parts", "mig-3g.40gb", "mig-3g.40gb"); d.EndpointStatus != smtypes.EndpointStatusInService {
		t.Fatalf("a layout GPU 1 carries: %s %q", d.EndpointStatus, aws.ToString(d.FailureReason))
	}
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("llm"),
		EndpointName: aws.String("parts"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("mce-example/probe:latest")},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128),
				NumberOfAcceleratorDevicesRequired: aws.Float32(1), AcceleratorPartitionType: aws.String("mig-3g.40gb")}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}}); err != nil {
		t.Fatal(err)
	}
	d := settledIC(t, sm, "llm")
	// No NVIDIA runtime here: the engine refuses each copy's device
	// request; the third copy was never placed.
	why := aws.ToString(d.FailureReason)
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed ||
		!strings.Contains(why, "not enough accelerator partitions (a copy needs one mig-3g.40gb partition, and all 2 of this machine's are held by other copies)") {
		t.Fatalf("%s %+v %q", d.InferenceComponentStatus, d.RuntimeConfig, why)
	}
	pinned := pinnedDevices(t, rec)
	if !slices.Equal(pinned, []string{"MIG-00000000-0000-0000-0000-000000000000", "MIG-00000000-0000-0000-0000-000000000001"}) {
		t.Fatalf("copies pinned to %v, want each MIG partition once", pinned)
	}
}
