package host

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/mce-run/mce/host/apierr"
)

func (h *harness) sm() *sagemaker.Client {
	return sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.http.URL),
		Credentials: aws.AnonymousCredentials{}, HTTPClient: h.http.Client()})
}

func apiCode(t *testing.T, err error) (string, string) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not an API error", err, err)
	}
	return ae.ErrorCode(), ae.ErrorMessage()
}

// createAll makes a model of probe-like fake containers (the Image is the tag
// the fake appends), a config and an endpoint, and waits for InService.
func createAll(t testing.TB, sm *sagemaker.Client, name, tag string, count int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name + "-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(tag)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name + "-config"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(name + "-model"),
			InitialInstanceCount: aws.Int32(count), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	out, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String(name + "-config")})
	if err != nil {
		t.Fatal(err)
	}
	if want := "arn:aws:sagemaker:us-east-1:123456789012:endpoint/" + strings.ToLower(name); aws.ToString(out.EndpointArn) != want {
		t.Errorf("EndpointArn = %s, want %s", aws.ToString(out.EndpointArn), want)
	}
	w := sagemaker.NewEndpointInServiceWaiter(sm, func(o *sagemaker.EndpointInServiceWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
}

func TestControlPlaneLifecycle(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "Life", "-v1", 1)

	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Life")})
	if err != nil {
		t.Fatal(err)
	}
	if d.EndpointStatus != smtypes.EndpointStatusInService || aws.ToString(d.EndpointConfigName) != "Life-config" ||
		len(d.ProductionVariants) != 1 || aws.ToInt32(d.ProductionVariants[0].CurrentInstanceCount) != 1 || d.CreationTime == nil {
		t.Fatalf("DescribeEndpoint = %+v", d)
	}
	invoke := func() string {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("Life"), Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return string(out.Body)
	}
	if got := invoke(); got != "x-v1" {
		t.Fatalf("invoke = %q", got)
	}

	// Scale to 3 copies and change the weight.
	if _, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("Life"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(3), DesiredWeight: aws.Float32(2)}}}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "Life", smtypes.EndpointStatusInService)
	d, _ = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Life")})
	if v := d.ProductionVariants[0]; aws.ToInt32(v.CurrentInstanceCount) != 3 || aws.ToFloat32(v.CurrentWeight) != 2 {
		t.Errorf("after scaling: %+v", v)
	}

	// Update to a new configuration while traffic flows: no call may fail.
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("Life-model2"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-v2")}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("Life-config2"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("Life-model2"),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	failures := make(chan error, 1000)
	seen := make(chan string, 100000)
	go func() {
		for {
			select {
			case <-stop:
				close(seen)
				return
			default:
			}
			out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("Life"), Body: []byte("x")})
			if err != nil {
				failures <- err
				continue
			}
			seen <- string(out.Body)
		}
	}()
	h.backend.delay = 300 * time.Millisecond // the new generation takes a while to come up
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("Life"), EndpointConfigName: aws.String("Life-config2")}); err != nil {
		t.Fatal(err)
	}
	if d, _ := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Life")}); d.EndpointStatus != smtypes.EndpointStatusUpdating {
		t.Errorf("status right after UpdateEndpoint = %s, want Updating", d.EndpointStatus)
	}
	waitStatus(t, sm, "Life", smtypes.EndpointStatusInService)
	time.Sleep(100 * time.Millisecond)
	close(stop)
	versions := map[string]int{}
	for v := range seen {
		versions[v]++
	}
	close(failures)
	nfail := 0
	for err := range failures {
		if nfail++; nfail <= 3 {
			t.Errorf("a call failed during the update: %v", err)
		}
	}
	if nfail > 3 {
		t.Errorf("... %d calls failed in all", nfail)
	}
	if versions["x-v1"] == 0 || versions["x-v2"] == 0 {
		t.Errorf("answers during the update: %v; want both generations", versions)
	}
	if got := invoke(); got != "x-v2" {
		t.Errorf("after the update: %q", got)
	}

	// Delete: Deleting, then DescribeEndpoint fails with ValidationException,
	// which is what botocore's and the Go SDK's waiters wait for.
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("Life")}); err != nil {
		t.Fatal(err)
	}
	w := sagemaker.NewEndpointDeletedWaiter(sm, func(o *sagemaker.EndpointDeletedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
	})
	if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Life")}, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	_, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("Life")})
	if code, msg := apiCode(t, err); code != "ValidationException" || msg != `Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/life".` {
		t.Errorf("after delete: %s %q", code, msg)
	}
}

