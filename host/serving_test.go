package host

import (
	"context"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
)

// TestEndpointThatCannotServeIsNotInService: an endpoint whose only
// container is down shows OutOfService with a reason naming it in
// DescribeEndpoint and ListEndpoints, its calls get ServiceUnavailable,
// and it shows InService again once the container is back.
func TestEndpointThatCannotServeIsNotInService(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	createAll(t, sm, "down", "tag", 1)
	ctx := context.Background()
	c := h.backend.container("down/AllTraffic/primary")
	if c == nil {
		t.Fatal("no fake container down/AllTraffic/primary")
	}

	c.ready.Store(false)
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("down")})
	if err != nil {
		t.Fatal(err)
	}
	if d.EndpointStatus != smtypes.EndpointStatusOutOfService {
		t.Errorf("status %s, want OutOfService", d.EndpointStatus)
	}
	if r := aws.ToString(d.FailureReason); !strings.Contains(r, "AllTraffic") || !strings.Contains(r, "primary") {
		t.Errorf("FailureReason %q does not name the variant and container", r)
	}
	l, err := sm.ListEndpoints(ctx, &sagemaker.ListEndpointsInput{StatusEquals: smtypes.EndpointStatusOutOfService})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Endpoints) != 1 || aws.ToString(l.Endpoints[0].EndpointName) != "down" {
		t.Errorf("ListEndpoints(OutOfService) = %+v", l.Endpoints)
	}
	_, err = h.client.InvokeEndpoint(ctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("down"), Body: []byte("x")},
		func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
	if code, _ := apiCode(t, err); code != "ServiceUnavailable" {
		t.Errorf("invoking an endpoint that cannot serve: %s, want ServiceUnavailable", code)
	}

	c.ready.Store(true)
	d, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("down")})
	if err != nil {
		t.Fatal(err)
	}
	if d.EndpointStatus != smtypes.EndpointStatusInService || d.FailureReason != nil {
		t.Errorf("after recovery: %s %q, want InService and no reason", d.EndpointStatus, aws.ToString(d.FailureReason))
	}
}

// TestNetworkIsolationRoundTrips: EnableNetworkIsolation given to
// CreateModel comes back from DescribeModel.
func TestNetworkIsolationRoundTrips(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	for _, iso := range []bool{true, false} {
		name := "iso-" + map[bool]string{true: "on", false: "off"}[iso]
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("i")}, EnableNetworkIsolation: aws.Bool(iso)}); err != nil {
			t.Fatal(err)
		}
		d, err := sm.DescribeModel(ctx, &sagemaker.DescribeModelInput{ModelName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToBool(d.EnableNetworkIsolation) != iso {
			t.Errorf("%s: DescribeModel EnableNetworkIsolation = %v, want %v", name, aws.ToBool(d.EnableNetworkIsolation), iso)
		}
	}
}
