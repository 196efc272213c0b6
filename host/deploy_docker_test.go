package host_test

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host"
	cw "github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/store"
	"github.com/mce-run/mce/internal/awsclock"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/internal/testenv/hostenv"
)

// TestDockerGuardrailsRestartMidDeployment: on the real engine, mce dies
// (Crash: its containers keep running) while a blue/green deployment
// bakes with both fleets up; the next mce comes back on the old
// configuration, adopts the old fleet's containers, removes the new
// fleet's (of the next generation), says why in FailureReason, and serves
// the old answers.
func TestDockerGuardrailsRestartMidDeployment(t *testing.T) {
	cli := testenv.Docker(t)
	image := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	st, err := store.Open(filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	clock, err := awsclock.New(60)
	if err != nil {
		t.Fatal(err)
	}
	start := func(stateDir string) *hostenv.Host {
		h := hostenv.New(t, hostenv.Options{Instance: instance, StateDir: stateDir, Store: st,
			Runtime: func(o *docker.Options) { o.Adopt = true },
			Host:    func(c *host.Config) { c.ContainerTimeout = 10 * time.Second; c.Clock = clock }})
		if err := h.Server.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		return h
	}
	h := start(t.TempDir())
	sm := h.SageMakerClient()
	ctx := context.Background()
	const name = "gd"
	for _, v := range []string{"v1", "v2"} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(v),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": "-" + v}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(v),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(v),
				InitialInstanceCount: aws.Int32(1), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("v1")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, name); err != nil {
		t.Fatal(err)
	}
	invoke := func(h *hostenv.Host) string {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := h.RuntimeClient().InvokeEndpoint(cctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("x")})
		if err != nil {
			t.Fatal(err)
		}
		return string(out.Body)
	}
	generations := func() []string {
		t.Helper()
		f := client.Filters{}.Add("label", docker.LabelEndpoint+"="+name).Add("label", docker.LabelInstance+"="+instance)
		list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, c := range list.Items {
			out = append(out, c.Labels[docker.LabelGeneration])
		}
		slices.Sort(out)
		return out
	}
	// An hour of baking (a minute here): mce dies long before it ends.
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("v2"),
		DeploymentConfig: &smtypes.DeploymentConfig{BlueGreenUpdatePolicy: &smtypes.BlueGreenUpdatePolicy{
			TrafficRoutingConfiguration: &smtypes.TrafficRoutingConfig{Type: smtypes.TrafficRoutingConfigTypeAllAtOnce, WaitIntervalInSeconds: aws.Int32(3600)}}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
		if err != nil {
			t.Fatal(err)
		}
		if p := d.PendingDeploymentSummary; p != nil && len(p.ProductionVariants) == 1 && len(p.ProductionVariants[0].VariantStatus) == 1 &&
			p.ProductionVariants[0].VariantStatus[0].Status == smtypes.VariantStatusBaking {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deployment never baked: %s %q", d.EndpointStatus, aws.ToString(d.FailureReason))
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := invoke(h); got != "x-v2" {
		t.Fatalf("while baking the endpoint answered %q, want the new fleet's", got)
	}
	if g := generations(); !slices.Equal(g, []string{"1", "2"}) {
		t.Fatalf("while baking, containers of generations %v, want both fleets (1 and 2)", g)
	}
	h.Crash()

	h2 := start(h.StateDir)
	if err := h2.Server.WaitEndpoint(ctx, name); err != nil {
		t.Fatal(err)
	}
	d, err := h2.SageMakerClient().DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	if d.EndpointStatus != smtypes.EndpointStatusInService || aws.ToString(d.EndpointConfigName) != "v1" || d.PendingDeploymentSummary != nil ||
		!strings.Contains(aws.ToString(d.FailureReason), "rolled back to the previous configuration because mce restarted") {
		t.Fatalf("after the restart: %s on %s, reason %q, pending %+v", d.EndpointStatus, aws.ToString(d.EndpointConfigName), aws.ToString(d.FailureReason), d.PendingDeploymentSummary)
	}
	if got := invoke(h2); got != "x-v1" {
		t.Fatalf("after the restart the endpoint answered %q, want the old fleet's", got)
	}
	if g := generations(); !slices.Equal(g, []string{"1"}) {
		t.Fatalf("after the restart, containers of generations %v, want the old fleet's only (1)", g)
	}
}

// TestDockerGuardrailsCanaryRollbackUnderTraffic: on the real engine, a
// CANARY deployment (1 instance of 2) under steady traffic is rolled back
// by its alarm (SetAlarmState): the new fleet's containers stop only after
// the calls they took ended, and not one call fails from first to last.
func TestDockerGuardrailsCanaryRollbackUnderTraffic(t *testing.T) {
	cli := testenv.Docker(t)
	image := testenv.Image(t, "probe")
	instance := testenv.Instance(t)
	clock, err := awsclock.New(600)
	if err != nil {
		t.Fatal(err)
	}
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch"), AlarmInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	h := hostenv.New(t, hostenv.Options{Instance: instance,
		Host: func(c *host.Config) { c.ContainerTimeout = 10 * time.Second; c.Clock = clock; c.CloudWatch = svc }})
	sm := h.SageMakerClient()
	ctx := context.Background()
	const name = "gc"
	for _, v := range []string{"v1", "v2"} {
		if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(v),
			PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(image), Environment: map[string]string{"PROBE_TAG": "-" + v}}}); err != nil {
			t.Fatal(err)
		}
		if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(v),
			ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(v),
				InitialInstanceCount: aws.Int32(2), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("v1")}); err != nil {
		t.Fatal(err)
	}
	if err := h.Server.WaitEndpoint(ctx, name); err != nil {
		t.Fatal(err)
	}
	cwc := cloudwatch.New(cloudwatch.Options{Region: "us-east-1", BaseEndpoint: aws.String(h.URL), Credentials: aws.AnonymousCredentials{}})
	if _, err := cwc.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String("gc-guard"),
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("nowhere")}, {Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}},
		Statistic:  cwtypes.StatisticAverage, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(1e12),
		ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold, TreatMissingData: aws.String("notBreaching")}); err != nil {
		t.Fatal(err)
	}
	rt := h.RuntimeClient()
	var mu sync.Mutex
	answers := map[string]int{}
	traffic := testenv.StartTraffic(t, 4, func() error {
		cctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		out, err := rt.InvokeEndpoint(cctx, &sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("x"),
			CustomAttributes: aws.String("sleep=20ms")}, func(o *sagemakerruntime.Options) { o.RetryMaxAttempts = 1 })
		if err != nil {
			return err
		}
		mu.Lock()
		answers[string(out.Body)]++
		mu.Unlock()
		return nil
	})
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String(name), EndpointConfigName: aws.String("v2"),
		DeploymentConfig: &smtypes.DeploymentConfig{
			BlueGreenUpdatePolicy: &smtypes.BlueGreenUpdatePolicy{TrafficRoutingConfiguration: &smtypes.TrafficRoutingConfig{
				Type: smtypes.TrafficRoutingConfigTypeCanary, WaitIntervalInSeconds: aws.Int32(3600), // 6 s here
				CanarySize: &smtypes.CapacitySize{Type: smtypes.CapacitySizeTypeInstanceCount, Value: aws.Int32(1)}}},
			AutoRollbackConfiguration: &smtypes.AutoRollbackConfig{Alarms: []smtypes.Alarm{{AlarmName: aws.String("gc-guard")}}}}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		mu.Lock()
		canary := answers["x-v2"]
		mu.Unlock()
		if canary >= 5 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the canary never answered")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := cwc.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("gc-guard"),
		StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("test")}); err != nil {
		t.Fatal(err)
	}
	var d *sagemaker.DescribeEndpointOutput
	for {
		if d, err = sm.DescribeEndpoint(ctx, &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)}); err != nil {
			t.Fatal(err)
		}
		if d.EndpointStatus == smtypes.EndpointStatusInService && aws.ToString(d.FailureReason) != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no rollback: %s", d.EndpointStatus)
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	traffic.Stop()
	if traffic.Failed() > 0 {
		t.Errorf("calls failed during the deployment and its rollback: %v", traffic)
	}
	if aws.ToString(d.EndpointConfigName) != "v1" || !strings.Contains(aws.ToString(d.FailureReason), "gc-guard") {
		t.Errorf("after the rollback: %s, %q", aws.ToString(d.EndpointConfigName), aws.ToString(d.FailureReason))
	}
	f := client.Filters{}.Add("label", docker.LabelEndpoint+"="+name).Add("label", docker.LabelInstance+"="+instance)
	list, err := cli.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range list.Items {
		if g := c.Labels[docker.LabelGeneration]; g != "1" {
			t.Errorf("a container of generation %s is left after the rollback", g)
		}
	}
	mu.Lock()
	t.Logf("%d calls, none failed: %v", traffic.OK(), answers)
	mu.Unlock()
}
