package host

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
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
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/sdkhttp"
	"github.com/mce-run/mce/internal/testenv"
)

// capBackend is the fake backend with a machine of 8 cores, 16 GiB and 4
// GPUs, on which it places copies as the Docker engine does; it keeps
// every plan it launched.
type capBackend struct {
	*fakeBackend
	mu    sync.Mutex
	plans map[int]containers.EndpointPlan // by generation (copy ID)
}

func (b *capBackend) InstanceCapacity(context.Context) (containers.InstanceCapacity, error) {
	return containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0", "1", "2", "3"}}, nil
}

func (b *capBackend) PlaceCopies(ctx context.Context, r containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.PlaceCopies(ctx, r)
}

func (b *capBackend) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.CopyFits(ctx, v, n)
}

func (b *capBackend) KeepsCopy(v containers.CopyVariant, p containers.CopyPlace) bool {
	return docker.Packer{}.KeepsCopy(v, p)
}

func (b *capBackend) Launch(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	b.mu.Lock()
	if b.plans == nil {
		b.plans = map[int]containers.EndpointPlan{}
	}
	b.plans[gen] = p
	b.mu.Unlock()
	return b.fakeBackend.Launch(ctx, p, gen)
}

func newICHarness(t testing.TB, st *store.Store) (*harness, *capBackend) {
	return newICHarnessWith(t, st, Config{})
}

func newICHarnessWith(t testing.TB, st *store.Store, cfg Config) (*harness, *capBackend) {
	t.Helper()
	b := &capBackend{fakeBackend: &fakeBackend{t: t}}
	if st == nil {
		st = openStore(t)
	}
	cfg.Backend, cfg.Logger, cfg.Store = b, zerolog.Nop(), st
	s := New(cfg)
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close(context.Background())
	})
	client := sagemakerruntime.New(sagemakerruntime.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: &sdkhttp.Client{Next: hs.Client()}})
	return &harness{t: t, srv: s, http: hs, backend: b.fakeBackend, client: client}, b
}

const roleARN = "arn:aws:iam::123456789012:role/mce-ic"

// createICEndpoint makes an endpoint for inference components with one
// variant of count instances of type it.
func createICEndpoint(t testing.TB, sm *sagemaker.Client, name, it string, count int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-config"),
		ExecutionRoleArn: aws.String(roleARN),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"),
			InitialInstanceCount: aws.Int32(count), InstanceType: smtypes.ProductionVariantInstanceType(it)}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-config")}); err != nil {
		t.Fatal(err)
	}
	w := sagemaker.NewEndpointInServiceWaiter(sm, func(o *sagemaker.EndpointInServiceWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
}

// waitIC polls DescribeInferenceComponent while the component is Creating,
// Updating or Deleting, as the SageMaker Python SDK does.
func waitIC(t testing.TB, sm *sagemaker.Client, name string) *sagemaker.DescribeInferenceComponentOutput {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		d, err := sm.DescribeInferenceComponent(context.Background(), &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		switch d.InferenceComponentStatus {
		case smtypes.InferenceComponentStatusCreating, smtypes.InferenceComponentStatusUpdating, smtypes.InferenceComponentStatusDeleting:
		default:
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("inference component %s still %s", name, d.InferenceComponentStatus)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func icSpec(model string, cpus float64, memMiB int32, gpus float64) *smtypes.InferenceComponentSpecification {
	r := &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(memMiB)}
	if cpus > 0 {
		r.NumberOfCpuCoresRequired = aws.Float32(float32(cpus))
	}
	if gpus > 0 {
		r.NumberOfAcceleratorDevicesRequired = aws.Float32(float32(gpus))
	}
	return &smtypes.InferenceComponentSpecification{ModelName: aws.String(model), ComputeResourceRequirements: r}
}

func createIC(ctx context.Context, sm *sagemaker.Client, name, endpoint string, sp *smtypes.InferenceComponentSpecification, copies int32) error {
	_, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
		EndpointName: aws.String(endpoint), VariantName: aws.String("AllTraffic"), Specification: sp,
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(copies)}})
	return err
}

func (h *harness) invokeIC(endpoint, ic string) (string, error) {
	in := &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(endpoint), Body: []byte("x")}
	if ic != "" {
		in.InferenceComponentName = aws.String(ic)
	}
	out, err := h.invoke(in)
	if err != nil {
		return "", err
	}
	return string(out.Body), nil
}

