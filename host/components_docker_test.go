package host_test

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/smithy-go"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// icHost is mce on the real Docker engine (the shared fixture, hostenv)
// with clients of both APIs. Its Crash ends it as a crash would
// (containers left running); the next icHost on the same instance, state
// folder and store adopts them.
type icHost struct {
	*hostenv.Host
	sm  *sagemaker.Client
	run *sagemakerruntime.Client
}

// startICHost starts mce on instance, stateDir and st, adopting what a
// crashed one left there, and brings back the state of st (Recover) as mce
// serve does.
func startICHost(t testing.TB, instance, stateDir string, st *store.Store) *icHost {
	t.Helper()
	h := hostenv.New(t, hostenv.Options{Instance: instance, StateDir: stateDir, Store: st,
		Runtime: func(o *docker.Options) { o.Adopt = true },
		Host:    func(c *host.Config) { c.ContainerTimeout = 10 * time.Second }})
	if err := h.Server.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &icHost{Host: h, sm: h.SageMakerClient(), run: h.RuntimeClient()}
}

func (h *icHost) invoke(ic string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := h.run.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("gpu-share"),
		InferenceComponentName: aws.String(ic), Body: []byte("x")})
	if err != nil {
		return "", err
	}
	return string(out.Body), nil
}

func (h *icHost) wait(t testing.TB, name string) *sagemaker.DescribeInferenceComponentOutput {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := h.sm.DescribeInferenceComponent(context.Background(), &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if s := d.InferenceComponentStatus; s != smtypes.InferenceComponentStatusCreating && s != smtypes.InferenceComponentStatusUpdating {
			return d
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is still %s", name, d.InferenceComponentStatus)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// copies lists the Docker containers of a component's copies.
func copies(t *testing.T, cli *client.Client, instance, ic string) []string {
	t.Helper()
	f := client.Filters{}.Add("label", docker.LabelInstance+"="+instance).Add("label", docker.LabelContainer+"="+ic)
	cs, err := cli.ContainerList(context.Background(), client.ContainerListOptions{Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, c := range cs.Items {
		ids = append(ids, c.ID)
	}
	slices.Sort(ids)
	return ids
}

// TestDockerInferenceComponents runs two components of the probe image on
// one endpoint: each copy a container with the component's CPU and memory
// limits; invoked by name, scaled under traffic with no failed call, to
// zero and back, and adopted by a restarted mce.
func TestDockerInferenceComponents(t *testing.T) {
	cli := testenv.Docker(t)
	image := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() }) // after both hosts' teardown
	h := startICHost(t, instance, t.TempDir(), st)
	ctx := context.Background()
	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("gpu-share-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("gpu-share"), EndpointConfigName: aws.String("gpu-share-config")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, "gpu-share"); err != nil {
		t.Fatal(err)
	}
	create := func(name, tag string, n int32) {
		t.Helper()
		_, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
			EndpointName: aws.String("gpu-share"), VariantName: aws.String("AllTraffic"),
			Specification: &smtypes.InferenceComponentSpecification{
				Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": tag}},
				ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
					MinMemoryRequiredInMb: aws.Int32(128), MaxMemoryRequiredInMb: aws.Int32(256)}},
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}})
		if err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	create("alpha", "-alpha", 2)
	create("beta", "-beta", 1)
	for _, name := range []string{"alpha", "beta"} {
		if d := h.wait(t, name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s: %s %s", name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	t.Logf("two components, 3 copies, placed and ready in %v", time.Since(start).Round(time.Millisecond))
	for name, want := range map[string]string{"alpha": "x-alpha", "beta": "x-beta"} {
		if got, err := h.invoke(name); err != nil || got != want {
			t.Fatalf("invoke %s = %q, %v", name, got, err)
		}
	}
	alpha := copies(t, cli, instance, "alpha")
	if len(alpha) != 2 || len(copies(t, cli, instance, "beta")) != 1 {
		t.Fatalf("containers: alpha %v, beta %v", alpha, copies(t, cli, instance, "beta"))
	}
	res, err := cli.ContainerInspect(ctx, alpha[0], client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if hc := res.Container.HostConfig; hc.NanoCPUs != 250_000_000 || hc.Memory != 256<<20 {
		t.Fatalf("alpha's copy runs with NanoCPUs %d, Memory %d; want 0.25 cores and 256 MiB", hc.NanoCPUs, hc.Memory)
	}

	// Scale alpha 2 → 4 → 1 while callers keep invoking it.
	traffic := testenv.StartTraffic(t, 3, func() error {
		got, err := h.invoke("alpha")
		if err == nil && got != "x-alpha" {
			err = errors.New("answer " + got)
		}
		return err
	})
	scale := func(name string, n int32) {
		t.Helper()
		if _, err := h.sm.UpdateInferenceComponentRuntimeConfig(ctx, &sagemaker.UpdateInferenceComponentRuntimeConfigInput{InferenceComponentName: aws.String(name),
			DesiredRuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(n)}}); err != nil {
			t.Fatal(err)
		}
		d := h.wait(t, name)
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != n {
			t.Fatalf("%s scaled to %d: %s %+v %s", name, n, d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
		}
	}
	scale("alpha", 4)
	scale("alpha", 1)
	traffic.Stop()
	if traffic.Failed() > 0 || traffic.Calls() == 0 {
		t.Fatalf("while alpha scaled: %v", traffic)
	}
	t.Logf("%d calls while alpha scaled 2→4→1, none failed", traffic.Calls())
	if n := len(copies(t, cli, instance, "alpha")); n != 1 {
		t.Fatalf("alpha runs %d containers after scaling to 1", n)
	}

	// Scale to zero: SageMaker's answer; then back, and time the first answer.
	scale("beta", 0)
	_, err = h.invoke("beta")
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationError" || !strings.HasPrefix(ae.ErrorMessage(), "Inference Component has no capacity to process this request.") {
		t.Fatalf("invoke of a component with 0 copies: %v", err)
	}
	start = time.Now()
	scale("beta", 1)
	if got, err := h.invoke("beta"); err != nil || got != "x-beta" {
		t.Fatalf("invoke beta after scaling back = %q, %v", got, err)
	}
	t.Logf("beta 0 → 1 copy, first answer after %v", time.Since(start).Round(time.Millisecond))

	// A restart of mce (as after a crash: containers left running) adopts the copies.
	before := append(copies(t, cli, instance, "alpha"), copies(t, cli, instance, "beta")...)
	h.Crash()
	h2 := startICHost(t, instance, h.StateDir, st)
	for _, name := range []string{"alpha", "beta"} {
		if d := h2.wait(t, name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 1 {
			t.Fatalf("%s after the restart: %s %+v %s", name, d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
		}
	}
	after := append(copies(t, cli, instance, "alpha"), copies(t, cli, instance, "beta")...)
	if !slices.Equal(before, after) {
		t.Fatalf("containers before the restart %v, after %v: not adopted", before, after)
	}
	for name, want := range map[string]string{"alpha": "x-alpha", "beta": "x-beta"} {
		if got, err := h2.invoke(name); err != nil || got != want {
			t.Fatalf("invoke %s after the restart = %q, %v", name, got, err)
		}
	}
}

// TestDockerInferenceComponentRollingUpdate: on the real Docker engine,
// while callers keep invoking a component of the probe image, an
// UpdateInferenceComponent with its specification unchanged and 3 copies
// instead of 2 adds one container and stops none, and one that gives only
// a new Container (its Environment changed; the resources kept) replaces
// every container one at a time. No call fails.
func TestDockerInferenceComponentRollingUpdate(t *testing.T) {
	cli := testenv.Docker(t)
	image := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h := startICHost(t, instance, t.TempDir(), st)
	ctx := context.Background()
	if _, err := h.sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String("gpu-share-config"),
		ExecutionRoleArn: aws.String("arn:aws:iam::123456789012:role/mce"),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), InitialInstanceCount: aws.Int32(1),
			InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Xlarge}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("gpu-share"), EndpointConfigName: aws.String("gpu-share-config")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, "gpu-share"); err != nil {
		t.Fatal(err)
	}
	container := func(tag string) *smtypes.InferenceComponentContainerSpecification {
		return &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": tag}}
	}
	sp := &smtypes.InferenceComponentSpecification{Container: container("-one"),
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(0.25),
			MinMemoryRequiredInMb: aws.Int32(128), MaxMemoryRequiredInMb: aws.Int32(256)}}
	if _, err := h.sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String("roller"),
		EndpointName: aws.String("gpu-share"), VariantName: aws.String("AllTraffic"), Specification: sp,
		RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(2)}}); err != nil {
		t.Fatal(err)
	}
	if d := h.wait(t, "roller"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("%s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	traffic := testenv.StartTraffic(t, 3, func() error {
		got, err := h.invoke("roller")
		if err == nil && got != "x-one" && got != "x-two" {
			err = errors.New("answer " + got)
		}
		return err
	})
	update := func(in *sagemaker.UpdateInferenceComponentInput) *sagemaker.DescribeInferenceComponentOutput {
		t.Helper()
		in.InferenceComponentName = aws.String("roller")
		if _, err := h.sm.UpdateInferenceComponent(ctx, in); err != nil {
			t.Fatal(err)
		}
		d := h.wait(t, "roller")
		if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToString(d.FailureReason) != "" {
			t.Fatalf("%s %+v %s", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
		}
		return d
	}

	before := copies(t, cli, instance, "roller")
	update(&sagemaker.UpdateInferenceComponentInput{Specification: sp, RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(3)}})
	grown := copies(t, cli, instance, "roller")
	kept := 0
	for _, id := range before {
		if slices.Contains(grown, id) {
			kept++
		}
	}
	if len(grown) != 3 || kept != 2 {
		t.Fatalf("2 → 3 with the same specification: containers %v, of which %d of the 2 before; want 3 and 2", grown, kept)
	}

	start := time.Now()
	d := update(&sagemaker.UpdateInferenceComponentInput{Specification: &smtypes.InferenceComponentSpecification{Container: container("-two")}})
	t.Logf("3 copies replaced one at a time in %v", time.Since(start).Round(time.Millisecond))
	if r := d.Specification.ComputeResourceRequirements; aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 || r == nil || aws.ToInt32(r.MaxMemoryRequiredInMb) != 256 {
		t.Fatalf("after the new Container: %+v, resources %+v", d.RuntimeConfig, r)
	}
	rolled := copies(t, cli, instance, "roller")
	for _, id := range rolled {
		if slices.Contains(grown, id) {
			t.Errorf("container %s of the previous specification still runs", id)
		}
	}
	if len(rolled) != 3 {
		t.Errorf("%d containers after the update, want 3", len(rolled))
	}
	if got, err := h.invoke("roller"); err != nil || got != "x-two" {
		t.Fatalf("invoke after the update = %q, %v", got, err)
	}
	traffic.Stop()
	if traffic.Failed() > 0 || traffic.Calls() == 0 {
		t.Fatalf("during the updates: %v", traffic)
	}
	t.Logf("%d calls during the updates, none failed", traffic.Calls())
}
