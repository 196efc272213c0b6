package host_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
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
	"github.com/mce-run/mce/internal/testenv"
)

// TestDockerEndpointRecoversAndReportsOutage reproduces issue 9 item 8 on
// the real engine, through the SageMaker API: a container removed with
// docker rm -f is recreated and the endpoint answers again within seconds;
// a container that cannot be recreated (its image is gone) makes the
// endpoint OutOfService with a FailureReason and its calls
// ServiceUnavailable, until it can run again. Before, the endpoint stayed
// InService while mce looped on "No such container".
func TestDockerEndpointRecoversAndReportsOutage(t *testing.T) {
	cli := testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	name := "rs-" + testenv.Instance(t)
	img := "mce-test-" + name + "/probe:latest"
	ctx := context.Background()
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: probe, Target: img}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.ImageRemove(context.Background(), img, client.ImageRemoveOptions{}) })
	file := filepath.Join(t.TempDir(), "endpoint.yaml")
	yaml := `Models:
  - ModelName: m
    PrimaryContainer:
      Image: ` + img + `
EndpointConfigs:
  - EndpointConfigName: c
    ProductionVariants:
      - VariantName: AllTraffic
        ModelName: m
        InitialInstanceCount: 1
        InstanceType: ml.c5.large
Endpoints:
  - EndpointName: ` + name + `
    EndpointConfigName: c
`
	if err := os.WriteFile(file, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	rtc, url := dockerHostURL(t, file)
	sm := sagemaker.New(sagemaker.Options{Region: "us-east-1", BaseEndpoint: aws.String(url), Credentials: aws.AnonymousCredentials{}})

	invoke := func() error {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		out, err := rtc.InvokeEndpoint(cctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("hello")},
			func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
		if err == nil && string(out.Body) != "hello" {
			return errors.New("answered " + string(out.Body))
		}
		return err
	}
	describe := func() (smtypes.EndpointStatus, string) {
		d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		return d.EndpointStatus, aws.ToString(d.FailureReason)
	}
	containerID := func() string {
		f := client.Filters{}.Add("label", docker.LabelEndpoint+"="+name).Add("label", docker.LabelContainer+"=primary")
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil || len(list.Items) != 1 {
			t.Fatalf("containers of %s: %v, %d", name, err, len(list.Items))
		}
		return list.Items[0].ID
	}
	eventually := func(within time.Duration, what string, cond func() bool) {
		t.Helper()
		deadline := time.Now().Add(within)
		for !cond() {
			if time.Now().After(deadline) {
				st, why := describe()
				t.Fatalf("not within %s: %s (endpoint %s %q)", within, what, st, why)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	if err := invoke(); err != nil {
		t.Fatal(err)
	}
	// docker rm -f: recreated, answering again within seconds.
	if _, err := cli.ContainerRemove(ctx, containerID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	eventually(10*time.Second, "the endpoint answers after docker rm -f", func() bool { return invoke() == nil })
	t.Logf("answering again %s after docker rm -f", time.Since(start).Round(time.Millisecond))
	if st, _ := describe(); st != smtypes.EndpointStatusInService {
		t.Errorf("after recovery: %s", st)
	}

	// Cannot be recreated: OutOfService with a reason, and 503.
	if _, err := cli.ContainerRemove(ctx, containerID(), client.ContainerRemoveOptions{Force: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.ImageRemove(ctx, img, client.ImageRemoveOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(10*time.Second, "OutOfService with a reason", func() bool {
		st, why := describe()
		return st == smtypes.EndpointStatusOutOfService && strings.Contains(why, "primary") && strings.Contains(why, "could not be restarted")
	})
	_, why := describe()
	t.Logf("FailureReason: %s", why)
	var ae smithy.APIError
	if err := invoke(); !errors.As(err, &ae) || ae.ErrorCode() != "ServiceUnavailable" {
		t.Errorf("invoking an endpoint that cannot serve: %v, want ServiceUnavailable", err)
	}

	// The image is back: InService and answering.
	if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: probe, Target: img}); err != nil {
		t.Fatal(err)
	}
	eventually(45*time.Second, "InService again once the image is back", func() bool {
		st, _ := describe()
		return st == smtypes.EndpointStatusInService && invoke() == nil
	})
}