func wantMessage(t *testing.T, err error, code, msg string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error; want %s %q", code, msg)
	}
	gotCode, gotMsg := apiCode(t, err)
	if gotCode != code || gotMsg != msg {
		t.Fatalf("error %s %q\nwant %s %q", gotCode, gotMsg, code, msg)
	}
}

func TestInferenceComponentsControlPlaneAndInvocation(t *testing.T) {
	h, b := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	for _, m := range []struct{ name, tag string }{{"model-a", "-a"}, {"model-b", "-b"}} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(m.name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(m.tag)}}); err != nil {
			t.Fatal(err)
		}
	}

	// A configuration whose variant names no model needs ExecutionRoleArn.
	_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("norole"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlG512xlarge}}})
	wantMessage(t, err, "ValidationException", "ExecutionRoleArn is required on the endpoint configuration when its production variants name no ModelName (an endpoint for inference components).")

	createICEndpoint(t, sm, "shared", "ml.g5.12xlarge", 1) // 4 GPUs per instance
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("shared")})
	if err != nil || d.EndpointStatus != smtypes.EndpointStatusInService {
		t.Fatalf("DescribeEndpoint = %+v, %v", d, err)
	}
	if n := b.launches.Load(); n != 0 {
		t.Fatalf("an endpoint for inference components launched %d generations of its own", n)
	}

	// A component on an endpoint whose variant names a model: SageMaker's text.
	createAll(t, sm, "plain", "-p", 1)
	err = createIC(ctx, sm, "on-plain", "plain", icSpec("model-a", 1, 1024, 0), 1)
	wantMessage(t, err, "ValidationException", "Inference Components are not supported in this Endpoint. Please make sure this endpoint can deploy inference components.")

	// Two copies with one GPU each, a tag.
	out, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("comp-a"),
		EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"), Specification: icSpec("model-a", 1, 2048, 1),
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)},
		Tags:          []smtypes.Tag{{Key: aws.String("team"), Value: aws.String("a")}}})
	if err != nil {
		t.Fatal(err)
	}
	arnA := "arn:aws:sagemaker:us-east-1:123456789012:inference-component/comp-a"
	if aws.ToString(out.InferenceComponentArn) != arnA {
		t.Fatalf("InferenceComponentArn = %s", aws.ToString(out.InferenceComponentArn))
	}
	da := waitIC(t, sm, "comp-a")
	if da.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(da.RuntimeConfig.DesiredCopyCount) != 2 ||
		aws.ToInt32(da.RuntimeConfig.CurrentCopyCount) != 2 || aws.ToString(da.EndpointName) != "shared" ||
		aws.ToString(da.VariantName) != "AllTraffic" || aws.ToString(da.Specification.ModelName) != "model-a" ||
		aws.ToFloat32(da.Specification.ComputeResourceRequirements.NumberOfAcceleratorDevicesRequired) != 1 {
		t.Fatalf("DescribeInferenceComponent = %s %+v %+v %+v", da.InferenceComponentStatus, da.RuntimeConfig, da.Specification, da.Specification.ComputeResourceRequirements)
	}
	// A component of its own container, no GPU.
	if _, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("comp-b"),
		EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"),
		Specification: &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(512), NumberOfCpuCoresRequired: aws.Float32(0.5)}},
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}}); err != nil {
		t.Fatal(err)
	}
	db := waitIC(t, sm, "comp-b")
	if db.InferenceComponentStatus != smtypes.InferenceComponentStatusInService ||
		aws.ToString(db.Specification.Container.DeployedImage.SpecifiedImage) != "-b" {
		t.Fatalf("DescribeInferenceComponent(comp-b) = %+v", db)
	}

	// Each copy is one container with exactly its resources; GPUs pinned, never shared.
	b.mu.Lock()
	var gpus []string
	for _, p := range b.plans {
		if len(p.Variants) != 1 || len(p.Variants[0].Containers) != 1 || p.Name != "shared" {
			t.Errorf("copy plan %+v", p)
			continue
		}
		c := p.Variants[0].Containers[0]
		switch c.Hostname {
		case "comp-a":
			if c.Resources.Cpus != 1 || c.Resources.MemoryMiB != 2048 || !strings.HasPrefix(c.GPUs, "device=") {
				t.Errorf("comp-a copy: %+v", c)
			}
			gpus = append(gpus, strings.TrimPrefix(c.GPUs, "device="))
		case "comp-b":
			if c.Resources.Cpus != 0.5 || c.Resources.MemoryMiB != 512 || c.GPUs != "" {
				t.Errorf("comp-b copy: %+v", c)
			}
		}
	}
	b.mu.Unlock()
	slices.Sort(gpus)
	if !slices.Equal(gpus, []string{"0", "1"}) {
		t.Errorf("GPUs of comp-a's copies = %v, want 0 and 1, one each", gpus)
	}

	// Invocation: by component name; every error text.
	if got, err := h.invokeIC("shared", "comp-a"); err != nil || got != "x-a" {
		t.Fatalf("invoke comp-a = %q, %v", got, err)
	}
	if got, err := h.invokeIC("shared", "comp-b"); err != nil || got != "x-b" {
		t.Fatalf("invoke comp-b = %q, %v", got, err)
	}
	_, err = h.invokeIC("shared", "")
	wantMessage(t, err, "ValidationError", "Inference Component Name header is required for endpoints to which you plan to deploy inference components. Please include Inference Component Name header or consider using SageMaker models.")
	// The raw body carries SageMaker's ErrorCode too.
	resp, err := http.Post(h.http.URL+"/endpoints/shared/invocations", "text/plain", strings.NewReader("x"))
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var eb struct{ ErrorCode, Message string }
	if json.Unmarshal(raw, &eb) != nil || resp.StatusCode != 400 || eb.ErrorCode != "INFERENCE_COMPONENT_NAME_MISSING" {
		t.Fatalf("raw answer %d %s", resp.StatusCode, raw)
	}
	_, err = h.invokeIC("shared", "nope")
	wantMessage(t, err, "ValidationError", "Inference Component nope of endpoint shared of account 123456789012 not found.")
	_, err = h.invokeIC("plain", "comp-a")
	wantMessage(t, err, "ValidationError", "Inference Component Name header is not allowed for endpoints to which you dont plan to deploy inference components. Please remove the Inference Component Name header and try again.")

	// Hostile and wrong input.
	long := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name, endpoint string
		sp             *smtypes.InferenceComponentSpecification
		copies         int32
		code, msg      string
	}{
		{"comp-a", "shared", icSpec("model-a", 1, 1024, 0), 1, "ValidationException", `Cannot create already existing inference component "` + arnA + `".`},
		{"bad_name", "shared", icSpec("model-a", 1, 1024, 0), 1, "ValidationException", "1 validation error detected: Value 'bad_name' at 'inferenceComponentName' failed to satisfy constraint: Member must satisfy regular expression pattern: ^[a-zA-Z0-9](-*[a-zA-Z0-9])*"},
		{long, "shared", icSpec("model-a", 1, 1024, 0), 1, "ValidationException", "1 validation error detected: Value '" + long + "' at 'inferenceComponentName' failed to satisfy constraint: Member must have length less than or equal to 63"},
		{"zero", "shared", icSpec("model-a", 1, 1024, 0), 0, "ValidationException", "Inference components copy count must be an integer larger than 0 when the inference component is created; scale it to 0 with UpdateInferenceComponentRuntimeConfig."},
		{"negative", "shared", icSpec("model-a", 1, 1024, 0), -5, "ValidationException", "1 validation error detected: Value '-5' at 'runtimeConfig.copyCount' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{"no-endpoint", "missing", icSpec("model-a", 1, 1024, 0), 1, "ValidationException", `Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/missing".`},
		{"no-model", "shared", icSpec("missing", 1, 1024, 0), 1, "ValidationException", `Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/missing".`},
		{"tiny-cpu", "shared", icSpec("model-a", 0.1, 1024, 0), 1, "ValidationException", "1 validation error detected: Value '0.1' at 'specification.computeResourceRequirements.numberOfCpuCoresRequired' failed to satisfy constraint: Member must have value greater than or equal to 0.25"},
		{"tiny-mem", "shared", icSpec("model-a", 1, -1, 0), 1, "ValidationException", "1 validation error detected: Value '-1' at 'specification.computeResourceRequirements.minMemoryRequiredInMb' failed to satisfy constraint: Member must have value greater than or equal to 128"},
		{"half-gpu", "shared", icSpec("model-a", 1, 1024, 1.5), 1, "ValidationException", "NumberOfAcceleratorDevicesRequired must be a whole number of devices in mce (1.5 was given): each copy holds whole GPUs of its own."},
		{"many", "shared", icSpec("model-a", 1, 1024, 0), 2147483647, "ResourceLimitExceeded", "The inference component asks for 2147483647 copies; mce runs at most 1000 copies of one inference component."},
		{"huge-cpu", "shared", icSpec("model-a", 1e6, 1024, 0), 1, "ResourceLimitExceeded", "One copy of the inference component needs more than an instance of variant AllTraffic (ml.g5.12xlarge) has: not enough CPU cores (a copy needs 1000000, an instance has at most 8 free of 8)."},
		{"huge-gpu", "shared", icSpec("model-a", 1, 1024, 64), 1, "ResourceLimitExceeded", "One copy of the inference component needs more than an instance of variant AllTraffic (ml.g5.12xlarge) has: not enough accelerator devices (a copy needs 64 whole GPUs of its own; the instance type has 4 per instance, 4 of this machine's 4 GPUs are free)."},
		{"huge-mem", "shared", icSpec("model-a", 1, 2147483647, 0), 1, "ResourceLimitExceeded", "One copy of the inference component needs more than an instance of variant AllTraffic (ml.g5.12xlarge) has: not enough memory (a copy needs 2147483647 MiB, an instance has at most 16384 MiB free of 16384 MiB)."},
	} {
		err := createIC(ctx, sm, tc.name, tc.endpoint, tc.sp, tc.copies)
		wantMessage(t, err, tc.code, tc.msg)
	}
	_, err = sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("novariant"),
		EndpointName: aws.String("shared"), VariantName: aws.String("Other"), Specification: icSpec("model-a", 1, 1024, 0),
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}})
	wantMessage(t, err, "ValidationException", `The variant name Other is not present in the endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/shared".`)
	both := icSpec("model-a", 1, 1024, 0)
	both.Container = &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")}
	wantMessage(t, createIC(ctx, sm, "both", "shared", both, 1), "ValidationException", "Specify either ModelName or Container in the inference component specification, not both.")
	_, err = sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("nope")})
	wantMessage(t, err, "ValidationException", `Could not find inference component "arn:aws:sagemaker:us-east-1:123456789012:inference-component/nope".`)

	// Tags on the component's ARN.
	tags, err := sm.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String(arnA)})
	if err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "team" {
		t.Fatalf("ListTags = %+v, %v", tags, err)
	}
	if _, err := sm.AddTags(ctx, &sagemaker.AddTagsInput{ResourceArn: aws.String(arnA), Tags: []smtypes.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.DeleteTags(ctx, &sagemaker.DeleteTagsInput{ResourceArn: aws.String(arnA), TagKeys: []string{"team"}}); err != nil {
		t.Fatal(err)
	}
	if tags, err = sm.ListTags(ctx, &sagemaker.ListTagsInput{ResourceArn: aws.String(arnA)}); err != nil || len(tags.Tags) != 1 || aws.ToString(tags.Tags[0].Key) != "k" {
		t.Fatalf("ListTags after AddTags/DeleteTags = %+v, %v", tags, err)
	}

	// List: filters, sorting, paging (through the SDK's paginator).
	var names []string
	pg := sagemaker.NewListInferenceComponentsPaginator(sm, &sagemaker.ListInferenceComponentsInput{SortBy: smtypes.InferenceComponentSortKeyName,
		SortOrder: smtypes.OrderKeyAscending, MaxResults: aws.Int32(1), EndpointNameEquals: aws.String("shared")})
	pages := 0
	for pg.HasMorePages() {
		p, err := pg.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, s := range p.InferenceComponents {
			names = append(names, aws.ToString(s.InferenceComponentName))
			if aws.ToString(s.EndpointArn) != "arn:aws:sagemaker:us-east-1:123456789012:endpoint/shared" || s.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
				t.Errorf("summary %+v", s)
			}
		}
	}
	if !slices.Equal(names, []string{"comp-a", "comp-b"}) || pages != 2 {
		t.Fatalf("ListInferenceComponents = %v in %d pages", names, pages)
	}
	l, err := sm.ListInferenceComponents(ctx, &sagemaker.ListInferenceComponentsInput{NameContains: aws.String("B"), StatusEquals: smtypes.InferenceComponentStatusInService})
	if err != nil || len(l.InferenceComponents) != 1 || aws.ToString(l.InferenceComponents[0].InferenceComponentName) != "comp-b" {
		t.Fatalf("ListInferenceComponents(NameContains B) = %+v, %v", l, err)
	}
	if l, err = sm.ListInferenceComponents(ctx, &sagemaker.ListInferenceComponentsInput{EndpointNameEquals: aws.String("plain")}); err != nil || len(l.InferenceComponents) != 0 {
		t.Fatalf("ListInferenceComponents(plain) = %+v, %v", l, err)
	}

	// Scale to zero and back.
	scale := func(name string, n int32) {
		t.Helper()
		if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String(name),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
	}
	scale("comp-b", 0)
	if d := waitIC(t, sm, "comp-b"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 0 || aws.ToInt32(d.RuntimeConfig.DesiredCopyCount) != 0 {
		t.Fatalf("scaled to zero: %+v", d.RuntimeConfig)
	}
	_, err = h.invokeIC("shared", "comp-b")
	wantMessage(t, err, "ValidationError", "Inference Component has no capacity to process this request. ApplicationAutoScaling may be in-progress (if configured) or try to increase the capacity by invoking UpdateInferenceComponentRuntimeConfig API.")
	scale("comp-b", 1)
	waitIC(t, sm, "comp-b")
	if got, err := h.invokeIC("shared", "comp-b"); err != nil || got != "x-b" {
		t.Fatalf("invoke comp-b after scaling back = %q, %v", got, err)
	}

	// More copies than GPUs: reported, never dropped; the copies placed serve.
	scale("comp-a", 5)
	d5 := waitIC(t, sm, "comp-a")
	if d5.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToInt32(d5.RuntimeConfig.CurrentCopyCount) != 4 ||
		aws.ToInt32(d5.RuntimeConfig.DesiredCopyCount) != 5 ||
		aws.ToString(d5.FailureReason) != "4 of 5 copies of the inference component are running. The copies left could not be placed on the 1 instance(s) of variant AllTraffic: not enough accelerator devices (a copy needs 1 whole GPUs of its own; the instance type has 4 per instance, 0 of this machine's 4 GPUs are free)." {
		t.Fatalf("over capacity: %s %+v %q", d5.InferenceComponentStatus, d5.RuntimeConfig, aws.ToString(d5.FailureReason))
	}
	if got, err := h.invokeIC("shared", "comp-a"); err != nil || got != "x-a" {
		t.Fatalf("invoke comp-a while short = %q, %v", got, err)
	}
	// The inventory (status page, GET /mce/endpoints) shows its copies
	// under the endpoint's variant.
	inv := h.srv.Inventory()
	seen := map[string]int{}
	for _, e := range inv.Endpoints {
		if e.Name != "shared" {
			continue
		}
		for _, v := range e.Variants {
			for _, cp := range v.Copies {
				for _, c := range cp.Containers {
					if c.Ready {
						seen[c.Hostname]++
					}
				}
			}
		}
	}
	if seen["comp-a"] != 4 || seen["comp-b"] != 1 {
		t.Errorf("inventory shows ready copies %v; want comp-a 4, comp-b 1", seen)
	}
	// Its metrics: copies desired and current, GPUs held, and its calls as
	// those of its container.
	rec := httptest.NewRecorder()
	h.srv.MetricsHandler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	for _, want := range []string{
		`mce_inference_component_desired_copies{endpoint="shared",inference_component="comp-a",variant="AllTraffic"} 5`,
		`mce_inference_component_current_copies{endpoint="shared",inference_component="comp-a",variant="AllTraffic"} 4`,
		`mce_inference_component_gpus{endpoint="shared",inference_component="comp-a",variant="AllTraffic"} 4`,
		`mce_container_invocations_total{container="comp-a",endpoint="shared",variant="AllTraffic"} 2`,
		`mce_container_ready{container="comp-a",endpoint="shared",variant="AllTraffic"} 4`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("metrics lack %s", want)
		}
	}
	scale("comp-a", 1)
	if d := waitIC(t, sm, "comp-a"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 1 || d.FailureReason != nil {
		t.Fatalf("after scaling down: %s %+v", d.InferenceComponentStatus, d.RuntimeConfig)
	}

	// The endpoint itself is not scaled or updated while it hosts components.
	_, err = sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("shared"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(2)}}})
	wantMessage(t, err, "ValidationException", `Endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/shared" hosts inference components: scale them with UpdateInferenceComponentRuntimeConfig; mce does not change its instance count.`)

	// Delete: Deleting, then not found; a second delete while it goes is refused or not found.
	if _, err := sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("comp-b")}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("comp-b")})
		if err != nil {
			wantMessage(t, err, "ValidationException", `Could not find inference component "arn:aws:sagemaker:us-east-1:123456789012:inference-component/comp-b".`)
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("comp-b was never deleted")
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Deleting the endpoint removes its components with it.
	closedBefore := b.closed.Load()
	if err := h.srv.DeleteEndpoint(ctx, "shared"); err != nil {
		t.Fatal(err)
	}
	if h.srv.ics.Get("comp-a") != nil || b.closed.Load() == closedBefore {
		t.Fatal("comp-a outlived its endpoint")
	}
}

