package host_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/smithy-go"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/host"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/testenv"
)

// noAWS keeps the AWS SDK away from the developer's credentials and the
// network: no AWS_* settings, empty shared files, no instance metadata.
func noAWS(t *testing.T) {
	t.Helper()
	empty := t.TempDir()
	t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(empty, "config"))
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(empty, "credentials"))
	for _, k := range []string{"AWS_PROFILE", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
		"AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_WEB_IDENTITY_TOKEN_FILE",
		"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3"} {
		t.Setenv(k, "")
		os.Unsetenv(k)
	}
}

// noDriver is NVML as on a host without the NVIDIA driver: Init fails.
func noDriver() *gpu.Inventory {
	return gpu.NewInventory(&mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }})
}

// refusedAddr is a loopback address where nothing listens.
func refusedAddr(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

type preflightHost struct {
	sm       *sagemaker.Client
	srv      *host.Server
	cli      *client.Client
	instance string
	data     string // a model root
}

func newPreflightHost(t *testing.T) *preflightHost {
	t.Helper()
	noAWS(t)
	cli := testenv.Docker(t)
	testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	logs := &testenv.SyncBuffer{}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("mce log:\n%s", logs.String())
		}
	})
	log := zerolog.New(logs).With().Timestamp().Logger()
	data := t.TempDir()
	fetcher, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{data},
		S3: artifact.S3Options{InstanceMetadataEndpoint: "http://" + refusedAddr(t), CredentialsTimeout: 500 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := docker.New(context.Background(), docker.Options{
		Client: cli, Instance: instance, StateDir: t.TempDir(), Logger: log, Fetcher: fetcher, GPUs: noDriver(),
		StopGrace: 2 * time.Second, HealthInterval: 500 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	srv := host.New(host.Config{Backend: &docker.Engine{Runtime: rt}, Store: st, Logger: log,
		ContainerTimeout: 5 * time.Second, ModelData: fetcher})
	hs := httptest.NewServer(srv.Handler())
	t.Cleanup(func() {
		hs.Close()
		if err := srv.Close(context.Background()); err != nil {
			t.Errorf("teardown: %v", err)
		}
		rt.Close()
		st.Close()
		if c, n := testenv.Leftovers(t, cli, instance); c+n > 0 {
			t.Errorf("left behind %d containers, %d networks", c, n)
		}
	})
	return &preflightHost{
		sm: sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(hs.URL),
			Credentials: aws.AnonymousCredentials{}, HTTPClient: hs.Client()}),
		srv: srv, cli: cli, instance: instance, data: data,
	}
}

func absentImage(t *testing.T) string {
	b := make([]byte, 6)
	rand.Read(b)
	return "mce-test/absent-" + hex.EncodeToString(b) + ":1"
}

func (h *preflightHost) model(t *testing.T, name string, defs ...smtypes.ContainerDefinition) {
	t.Helper()
	in := &sagemaker.CreateModelInput{ModelName: aws.String(name)}
	if len(defs) == 1 {
		in.PrimaryContainer = &defs[0]
	} else {
		in.Containers = defs
	}
	if _, err := h.sm.CreateModel(context.Background(), in); err != nil {
		t.Fatal(err)
	}
}

func (h *preflightHost) config(t *testing.T, name string, variants ...smtypes.ProductionVariant) {
	t.Helper()
	if _, err := h.sm.CreateEndpointConfig(context.Background(), &sagemaker.CreateEndpointConfigInput{
		EndpointConfigName: aws.String(name), ProductionVariants: variants}); err != nil {
		t.Fatal(err)
	}
}

func variant(name, model string, it smtypes.ProductionVariantInstanceType) smtypes.ProductionVariant {
	return smtypes.ProductionVariant{VariantName: aws.String(name), ModelName: aws.String(model),
		InitialInstanceCount: aws.Int32(1), InstanceType: it}
}