func waitStatus(t *testing.T, sm *sagemaker.Client, name string, want smtypes.EndpointStatus) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		d, err := sm.DescribeEndpoint(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err == nil && d.EndpointStatus == want {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("endpoint %s never reached %s", name, want)
}

func TestControlPlaneValidation(t *testing.T) {
	h := newHarness(t, Config{MaxContainers: 3})
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "base", "-b", 1)
	variant := func(model string) []smtypes.ProductionVariant {
		return []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(model),
			InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}
	}
	container := func(host string) smtypes.ContainerDefinition {
		return smtypes.ContainerDefinition{Image: aws.String("img"), ContainerHostname: aws.String(host)}
	}
	sixteen := make([]smtypes.ContainerDefinition, 16)
	for i := range sixteen {
		sixteen[i] = container(fmt.Sprintf("c%d", i))
	}
	cases := []struct {
		name     string
		call     func() error
		code     string
		contains string
	}{
		{"bad model name", func() error {
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("bad_name"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("i")}})
			return err
		}, "ValidationException", "Value 'bad_name' at 'modelName' failed to satisfy constraint"},
		{"16 containers", func() error {
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("m16"), Containers: sixteen})
			return err
		}, "ValidationException", "containers"},
		{"bad hostname", func() error {
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("mh"), Containers: []smtypes.ContainerDefinition{container("a_b")}})
			return err
		}, "ValidationException", "containerHostname"},
		{"direct without hostnames", func() error {
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("md"),
				Containers:               []smtypes.ContainerDefinition{{Image: aws.String("a")}, {Image: aws.String("b")}},
				InferenceExecutionConfig: &smtypes.InferenceExecutionConfig{Mode: smtypes.InferenceExecutionModeDirect}})
			return err
		}, "ValidationException", "Direct"},
		{"two multi-model containers", func() error {
			mm := smtypes.ContainerDefinition{Image: aws.String("a"), Mode: smtypes.ContainerModeMultiModel, ModelDataUrl: aws.String("s3://b/p/")}
			a, b := mm, mm
			a.ContainerHostname, b.ContainerHostname = aws.String("a"), aws.String("b")
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("mm"), Containers: []smtypes.ContainerDefinition{a, b}})
			return err
		}, "ValidationException", "More than one container in MultiModel mode is not supported with inference pipeline."},
		{"existing model", func() error {
			_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("base-model"), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("i")}})
			return err
		}, "ValidationException", `Cannot create already existing model "arn:aws:sagemaker:us-east-1:123456789012:model/base-model".`},
		{"config with missing model", func() error {
			_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c1"), ProductionVariants: variant("nope")})
			return err
		}, "ValidationException", `Could not find model "arn:aws:sagemaker:us-east-1:123456789012:model/nope".`},
		{"negative weight", func() error {
			v := variant("base-model")
			v[0].InitialVariantWeight = aws.Float32(-1)
			_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("c2"), ProductionVariants: v})
			return err
		}, "ValidationException", "initialVariantWeight"},
		{"endpoint with missing config", func() error {
			_, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("e1"), EndpointConfigName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find endpoint configuration "arn:aws:sagemaker:us-east-1:123456789012:endpoint-config/nope".`},
		{"existing endpoint", func() error {
			_, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("BASE"), EndpointConfigName: aws.String("base-config")})
			return err
		}, "ValidationException", `Cannot create already existing endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/base".`},
		{"describe missing model", func() error {
			_, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find model`},
		{"delete missing endpoint", func() error {
			_, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("nope")})
			return err
		}, "ValidationException", `Could not find endpoint "arn:aws:sagemaker:us-east-1:123456789012:endpoint/nope".`},
		{"unknown variant in weights", func() error {
			_, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("base"),
				DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("Other"), DesiredWeight: aws.Float32(1)}}})
			return err
		}, "ValidationException", "Other"},
		{"over the container limit", func() error {
			_, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("base"),
				DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(5)}}})
			return err
		}, "ResourceLimitExceeded", "total containers"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if err == nil {
				t.Fatal("accepted")
			}
			code, msg := apiCode(t, err)
			if code != tc.code || !strings.Contains(msg, tc.contains) {
				t.Errorf("got %s %q, want %s containing %q", code, msg, tc.code, tc.contains)
			}
		})
	}
}

func TestListPagingSortingFilters(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	for _, n := range []string{"delta", "alpha", "charlie", "bravo", "echo"} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(n), PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("i")}}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(5 * time.Millisecond) // distinct creation times
	}
	var names []string
	p := sagemaker.NewListModelsPaginator(sm, &sagemaker.ListModelsInput{SortBy: smtypes.ModelSortKeyName, SortOrder: smtypes.OrderKeyAscending, MaxResults: aws.Int32(2)})
	pages := 0
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		pages++
		for _, m := range page.Models {
			names = append(names, aws.ToString(m.ModelName))
		}
	}
	if strings.Join(names, ",") != "alpha,bravo,charlie,delta,echo" || pages != 3 {
		t.Errorf("paged by name: %v in %d pages", names, pages)
	}
	out, err := sm.ListModels(ctx, &sagemaker.ListModelsInput{NameContains: aws.String("a")})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range out.Models {
		got = append(got, aws.ToString(m.ModelName))
	}
	// Default: newest first.
	if strings.Join(got, ",") != "bravo,charlie,alpha,delta" {
		t.Errorf("NameContains a, newest first: %v", got)
	}
}

// TestDeleteWhileCreating: deleting an endpoint whose containers are still
// starting stops the launch instead of waiting for it.
func TestDeleteWhileCreating(t *testing.T) {
	h := newHarness(t, Config{})
	h.backend.delay = time.Minute
	sm := h.sm()
	ctx := context.Background()
	if _, err := h.srv.startEndpoint(plan("slow", "Serial", map[string][]string{"AllTraffic": {"primary:P"}}), nil, "slow", nil); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if _, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("slow")}); err != nil {
		t.Fatal(err)
	}
	w := sagemaker.NewEndpointDeletedWaiter(sm, func(o *sagemaker.EndpointDeletedWaiterOptions) {
		o.MinDelay, o.MaxDelay = 20*time.Millisecond, 100*time.Millisecond
	})
	if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("slow")}, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("deletion took %v; the launch was not cancelled", took)
	}
}

// TestControlErrorHidesInternals: mce's own failures are a 500 with a
// generic message (the details go to the log); caller mistakes stay 400.
func TestControlErrorHidesInternals(t *testing.T) {
	s := New(Config{Store: openStore(t)})
	defer s.Close(context.Background())
	api := s.controlError("req-1", fmt.Errorf("persist: %w", errors.New("open /var/lib/mce/state/models.db: permission denied")))
	if api.Status != 500 || api.Code != apierr.CodeInternalFailure || strings.Contains(api.Message, "/var/lib") || strings.Contains(api.Message, "permission") {
		t.Errorf("internal failure: %d %s %q", api.Status, api.Code, api.Message)
	}
	if api := s.controlError("req-2", notFound(s, "endpoint", "x")); api.Status != 400 || api.Code != apierr.CodeValidationException {
		t.Errorf("not found: %d %s %q", api.Status, api.Code, api.Message)
	}
}