// TestInferenceComponentScalingUnderTraffic scales a component up, down and
// to a new specification while callers keep invoking it: no call fails.
func TestInferenceComponentScalingUnderTraffic(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "busy", "ml.m5.xlarge", 2)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-v1")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(256), NumberOfCpuCoresRequired: aws.Float32(1)}}
	if err := createIC(ctx, sm, "live", "busy", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "live")

	traffic := testenv.StartTraffic(t, 4, func() error {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("busy"), InferenceComponentName: aws.String("live"),
			Body: []byte("x"), CustomAttributes: aws.String("sleep=5ms")})
		if err == nil && !strings.HasPrefix(string(out.Body), "x-v") {
			err = errors.New("answer " + string(out.Body))
		}
		return err
	})
	step := func(f func() error) {
		t.Helper()
		time.Sleep(100 * time.Millisecond)
		if err := f(); err != nil {
			t.Fatal(err)
		}
		if d := waitIC(t, sm, "live"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("status %s: %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	runtime := func(n int32) func() error {
		return func() error {
			_, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("live"),
				DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}})
			return err
		}
	}
	step(runtime(4))
	step(runtime(1))
	step(func() error {
		sp.Container.Image = aws.String("-v2")
		_, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("live"),
			Specification: sp, RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)}})
		return err
	})
	time.Sleep(100 * time.Millisecond)
	traffic.Stop()
	if traffic.Failed() > 0 || traffic.Calls() < 20 {
		t.Fatalf("%v", traffic)
	}
	if got, err := h.invokeIC("busy", "live"); err != nil || got != "x-v2" {
		t.Fatalf("after the update: %q, %v", got, err)
	}
	d := waitIC(t, sm, "live")
	if aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 || aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage) != "-v2" {
		t.Fatalf("after the update: %+v", d)
	}
	// Copies spread over the variant's 2 instances.
	rec := h.srv.ics.Get("live").Record()
	if len(rec.Copies) != 2 || rec.Copies[0].Instance == rec.Copies[1].Instance {
		t.Fatalf("copies %+v are not spread over the 2 instances", rec.Copies)
	}
}

