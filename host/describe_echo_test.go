package host

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
)

// TestDescribeEchoesWhatWasAccepted: what CreateEndpointConfig accepts and
// mce does not act on comes back in DescribeEndpoint as it was given
// (MetricsConfig), a bad MetricsConfig is refused, a variant being scaled
// says so in its VariantStatus, and UpdateEndpointWeightsAndCapacities
// refuses ServerlessUpdateConfig rather than dropping it.
func TestDescribeEchoesWhatWasAccepted(t *testing.T) {
	h := newHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("echo-model"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("-v1")}}); err != nil {
		t.Fatal(err)
	}
	config := func(name string, freq int32) error {
		_, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String("echo-model"),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}},
			MetricsConfig: &smtypes.MetricsConfig{EnableEnhancedMetrics: aws.Bool(true), MetricPublishFrequencyInSeconds: smtypes.MetricPublishFrequencyInSeconds(freq)}})
		return err
	}
	if err := config("echo-bad", 45); err == nil {
		t.Fatal("MetricPublishFrequencyInSeconds 45 accepted")
	} else if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "metricsConfig.metricPublishFrequencyInSeconds") {
		t.Errorf("bad frequency: %s %q", code, msg)
	}
	if err := config("echo-config", 10); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("echo"), EndpointConfigName: aws.String("echo-config")}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "echo", smtypes.EndpointStatusInService)
	d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("echo")})
	if err != nil {
		t.Fatal(err)
	}
	if m := d.MetricsConfig; m == nil || !aws.ToBool(m.EnableEnhancedMetrics) || m.MetricPublishFrequencyInSeconds != 10 {
		t.Errorf("MetricsConfig = %+v, want the configuration's echoed", m)
	}
	if len(d.ProductionVariants[0].VariantStatus) != 0 {
		t.Errorf("a variant at rest has VariantStatus %+v", d.ProductionVariants[0].VariantStatus)
	}

	_, err = sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("echo"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"),
			ServerlessUpdateConfig: &smtypes.ProductionVariantServerlessUpdateConfig{MaxConcurrency: aws.Int32(5)}}}})
	if err == nil {
		t.Fatal("ServerlessUpdateConfig accepted on an instance-based variant")
	} else if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "ServerlessUpdateConfig") {
		t.Errorf("ServerlessUpdateConfig: %s %q", code, msg)
	}

	h.backend.scaleDelay = 500 * time.Millisecond // the new instances take a while to come up
	if _, err := sm.UpdateEndpointWeightsAndCapacities(ctx, &sagemaker.UpdateEndpointWeightsAndCapacitiesInput{EndpointName: aws.String("echo"),
		DesiredWeightsAndCapacities: []smtypes.DesiredWeightAndCapacity{{VariantName: aws.String("AllTraffic"), DesiredInstanceCount: aws.Int32(2)}}}); err != nil {
		t.Fatal(err)
	}
	d, _ = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("echo")})
	if vs := d.ProductionVariants[0].VariantStatus; d.EndpointStatus != smtypes.EndpointStatusUpdating || len(vs) != 1 ||
		vs[0].Status != smtypes.VariantStatusUpdating || vs[0].StartTime == nil || !strings.Contains(aws.ToString(vs[0].StatusMessage), "from 1 to 2") {
		t.Errorf("while scaling: status %s, VariantStatus %+v", d.EndpointStatus, vs)
	}
	waitStatus(t, sm, "echo", smtypes.EndpointStatusInService)
	d, _ = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String("echo")})
	if v := d.ProductionVariants[0]; aws.ToInt32(v.CurrentInstanceCount) != 2 || len(v.VariantStatus) != 0 || d.MetricsConfig == nil {
		t.Errorf("after scaling: %+v, MetricsConfig %+v", v, d.MetricsConfig)
	}
}
