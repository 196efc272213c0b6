package host

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
)

// migBackend is capBackend on a machine whose GPU 0 is whole and whose GPU
// 1 is in MIG mode, carved into two 3g.40gb partitions and one 1g.10gb.
type migBackend struct{ *capBackend }

func (b migBackend) InstanceCapacity(context.Context) (containers.InstanceCapacity, error) {
	return containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0"}, Partitions: []containers.Partition{
		{ID: "MIG-aaaa", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-bbbb", Profile: "mig-3g.40gb", GPU: 1}, {ID: "MIG-cccc", Profile: "mig-1g.10gb", GPU: 1}}}, nil
}

func (b migBackend) PlaceCopies(ctx context.Context, r containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.PlaceCopies(ctx, r)
}

func (b migBackend) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.CopyFits(ctx, v, n)
}

// TestAcceleratorPartitions: a variant's AcceleratorPartitionLayouts and an
// inference component's AcceleratorPartitionType, from aws-sdk-go-v2, as
// SageMaker's developer guide states the rules: the layout is echoed, a
// component on it must name one of its types (and one on a variant without
// a layout must name none), each copy is pinned to a free MIG partition of
// its type by UUID, a copy with none free is refused in words that say so,
// and the layout of a running endpoint does not change.
func TestAcceleratorPartitions(t *testing.T) {
	b := migBackend{&capBackend{fakeBackend: &fakeBackend{t: t}}}
	h := newICHarnessOn(t, nil, Config{}, b, nil)
	sm := h.sm()
	ctx := context.Background()
	layout := []string{"mig-3g.40gb", "mig-3g.40gb", "mig-1g.10gb"}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("mig-config"), ExecutionRoleArn: aws.String(roleARN),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType:                smtypes.ProductionVariantInstanceType("local_gpu"),
			AcceleratorPartitionLayouts: []smtypes.AcceleratorPartitionLayout{{AcceleratorPartitionTypes: layout}}}}}); err != nil {
		t.Fatal(err)
	}
	dc, err := sm.DescribeEndpointConfig(ctx, &sagemaker.DescribeEndpointConfigInput{EndpointConfigName: aws.String("mig-config")})
	if err != nil || len(dc.ProductionVariants[0].AcceleratorPartitionLayouts) != 1 || !slices.Equal(dc.ProductionVariants[0].AcceleratorPartitionLayouts[0].AcceleratorPartitionTypes, layout) {
		t.Fatalf("DescribeEndpointConfig: %+v, %v", dc, err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("mig"), EndpointConfigName: aws.String("mig-config")}); err != nil {
		t.Fatal(err)
	}
	w := sagemaker.NewEndpointInServiceWaiter(sm, func(o *sagemaker.EndpointInServiceWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("mig")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	withType := func(typ string) *smtypes.InferenceComponentSpecification {
		sp := icSpec("", 1, 256, 1)
		sp.ModelName = nil
		sp.Container = &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-" + strings.TrimPrefix(typ, "mig-"))}
		if typ != "" {
			sp.ComputeResourceRequirements.AcceleratorPartitionType = aws.String(typ)
		}
		return sp
	}
	wantMessage(t, createIC(ctx, sm, "whole", "mig", withType(""), 1), "ValidationException",
		"AcceleratorPartitionType is required: variant AllTraffic has an accelerator partition layout (mig-3g.40gb, mig-3g.40gb, mig-1g.10gb).")
	wantMessage(t, createIC(ctx, sm, "other", "mig", withType("mig-2g.20gb"), 1), "ValidationException",
		`AcceleratorPartitionType "mig-2g.20gb" is not declared by the layout of variant AllTraffic: the declared types are mig-1g.10gb, mig-3g.40gb.`)

	if err := createIC(ctx, sm, "big", "mig", withType("mig-3g.40gb"), 2); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "big"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("%s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	var pinned []string
	for _, cp := range h.srv.ics.Get("big").Record().Copies {
		pinned = append(pinned, cp.GPUs...)
	}
	slices.Sort(pinned)
	if !slices.Equal(pinned, []string{"MIG-aaaa", "MIG-bbbb"}) {
		t.Fatalf("copies pinned to %v, want one 3g.40gb partition each", pinned)
	}
	b.mu.Lock()
	var launched []string
	for _, p := range b.plans {
		launched = append(launched, p.Variants[0].Containers[0].GPUs)
	}
	b.mu.Unlock()
	slices.Sort(launched)
	if !slices.Equal(launched, []string{"device=MIG-aaaa", "device=MIG-bbbb"}) {
		t.Errorf("copies launched with GPUs %q", launched)
	}
	if got, err := h.invokeIC("mig", "big"); err != nil || got != "x-3g.40gb" {
		t.Errorf("invoke = %q, %v", got, err)
	}
	// No 3g.40gb partition is left: a third copy waits, and says why.
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("big"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}}); err != nil {
		t.Fatal(err)
	}
	d := waitIC(t, sm, "big")
	if r := aws.ToString(d.FailureReason); aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 ||
		!strings.Contains(r, "accelerator partitions (a copy needs one mig-3g.40gb partition, and all 2 of this machine's are held by other copies)") {
		t.Errorf("a third copy: %s %+v %q", d.InferenceComponentStatus, d.RuntimeConfig, r)
	}
	// The 1g.10gb partition is another component's.
	if err := createIC(ctx, sm, "small", "mig", withType("mig-1g.10gb"), 1); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "small"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("%s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if cp := h.srv.ics.Get("small").Record().Copies; len(cp) != 1 || !slices.Equal(cp[0].GPUs, []string{"MIG-cccc"}) {
		t.Errorf("small's copies %+v", cp)
	}

	// A variant without a layout takes no partition type; whole GPUs.
	createICEndpoint(t, sm, "whole", "local_gpu", 1)
	wantMessage(t, createIC(ctx, sm, "part", "whole", withType("mig-3g.40gb"), 1), "ValidationException",
		`AcceleratorPartitionType "mig-3g.40gb" needs a variant with AcceleratorPartitionLayouts, and variant AllTraffic has none: omit it to place the inference component on whole accelerators.`)
}

// TestAcceleratorPartitionLayoutIsFixed: UpdateEndpoint does not change a
// variant's layout, not even its order.
func TestAcceleratorPartitionLayoutIsFixed(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("A")}}); err != nil {
		t.Fatal(err)
	}
	config := func(name string, layout ...string) {
		t.Helper()
		if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("m"), InitialInstanceCount: aws.Int32(1),
				InstanceType:                smtypes.ProductionVariantInstanceTypeMlG5Xlarge,
				AcceleratorPartitionLayouts: []smtypes.AcceleratorPartitionLayout{{AcceleratorPartitionTypes: layout}}}}}); err != nil {
			t.Fatal(err)
		}
	}
	config("a", "mig-3g.40gb", "mig-1g.10gb")
	config("b", "mig-1g.10gb", "mig-3g.40gb")
	config("c", "mig-3g.40gb", "mig-1g.10gb")
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("e"), EndpointConfigName: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "e", smtypes.EndpointStatusInService)
	_, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("e"), EndpointConfigName: aws.String("b")})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "You can't change the accelerator partition layout of a running endpoint (variant AllTraffic: [mig-3g.40gb, mig-1g.10gb]") {
		t.Fatalf("reordered layout: %s %q", code, msg)
	}
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("e"), EndpointConfigName: aws.String("c")}); err != nil {
		t.Fatalf("the same layout: %v", err)
	}
}