// TestInferenceComponentsSurviveRestart restarts mce on the same state: the
// endpoint and its component come back and serve.
func TestInferenceComponentsSurviveRestart(t *testing.T) {
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h1, _ := newICHarness(t, st)
	sm := h1.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "durable", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-d")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "keeper", "durable", sp, 2); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "keeper")
	h1.http.Close()
	h1.srv.Close(ctx)

	h2, _ := newICHarness(t, st)
	if err := h2.srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	sm2 := h2.sm()
	d := waitIC(t, sm2, "keeper")
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 {
		t.Fatalf("after the restart: %s %+v %s", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
	}
	if got, err := h2.invokeIC("durable", "keeper"); err != nil || got != "x-d" {
		t.Fatalf("invoke after the restart = %q, %v", got, err)
	}
}

// TestInferenceComponentDeletedWhileLaunching: a deletion stops the launch
// of copies in progress at once.
func TestInferenceComponentDeletedWhileLaunching(t *testing.T) {
	h, b := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "slow", "local", 1)
	b.delay = time.Minute
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-s")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "stuck", "slow", sp, 3); err != nil {
		t.Fatal(err)
	}
	if d := waitICStatus(t, sm, "stuck"); d != smtypes.InferenceComponentStatusCreating {
		t.Fatalf("status %s while its copies launch", d)
	}
	start := time.Now()
	if _, err := sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("stuck")}); err != nil {
		t.Fatal(err)
	}
	_, err := sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("stuck")})
	if code, _ := apiCode(t, err); code != "ValidationException" {
		t.Fatalf("second delete: %v", err)
	}
	for h.srv.ics.Get("stuck") != nil {
		if time.Since(start) > 5*time.Second {
			t.Fatal("the deletion waited for the launches")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitICStatus(t *testing.T, sm *sagemaker.Client, name string) smtypes.InferenceComponentStatus {
	t.Helper()
	d, err := sm.DescribeInferenceComponent(context.Background(), &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return d.InferenceComponentStatus
}

// TestInferenceComponentUpdateWithoutRoom: a new specification that finds
// no room for even one batch of its copies is rolled back: the previous
// copies never stopped serving, and the component is InService on its
// previous specification, its FailureReason saying why the update failed.
func TestInferenceComponentUpdateWithoutRoom(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "full", "ml.g5.12xlarge", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-old")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128), NumberOfAcceleratorDevicesRequired: aws.Float32(2)}}
	if err := createIC(ctx, sm, "big", "full", sp, 2); err != nil {
		t.Fatal(err)
	}
	if d := waitIC(t, sm, "big"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("%s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	before := h.srv.ics.Get("big").Record().Copies
	sp.Container.Image = aws.String("-new")
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("big"), Specification: sp}); err != nil {
		t.Fatal(err)
	}
	d := waitIC(t, sm, "big")
	want := "The update of the inference component's specification failed and was rolled back: the previous specification serves. The new copies could not be placed on the 1 instance(s) of variant AllTraffic: not enough accelerator devices (a copy needs 2 whole GPUs of its own; the instance type has 4 per instance, 0 of this machine's 4 GPUs are free)."
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToString(d.FailureReason) != want ||
		aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 2 || aws.ToInt32(d.RuntimeConfig.DesiredCopyCount) != 2 {
		t.Fatalf("%s %+v %q\nwant InService, 2 of 2, %q", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason), want)
	}
	if got := aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage); got != "-old" {
		t.Errorf("the rolled back component describes image %q, want -old", got)
	}
	if after := h.srv.ics.Get("big").Record().Copies; !slices.EqualFunc(after, before, func(a, b components.CopyRecord) bool { return a.ID == b.ID && a.SpecVersion == b.SpecVersion }) {
		t.Errorf("copies %+v after the rolled back update, want the previous ones %+v", after, before)
	}
	if got, err := h.invokeIC("full", "big"); err != nil || got != "x-old" {
		t.Fatalf("invoke after the failed update = %q, %v", got, err)
	}
}

// TestInferenceComponentPlacementStrategy: SchedulingConfig.PlacementStrategy
// decides where a new copy goes on the variant's instances: SPREAD (and no
// SchedulingConfig) evens a component's copies out, BINPACK fills one
// instance before the next. It is checked and echoed.
func TestInferenceComponentPlacementStrategy(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "pool", "ml.m5.xlarge", 2) // two instances of 8 cores each (capBackend)
	withStrategy := func(cpus float64, strategy smtypes.InferenceComponentPlacementStrategy) *smtypes.InferenceComponentSpecification {
		sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-x")},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128),
				NumberOfCpuCoresRequired: aws.Float32(float32(cpus))}}
		if strategy != "" {
			sp.SchedulingConfig = &smtypes.InferenceComponentSchedulingConfig{PlacementStrategy: strategy}
		}
		return sp
	}
	instances := func(name string) []int {
		t.Helper()
		var out []int
		for _, cp := range h.srv.ics.Get(name).Record().Copies {
			out = append(out, cp.Instance)
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		name     string
		strategy smtypes.InferenceComponentPlacementStrategy
		cpus     float64
		copies   int32
	}{{"default", "", 1, 2}, {"spread", smtypes.InferenceComponentPlacementStrategySpread, 1, 2}, {"packed", smtypes.InferenceComponentPlacementStrategyBinpack, 2, 2}} {
		if err := createIC(ctx, sm, c.name, "pool", withStrategy(c.cpus, c.strategy), c.copies); err != nil {
			t.Fatal(err)
		}
		if d := waitIC(t, sm, c.name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s: %s %s", c.name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	if got := instances("default"); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("no SchedulingConfig: copies on instances %v, want [0 1]", got)
	}
	if got := instances("spread"); !slices.Equal(got, []int{0, 1}) {
		t.Errorf("SPREAD: copies on instances %v, want [0 1]", got)
	}
	// Instance 0 has 8-1-1 = 6 cores left: BINPACK puts 3 copies of 2 there, then goes on to instance 1.
	if got := instances("packed"); !slices.Equal(got, []int{0, 0}) {
		t.Errorf("BINPACK: copies on instances %v, want [0 0]", got)
	}
	if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String("packed"),
		DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(5)}}); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "packed")
	if got := instances("packed"); !slices.Equal(got, []int{0, 0, 0, 1, 1}) {
		t.Errorf("BINPACK at 5 copies: instances %v, want [0 0 0 1 1]", got)
	}
	d, err := sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("packed")})
	if err != nil {
		t.Fatal(err)
	}
	if sc := d.Specification.SchedulingConfig; sc == nil || sc.PlacementStrategy != smtypes.InferenceComponentPlacementStrategyBinpack {
		t.Errorf("Describe's SchedulingConfig = %+v, want BINPACK echoed", sc)
	}

	err = createIC(ctx, sm, "bad", "pool", withStrategy(1, "ROUND_ROBIN"), 1)
	wantMessage(t, err, "ValidationException", "1 validation error detected: Value 'ROUND_ROBIN' at 'specification.schedulingConfig.placementStrategy' failed to satisfy constraint: Member must satisfy enum value set: [SPREAD, BINPACK]")
	// What the SDKs check before sending, sent as another client might.
	for raw, want := range map[string]string{
		`{}`:                          "Value null at 'specification.schedulingConfig.placementStrategy' failed to satisfy constraint: Member must not be null",
		`{"PlacementStrategy": ""}`:   "Value '' at 'specification.schedulingConfig.placementStrategy' failed to satisfy constraint: Member must satisfy enum value set: [SPREAD, BINPACK]",
		`{"PlacementStrategy": null}`: "Member must not be null",
		`{"PlacementStrategy": 7}`:    "specification.schedulingConfig",
		`[1]`:                         "specification.schedulingConfig",
	} {
		req, _ := http.NewRequest("POST", h.http.URL+"/", strings.NewReader(`{"InferenceComponentName": "raw", "EndpointName": "pool",
			"VariantName": "AllTraffic", "RuntimeConfig": {"CopyCount": 1}, "Specification": {"Container": {"Image": "-x"},
			"ComputeResourceRequirements": {"MinMemoryRequiredInMb": 128}, "SchedulingConfig": `+raw+`}}`))
		req.Header.Set("X-Amz-Target", "SageMaker.CreateInferenceComponent")
		req.Header.Set("Content-Type", "application/x-amz-json-1.1")
		resp, err := h.http.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 || !strings.Contains(string(b), "ValidationException") || !strings.Contains(string(b), want) {
			t.Errorf("SchedulingConfig %s: %d %s; want a ValidationException saying %q", raw, resp.StatusCode, b, want)
		}
	}
	if h.srv.ics.Get("raw") != nil {
		t.Error("a component with a bad SchedulingConfig was created")
	}
}

