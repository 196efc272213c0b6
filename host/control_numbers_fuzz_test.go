package host

import (
	"context"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host/apierr"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/pipeline"
)

// The control plane's numbers (counts, sizes, timeouts, weights, page
// sizes) come from outside: whatever their value, a call must cost memory
// bounded by a constant, not in proportion to the number, before
// validation refuses what is out of bounds. An InitialInstanceCount of
// 2147483647 once made the placement of the first inference component
// build an entry per instance, and mce died of out of memory.

// numberScenarios are the calls that carry each numeric member, in the
// order they are made; @N@ stands for the value. They run on
// numbersFixture's state.
var numberScenarios = []struct {
	member string
	calls  [][2]string // operation, body
}{
	{"InitialInstanceCount (components)", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ExecutionRoleArn":"` + roleARN + `","ProductionVariants":[{"VariantName":"AllTraffic","InstanceType":"ml.m5.xlarge","InitialInstanceCount":@N@}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`},
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"x","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"InitialInstanceCount (model)", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":@N@}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"ManagedInstanceScaling.MaxInstanceCount", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ExecutionRoleArn":"` + roleARN + `","ProductionVariants":[{"VariantName":"AllTraffic","InstanceType":"ml.m5.xlarge","InitialInstanceCount":1,"ManagedInstanceScaling":{"Status":"ENABLED","MinInstanceCount":1,"MaxInstanceCount":@N@}}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`},
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"x","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"ManagedInstanceScaling.MinInstanceCount", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ExecutionRoleArn":"` + roleARN + `","ProductionVariants":[{"VariantName":"AllTraffic","InstanceType":"ml.m5.xlarge","InitialInstanceCount":1,"ManagedInstanceScaling":{"Status":"ENABLED","MinInstanceCount":@N@}}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"InitialVariantWeight", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1,"InitialVariantWeight":@N@},{"VariantName":"B","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"VolumeSizeInGB", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1,"VolumeSizeInGB":@N@}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"ModelDataDownloadTimeoutInSeconds", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1,"ModelDataDownloadTimeoutInSeconds":@N@}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"ContainerStartupHealthCheckTimeoutInSeconds", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1,"ContainerStartupHealthCheckTimeoutInSeconds":@N@}]}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"AsyncInferenceConfig.ClientConfig.MaxConcurrentInvocationsPerInstance", [][2]string{
		{"CreateEndpointConfig", `{"EndpointConfigName":"x","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1}],"AsyncInferenceConfig":{"ClientConfig":{"MaxConcurrentInvocationsPerInstance":@N@},"OutputConfig":{"S3OutputPath":"s3://bucket/out"}}}`},
		{"CreateEndpoint", `{"EndpointName":"x","EndpointConfigName":"x"}`}}},
	{"CopyCount", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":@N@}}`}}},
	{"MinMemoryRequiredInMb", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":@N@}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"MaxMemoryRequiredInMb", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128,"MaxMemoryRequiredInMb":@N@}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"NumberOfCpuCoresRequired", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128,"NumberOfCpuCoresRequired":@N@}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"NumberOfAcceleratorDevicesRequired", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"gpu","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128,"NumberOfAcceleratorDevicesRequired":@N@}},"RuntimeConfig":{"CopyCount":4}}`}}},
	{"StartupParameters.ModelDataDownloadTimeoutInSeconds", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"StartupParameters":{"ModelDataDownloadTimeoutInSeconds":@N@},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":1}}`}}},
	{"StartupParameters.ContainerStartupHealthCheckTimeoutInSeconds", [][2]string{
		{"CreateInferenceComponent", `{"InferenceComponentName":"xc","EndpointName":"ic","VariantName":"AllTraffic","Specification":{"Container":{"Image":"i"},"StartupParameters":{"ContainerStartupHealthCheckTimeoutInSeconds":@N@},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":1}}`}}},
	{"UpdateInferenceComponentRuntimeConfig CopyCount", [][2]string{
		{"UpdateInferenceComponentRuntimeConfig", `{"InferenceComponentName":"c","DesiredRuntimeConfig":{"CopyCount":@N@}}`}}},
	{"UpdateInferenceComponent RuntimeConfig.CopyCount", [][2]string{
		{"UpdateInferenceComponent", `{"InferenceComponentName":"c","RuntimeConfig":{"CopyCount":@N@}}`}}},
	{"DesiredWeight", [][2]string{
		{"UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredWeight":@N@}]}`}}},
	{"DesiredInstanceCount", [][2]string{
		{"UpdateEndpointWeightsAndCapacities", `{"EndpointName":"ep","DesiredWeightsAndCapacities":[{"VariantName":"AllTraffic","DesiredInstanceCount":@N@}]}`}}},
	{"ListModels MaxResults", [][2]string{{"ListModels", `{"MaxResults":@N@}`}}},
	{"ListEndpoints MaxResults", [][2]string{{"ListEndpoints", `{"MaxResults":@N@,"CreationTimeAfter":@N@}`}}},
	{"ListEndpointConfigs MaxResults", [][2]string{{"ListEndpointConfigs", `{"MaxResults":@N@}`}}},
	{"ListInferenceComponents MaxResults", [][2]string{{"ListInferenceComponents", `{"MaxResults":@N@,"LastModifiedTimeBefore":@N@}`}}},
	{"ListTags MaxResults", [][2]string{{"ListTags", `{"ResourceArn":"arn:aws:sagemaker:us-east-1:123456789012:endpoint/ep","MaxResults":@N@}`}}},
}

// numberExtremes are the seed values of every member: zero, negatives,
// the edges of int32, int53 and int64, floats past them, and what JSON
// does not allow (NaN, Infinity), besides values that a per-unit cost
// would make visible (a million).
var numberExtremes = []string{"0", "-1", "1", "2", "100", "101", "1000", "1001", "1000000", "2147483647", "2147483648",
	"-2147483648", "9007199254740992", "9223372036854775807", "18446744073709551616", "1e308", "-1e308", "1e309",
	"4.9e-324", "0.25", "1.5", "NaN", "Infinity", "-Infinity", `"7"`, "null", "1" + strings.Repeat("0", 400)}

// cheapContainer is a container that is never called.
type cheapContainer struct{ name string }

func (c cheapContainer) Hostname() string { return c.name }
func (c cheapContainer) BaseURL() string  { return "http://127.0.0.1:9" }
func (c cheapContainer) Ready() bool      { return true }

// cheapBackend launches containers that are values, not servers, on a
// machine of 8 cores, 16 GiB and 4 GPUs (where it places copies as the
// Docker engine does); like a real engine it holds one entry per instance
// it launches.
type cheapBackend struct{}

type cheapLaunched struct {
	mu     sync.Mutex
	copies map[string][][]pipeline.Container
}

func (cheapBackend) InstanceCapacity(context.Context) (containers.InstanceCapacity, error) {
	return containers.InstanceCapacity{CPUs: 8, MemoryMiB: 16384, GPUs: []string{"0", "1", "2", "3"}}, nil
}
func (b cheapBackend) PlaceCopies(ctx context.Context, r containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.PlaceCopies(ctx, r)
}
func (b cheapBackend) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.CopyFits(ctx, v, n)
}
func (cheapBackend) KeepsCopy(v containers.CopyVariant, p containers.CopyPlace) bool {
	return docker.Packer{}.KeepsCopy(v, p)
}
func (cheapBackend) Adopt(context.Context, containers.EndpointPlan, int) (containers.Launched, error) {
	return nil, errNotAdopted
}
func (cheapBackend) Reconcile(context.Context) error { return nil }
func (cheapBackend) Launch(_ context.Context, p containers.EndpointPlan, _ int) (containers.Launched, error) {
	l := &cheapLaunched{copies: map[string][][]pipeline.Container{}}
	for _, v := range p.Variants {
		for range v.InstanceCount {
			var chain []pipeline.Container
			for _, c := range v.Containers {
				chain = append(chain, cheapContainer{c.Hostname})
			}
			l.copies[v.Name] = append(l.copies[v.Name], chain)
		}
	}
	return l, nil
}

func (l *cheapLaunched) Copies(v string) [][]pipeline.Container {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.copies[v]
}

func (l *cheapLaunched) Scale(_ context.Context, v string, n int) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	for len(l.copies[v]) < n {
		l.copies[v] = append(l.copies[v], []pipeline.Container{cheapContainer{"c"}})
	}
	l.copies[v] = l.copies[v][:n]
	return nil
}

func (l *cheapLaunched) Close(context.Context) error { return nil }

var errNotAdopted = &apierr.Error{Status: 500, Code: "NotAdopted", Message: "values do not outlive their server"}

// numbersFixture is a server on cheapBackend (no container limit) holding
// model "m" on endpoint "ep", components endpoints "ic" (with component
// "c" of one copy) and "gpu" (ml.g5.12xlarge), all in service.
func numbersFixture(t *testing.T, logs *testenv.SyncBuffer) *Server {
	t.Helper()
	s := New(Config{Backend: cheapBackend{}, Store: openStore(t), Logger: zerolog.New(logs)})
	t.Cleanup(func() { s.Close(context.Background()) })
	for _, c := range [][2]string{
		{"CreateModel", `{"ModelName":"m","PrimaryContainer":{"Image":"i"}}`},
		{"CreateEndpointConfig", `{"EndpointConfigName":"mc","ProductionVariants":[{"VariantName":"AllTraffic","ModelName":"m","InstanceType":"ml.m5.large","InitialInstanceCount":1}]}`},
		{"CreateEndpoint", `{"EndpointName":"ep","EndpointConfigName":"mc"}`},
		{"CreateEndpointConfig", `{"EndpointConfigName":"icc","ExecutionRoleArn":"` + roleARN + `","ProductionVariants":[{"VariantName":"AllTraffic","InstanceType":"ml.m5.xlarge","InitialInstanceCount":1}]}`},
		{"CreateEndpoint", `{"EndpointName":"ic","EndpointConfigName":"icc"}`},
		{"CreateEndpointConfig", `{"EndpointConfigName":"gc","ExecutionRoleArn":"` + roleARN + `","ProductionVariants":[{"VariantName":"AllTraffic","InstanceType":"ml.g5.12xlarge","InitialInstanceCount":1}]}`},
		{"CreateEndpoint", `{"EndpointName":"gpu","EndpointConfigName":"gc"}`},
	} {
		if code, body := controlCall(s, c[0], c[1]); code != 200 {
			t.Fatalf("%s: %d %s", c[0], code, body)
		}
	}
	settle(t, s)
	if code, body := controlCall(s, "CreateInferenceComponent", `{"InferenceComponentName":"c","EndpointName":"ic","VariantName":"AllTraffic",
		"Specification":{"Container":{"Image":"i"},"ComputeResourceRequirements":{"MinMemoryRequiredInMb":128}},"RuntimeConfig":{"CopyCount":1}}`); code != 200 {
		t.Fatalf("CreateInferenceComponent: %d %s", code, body)
	}
	settle(t, s)
	return s
}

// controlCall sends one control-plane call through the server's HTTP
// handler and returns the status and body.
func controlCall(s *Server, op, body string) (int, string) {
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	req.Header.Set("X-Amz-Target", "SageMaker."+op)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, req)
	return rec.Code, rec.Body.String()
}

// settle waits until no endpoint or component is changing.
func settle(t *testing.T, s *Server) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := ""
		for _, e := range s.reg.all() {
			switch st := e.Status(); st {
			case spec.StatusCreating, spec.StatusUpdating, spec.StatusSystemUpdating, spec.StatusDeleting:
				busy = "endpoint " + e.name + " " + string(st)
			}
		}
		for _, c := range s.ics.All() {
			switch st := c.Record().Status; st {
			case spec.StatusCreating, spec.StatusUpdating, spec.StatusDeleting:
				busy = "inference component " + c.Name() + " " + string(st)
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s after 30 s", busy)
		}
		time.Sleep(time.Millisecond)
	}
}

// maxNumberAlloc is the most one scenario may allocate, whatever its
// number: the calls, their validation and, for what is valid, the work
// (up to 128 copies that fit the fake machine). One entry per instance of
// 1000000 instances is several times as much.
const maxNumberAlloc = 4 << 20

// FuzzControlNumbers: for any value of a numeric member, the calls that
// carry it answer 200 or a 4xx (never a 5xx: a panic or an internal
// error), leave nothing changing for ever, log no recovered panic, and
// allocate at most maxNumberAlloc in all (mce's background work
// included).
func FuzzControlNumbers(f *testing.F) {
	for i := range numberScenarios {
		for _, v := range numberExtremes {
			f.Add(uint8(i), v)
		}
	}
	f.Fuzz(func(t *testing.T, member uint8, value string) {
		sc := numberScenarios[int(member)%len(numberScenarios)]
		logs := &testenv.SyncBuffer{}
		s := numbersFixture(t, logs)
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		var answers []string
		for _, c := range sc.calls {
			code, body := controlCall(s, c[0], strings.ReplaceAll(c[1], "@N@", value))
			if code >= 500 {
				t.Fatalf("%s = %s: %s answered %d %s", sc.member, value, c[0], code, body)
			}
			answers = append(answers, c[0]+" "+http.StatusText(code))
		}
		settle(t, s)
		runtime.ReadMemStats(&after)
		if grew := after.TotalAlloc - before.TotalAlloc; grew > maxNumberAlloc {
			t.Fatalf("%s = %.40s: allocated %d MiB (%v)", sc.member, value, grew>>20, answers)
		}
		if l := logs.String(); strings.Contains(l, `"panic"`) {
			t.Fatalf("%s = %.40s: a panic was recovered: %.2000s", sc.member, value, l)
		}
	})
}