// waitStatus polls DescribeEndpoint until the endpoint reaches want.
func (h *preflightHost) waitStatus(t *testing.T, name string, want smtypes.EndpointStatus, within time.Duration) *sagemaker.DescribeEndpointOutput {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		out, err := h.sm.DescribeEndpoint(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if out.EndpointStatus == want {
			return out
		}
		if time.Now().After(deadline) {
			t.Fatalf("endpoint %s is %s (%s) after %s, want %s", name, out.EndpointStatus, aws.ToString(out.FailureReason), within, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPreflightReportsEveryProblemAtOnce is the pasted-notebook case: a
// missing image, a GPU instance type on a host without a driver, model data
// that does not exist and S3 model data without AWS credentials. The
// endpoint goes Failed at once, with every problem and its fix in one
// FailureReason, and no container is started. It can then be updated to a
// working configuration (Updating, then InService) and deleted.
func TestPreflightReportsEveryProblemAtOnce(t *testing.T) {
	h := newPreflightHost(t)
	ctx := context.Background()
	image := absentImage(t)
	missing := "file://" + filepath.Join(h.data, "nope", "model.tar.gz")
	h.model(t, "bad-gpu", smtypes.ContainerDefinition{Image: aws.String(image), ModelDataUrl: aws.String(missing)})
	h.model(t, "bad-s3", smtypes.ContainerDefinition{Image: aws.String("mce-example/probe:latest"),
		ModelDataUrl: aws.String("s3://my-bucket/model.tar.gz")})
	h.config(t, "bad", variant("gpu", "bad-gpu", smtypes.ProductionVariantInstanceTypeMlG5Xlarge),
		variant("s3", "bad-s3", smtypes.ProductionVariantInstanceTypeMlM5Large))

	start := time.Now()
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("nb"), EndpointConfigName: aws.String("bad")}); err != nil {
		t.Fatal(err)
	}
	out := h.waitStatus(t, "nb", smtypes.EndpointStatusFailed, 15*time.Second)
	took := time.Since(start)
	reason := aws.ToString(out.FailureReason)
	t.Logf("Failed after %s; FailureReason (%d bytes): %s", took, len(reason), reason)
	if len(reason) > 1024 {
		t.Errorf("FailureReason is %d bytes, over SageMaker's 1024", len(reason))
	}
	for _, want := range []string{
		"4 problems",
		image, "docker pull " + image, "--pull=if-missing",
		"InstanceType ml.g5.xlarge asks for 1 GPU (from the instance type)", "no NVIDIA driver", "ml.m5.xlarge", "Resources.Gpus: 0",
		`model data "file://<path>" not found`, // host paths are never shown to API callers
		`(4) container "primary" (variant "s3"): its model data is on S3`, "no AWS credentials", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "--s3-endpoint",
	} {
		if !strings.Contains(reason, want) {
			t.Errorf("FailureReason lacks %q", want)
		}
	}
	if c, _ := testenv.Leftovers(t, h.cli, h.instance); c != 0 {
		t.Errorf("%d containers were started for an endpoint that failed its pre-flight", c)
	}

	// Nothing runs to re-weight: a clear refusal, not "in-progress".
	_, err := h.sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("nb"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("gpu"), DesiredWeight: aws.Float32(2)}}})
	var ae smithy.APIError
	if !errors.As(err, &ae) || ae.ErrorCode() != "ValidationException" || !strings.Contains(ae.ErrorMessage(), "Failed") ||
		strings.Contains(ae.ErrorMessage(), "in-progress") {
		t.Errorf("UpdateEndpointWeightsAndCapacities on a Failed endpoint: %v; want a ValidationException saying it is Failed", err)
	}

	// A Failed endpoint updated to a bad configuration stays Failed, with
	// the new configuration's problems.
	h.config(t, "still-bad", variant("gpu", "bad-gpu", smtypes.ProductionVariantInstanceTypeMlM5Large))
	if _, err := h.sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("nb"), EndpointConfigName: aws.String("still-bad")}); err != nil {
		t.Fatalf("UpdateEndpoint on a Failed endpoint: %v", err)
	}
	out = h.waitStatus(t, "nb", smtypes.EndpointStatusFailed, 15*time.Second)
	if r := aws.ToString(out.FailureReason); !strings.Contains(r, "2 problems") || strings.Contains(r, "GPU") || aws.ToString(out.EndpointConfigName) != "still-bad" {
		t.Errorf("after a bad update: config %s, FailureReason %q; want still-bad's 2 problems (image, model data), no GPU", aws.ToString(out.EndpointConfigName), r)
	}

	// Updated to a working configuration, it comes into service.
	h.model(t, "good", smtypes.ContainerDefinition{Image: aws.String("mce-example/probe:latest")})
	h.config(t, "good", variant("AllTraffic", "good", smtypes.ProductionVariantInstanceTypeMlM5Large))
	if _, err := h.sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("nb"), EndpointConfigName: aws.String("good")}); err != nil {
		t.Fatalf("UpdateEndpoint on a Failed endpoint: %v", err)
	}
	out, err = h.sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("nb")})
	if err != nil {
		t.Fatal(err)
	}
	if out.EndpointStatus != smtypes.EndpointStatusUpdating && out.EndpointStatus != smtypes.EndpointStatusInService {
		t.Errorf("right after UpdateEndpoint: %s, want Updating", out.EndpointStatus)
	}
	out = h.waitStatus(t, "nb", smtypes.EndpointStatusInService, 60*time.Second)
	if aws.ToString(out.FailureReason) != "" || aws.ToString(out.EndpointConfigName) != "good" {
		t.Errorf("InService with config %s and FailureReason %q; want good and none", aws.ToString(out.EndpointConfigName), aws.ToString(out.FailureReason))
	}

	// The happy path's pre-flight is quick.
	plan, _, err := spec.BuildPlan("us-east-1", "123456789012", spec.CreateEndpointInput{EndpointName: "x", EndpointConfigName: "c"},
		spec.CreateEndpointConfigInput{EndpointConfigName: "c", ProductionVariants: []spec.ProductionVariant{{VariantName: "v", ModelName: "m",
			InitialInstanceCount: aws.Int32(1), InstanceType: "ml.m5.large"}}},
		spec.MapLookup(map[string]spec.CreateModelInput{"m": {ModelName: "m", PrimaryContainer: &spec.ContainerDefinition{Image: "mce-example/probe:latest"}}}, ""))
	if err != nil {
		t.Fatal(err)
	}
	const runs = 20
	pstart := time.Now()
	for range runs {
		if p := h.srv.Preflight(ctx, plan); len(p) != 0 {
			t.Fatalf("pre-flight of a good plan: %v", p)
		}
	}
	t.Logf("pre-flight of a one-container endpoint: %s each (mean of %d)", time.Since(pstart)/runs, runs)

	// Deleting works from InService, and from Failed.
	if _, err := h.sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("nb")}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("nb2"), EndpointConfigName: aws.String("bad")}); err != nil {
		t.Fatal(err)
	}
	h.waitStatus(t, "nb2", smtypes.EndpointStatusFailed, 15*time.Second)
	if _, err := h.sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String("nb2")}); err != nil {
		t.Fatalf("DeleteEndpoint on a Failed endpoint: %v", err)
	}
	for _, name := range []string{"nb", "nb2"} {
		w := sagemaker.NewEndpointDeletedWaiter(h.sm, func(o *sagemaker.EndpointDeletedWaiterOptions) {
			o.MinDelay, o.MaxDelay = 50*time.Millisecond, 200*time.Millisecond
		})
		if err := w.Wait(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}, 60*time.Second); err != nil {
			t.Errorf("%s not deleted: %v", name, err)
		}
	}
}