// TestInferenceComponentCopyNumbersNotReused: a copy scaled away (or of a
// component deleted) leaves its number unused, so that a new copy never
// takes the name of one whose objects may still be going (on Kubernetes a
// ConfigMap "being deleted" refused the new copy's).
func TestInferenceComponentCopyNumbersNotReused(t *testing.T) {
	h, _ := newICHarness(t, nil)
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "renum", "ml.m5.xlarge", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-x")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	ids := func(name string) []int {
		var out []int
		for _, cp := range h.srv.ics.Get(name).Record().Copies {
			out = append(out, cp.ID)
		}
		slices.Sort(out)
		return out
	}
	scale := func(name string, n int32) {
		t.Helper()
		if _, err := sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String(name),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
		if d := waitIC(t, sm, name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s at %d: %s", name, n, d.InferenceComponentStatus)
		}
	}
	if err := createIC(ctx, sm, "a", "renum", sp, 2); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "a")
	if got := ids("a"); !slices.Equal(got, []int{1, 2}) {
		t.Fatalf("copies %v, want [1 2]", got)
	}
	scale("a", 0)
	scale("a", 1)
	if got := ids("a"); !slices.Equal(got, []int{3}) {
		t.Errorf("after 2 → 0 → 1: copies %v, want [3] (1 and 2 were used)", got)
	}
	if _, err := sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("a")}); err != nil {
		t.Fatal(err)
	}
	for h.srv.ics.Get("a") != nil {
		time.Sleep(10 * time.Millisecond)
	}
	if err := createIC(ctx, sm, "b", "renum", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "b")
	if got := ids("b"); !slices.Equal(got, []int{4}) {
		t.Errorf("a new component after a deleted one: copies %v, want [4]", got)
	}
}
