package host

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
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
	"github.com/aws/smithy-go"
	"github.com/rs/zerolog"

	cw "github.com/mce-run/mce/host/cloudwatch"
	"github.com/mce-run/mce/host/deploy"
	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/internal/awsclock"
	"github.com/mce-run/mce/internal/testenv"
	"github.com/mce-run/mce/pipeline"
)

// guardHarness is a server with CloudWatch (alarms evaluated every 50 ms)
// and the AWS clock compressed by factor.
func guardHarness(t *testing.T, factor float64) *harness {
	t.Helper()
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch"), AlarmInterval: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	clock, err := awsclock.New(factor)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{CloudWatch: svc, Clock: clock})
	h.backend.stopOnClose = true
	return h
}

// newConfig makes a model of image tag and a configuration of count
// instances of it, both named name.
func newConfig(t *testing.T, sm *sagemaker.Client, name, tag string, count int32) {
	t.Helper()
	ctx := context.Background()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String(tag)}}); err != nil {
		t.Fatal(err)
	}
	if _, err := sm.CreateEndpointConfig(ctx, &sagemaker.CreateEndpointConfigInput{EndpointConfigName: aws.String(name),
		ProductionVariants: []smtypes.ProductionVariant{{VariantName: aws.String("AllTraffic"), ModelName: aws.String(name),
			InitialInstanceCount: aws.Int32(count), InstanceType: smtypes.ProductionVariantInstanceTypeMlM5Large}}}); err != nil {
		t.Fatal(err)
	}
}

func describeEP(t *testing.T, sm *sagemaker.Client, name string) *sagemaker.DescribeEndpointOutput {
	t.Helper()
	d, err := sm.DescribeEndpoint(context.Background(), &sagemaker.DescribeEndpointInput{EndpointName: aws.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// waitUntil polls f every 10 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, f func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !f() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// traffic is a client loop on an endpoint: answers by body, the broken
// fleet's errors, and every other failure.
type traffic struct {
	stop   chan struct{}
	done   chan struct{}
	mu     sync.Mutex
	bodies map[string]int
	broken int
	failed []error
}

func startTraffic(h *harness, name string) *traffic {
	tr := &traffic{stop: make(chan struct{}), done: make(chan struct{}), bodies: map[string]int{}}
	go func() {
		defer close(tr.done)
		for {
			select {
			case <-tr.stop:
				return
			default:
			}
			out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String(name), Body: []byte("x")})
			tr.mu.Lock()
			var ae smithy.APIError
			switch {
			case err == nil:
				tr.bodies[string(out.Body)]++
			case errors.As(err, &ae) && ae.ErrorCode() == "ModelError" && strings.Contains(ae.ErrorMessage(), "broken image"):
				tr.broken++
			default:
				tr.failed = append(tr.failed, err)
			}
			tr.mu.Unlock()
		}
	}()
	return tr
}

func (tr *traffic) end() (map[string]int, int, []error) {
	close(tr.stop)
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.bodies, tr.broken, tr.failed
}

// statuses records every status an endpoint goes through, read as
// invocations read it, until stop.
func statuses(e *Endpoint) (stop func() []spec.Status) {
	// The first status is read here, before the caller goes on: a
	// goroutine started on a busy machine may first look after an update
	// has already made the endpoint Updating.
	seen := []spec.Status{e.Status()}
	quit, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			if st := e.Status(); len(seen) == 0 || seen[len(seen)-1] != st {
				seen = append(seen, st)
			}
			select {
			case <-quit:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	return func() []spec.Status { close(quit); <-done; return seen }
}

func blueGreen(typ smtypes.TrafficRoutingConfigType, wait int32, size *smtypes.CapacitySize, alarms ...string) *smtypes.DeploymentConfig {
	t := &smtypes.TrafficRoutingConfig{Type: typ, WaitIntervalInSeconds: aws.Int32(wait)}
	switch typ {
	case smtypes.TrafficRoutingConfigTypeCanary:
		t.CanarySize = size
	case smtypes.TrafficRoutingConfigTypeLinear:
		t.LinearStepSize = size
	}
	d := &smtypes.DeploymentConfig{BlueGreenUpdatePolicy: &smtypes.BlueGreenUpdatePolicy{TrafficRoutingConfiguration: t}}
	if len(alarms) > 0 {
		d.AutoRollbackConfiguration = &smtypes.AutoRollbackConfig{}
		for _, a := range alarms {
			d.AutoRollbackConfiguration.Alarms = append(d.AutoRollbackConfiguration.Alarms, smtypes.Alarm{AlarmName: aws.String(a)})
		}
	}
	return d
}

func instancesOf(n int32) *smtypes.CapacitySize {
	return &smtypes.CapacitySize{Type: smtypes.CapacitySizeTypeInstanceCount, Value: aws.Int32(n)}
}

// TestGuardrailsCanaryRollsBackOnAlarm: a CANARY update to a fleet that
// answers 500 is rolled back when the alarm on the endpoint's
// Invocation5XXErrors, fed by the real metrics of the calls, goes to
// ALARM: statuses Updating → RollingBack → InService, the old
// configuration, SageMaker's kind of FailureReason, the new fleet
// removed, and not one failed call to the old fleet throughout.
func TestGuardrailsCanaryRollsBackOnAlarm(t *testing.T) {
	h := guardHarness(t, 60)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "gr", "-v1", 2)
	newConfig(t, sm, "gr-broken", "!status=500", 2)
	if _, err := h.cloudWatch(nil).PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
		AlarmName: aws.String("gr-5xx"), Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("Invocation5XXErrors"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("gr")}, {Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}},
		Statistic:  cwtypes.StatisticSum, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(0),
		ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold, TreatMissingData: aws.String("notBreaching"),
	}); err != nil {
		t.Fatal(err)
	}
	e := h.srv.reg.get("gr")
	stopStatuses := statuses(e)
	tr := startTraffic(h, "gr")
	// Baking takes an hour of AWS time (a minute here): the alarm must
	// end it long before.
	dc := blueGreen(smtypes.TrafficRoutingConfigTypeCanary, 3600, instancesOf(1), "gr-5xx")
	dc.BlueGreenUpdatePolicy.MaximumExecutionTimeoutInSeconds = aws.Int32(7200)
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("gr"), EndpointConfigName: aws.String("gr-broken"),
		DeploymentConfig: dc}); err != nil {
		t.Fatal(err)
	}
	var canary float64
	waitFor(t, 20*time.Second, "the canary's share", func() bool {
		if sp := e.split.Load(); sp != nil {
			canary = sp.Share()
		}
		return canary > 0
	})
	if canary != 0.5 {
		t.Errorf("the canary of 1 instance of 2 takes %v of the calls, want 0.5", canary)
	}
	d := describeEP(t, sm, "gr")
	if p := d.PendingDeploymentSummary; p == nil || aws.ToString(p.EndpointConfigName) != "gr-broken" || len(p.ProductionVariants) != 1 ||
		len(p.ProductionVariants[0].VariantStatus) != 1 || p.StartTime == nil {
		t.Fatalf("PendingDeploymentSummary during the canary = %+v", p)
	}
	waitFor(t, 90*time.Second, "the rollback", func() bool {
		d = describeEP(t, sm, "gr")
		return d.EndpointStatus == smtypes.EndpointStatusInService && aws.ToString(d.FailureReason) != ""
	})
	time.Sleep(100 * time.Millisecond) // calls after the rollback
	bodies, broken, failed := tr.end()
	seen := stopStatuses()
	if len(failed) > 0 {
		t.Errorf("%d calls failed other than the broken fleet's 500s, first: %v", len(failed), failed[0])
	}
	if broken == 0 || bodies["x-v1"] == 0 || len(bodies) != 1 {
		t.Errorf("answers %v and %d of the broken fleet: want the canary to have taken some", bodies, broken)
	}
	if want := []spec.Status{spec.StatusInService, spec.StatusUpdating, spec.StatusRollingBack, spec.StatusInService}; !equalStatuses(seen, want) {
		t.Errorf("statuses %v, want %v", seen, want)
	}
	if aws.ToString(d.EndpointConfigName) != "gr-config" || d.PendingDeploymentSummary != nil ||
		!strings.Contains(aws.ToString(d.FailureReason), "rolled back") || !strings.Contains(aws.ToString(d.FailureReason), "gr-5xx") {
		t.Errorf("after the rollback: config %s, reason %q, pending %+v", aws.ToString(d.EndpointConfigName), aws.ToString(d.FailureReason), d.PendingDeploymentSummary)
	}
	if l := d.LastDeploymentConfig; l == nil || l.BlueGreenUpdatePolicy == nil ||
		l.BlueGreenUpdatePolicy.TrafficRoutingConfiguration.Type != smtypes.TrafficRoutingConfigTypeCanary || len(l.AutoRollbackConfiguration.Alarms) != 1 {
		t.Errorf("LastDeploymentConfig = %+v", l)
	}
	if e.split.Load() != nil || h.backend.closed.Load() != 1 {
		t.Errorf("after the rollback: split %v, %d fleets closed (want the new one)", e.split.Load(), h.backend.closed.Load())
	}
	for range 20 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("gr"), Body: []byte("x")})
		if err != nil || string(out.Body) != "x-v1" {
			t.Fatalf("after the rollback: %v %v", out, err)
		}
	}
}

func equalStatuses(got, want []spec.Status) bool {
	return strings.Join(statusStrings(got), ",") == strings.Join(statusStrings(want), ",")
}

func statusStrings(s []spec.Status) []string {
	var out []string
	for _, x := range s {
		out = append(out, string(x))
	}
	return out
}

// TestGuardrailsLinearCompletes: a LINEAR update of 1 instance in 4 to a
// good fleet walks its four steps (the share observed moving 25, 50, 75,
// 100 %), both fleets answer meanwhile, and the endpoint ends on the new
// configuration with the old fleet removed; no call fails.
func TestGuardrailsLinearCompletes(t *testing.T) {
	h := guardHarness(t, 600) // a bake of 120 s is 200 ms
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "lin", "-v1", 4)
	newConfig(t, sm, "lin-v2", "-v2", 4)
	e := h.srv.reg.get("lin")
	tr := startTraffic(h, "lin")
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("lin"), EndpointConfigName: aws.String("lin-v2"),
		DeploymentConfig: blueGreen(smtypes.TrafficRoutingConfigTypeLinear, 120, instancesOf(1))}); err != nil {
		t.Fatal(err)
	}
	var shares []float64
	waitFor(t, 20*time.Second, "the end of the deployment", func() bool {
		if sp := e.split.Load(); sp != nil {
			if f := sp.Share(); f > 0 && (len(shares) == 0 || shares[len(shares)-1] != f) {
				shares = append(shares, f)
			}
		}
		return e.Status() == spec.StatusInService && e.record().ConfigName == "lin-v2"
	})
	waitFor(t, 5*time.Second, "the old fleet's removal", func() bool { return h.backend.closed.Load() == 1 })
	bodies, broken, failed := tr.end()
	if len(failed) > 0 || broken > 0 {
		t.Errorf("%d calls failed, first: %v", len(failed), failed)
	}
	if bodies["x-v1"] == 0 || bodies["x-v2"] == 0 {
		t.Errorf("answers %v: want both fleets to have answered", bodies)
	}
	if want := []float64{0.25, 0.5, 0.75, 1}; !equalFloats(shares, want) {
		t.Errorf("shares observed %v, want %v", shares, want)
	}
	d := describeEP(t, sm, "lin")
	if d.PendingDeploymentSummary != nil || d.FailureReason != nil || d.LastDeploymentConfig == nil || e.split.Load() != nil {
		t.Errorf("after the deployment: %+v", d)
	}
	for range 10 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("lin"), Body: []byte("x")})
		if err != nil || string(out.Body) != "x-v2" {
			t.Fatalf("after the deployment: %v %v", out, err)
		}
	}
}

func equalFloats(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-6 || d < -1e-6 {
			return false
		}
	}
	return true
}

// TestGuardrailsAllAtOnceBakesAndWaits: ALL_AT_ONCE shifts every call,
// bakes (PendingDeploymentSummary says Baking; an alarm set to ALARM by
// SetAlarmState after that would roll back, not here), then keeps the old
// fleet for TerminationWaitInSeconds before it goes.
func TestGuardrailsAllAtOnceBakesAndWaits(t *testing.T) {
	h := guardHarness(t, 600)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "all", "-v1", 1)
	newConfig(t, sm, "all-v2", "-v2", 1)
	dc := blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 600, nil) // 1 s
	dc.BlueGreenUpdatePolicy.TerminationWaitInSeconds = aws.Int32(600)   // 1 s
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("all"), EndpointConfigName: aws.String("all-v2"),
		DeploymentConfig: dc}); err != nil {
		t.Fatal(err)
	}
	e := h.srv.reg.get("all")
	var d *sagemaker.DescribeEndpointOutput
	waitFor(t, 10*time.Second, "baking", func() bool {
		d = describeEP(t, sm, "all")
		p := d.PendingDeploymentSummary
		return p != nil && len(p.ProductionVariants) == 1 && len(p.ProductionVariants[0].VariantStatus) == 1 &&
			p.ProductionVariants[0].VariantStatus[0].Status == smtypes.VariantStatusBaking
	})
	if d.EndpointStatus != smtypes.EndpointStatusUpdating || e.split.Load().Share() != 1 {
		t.Errorf("while baking: status %s, share %v", d.EndpointStatus, e.split.Load().Share())
	}
	out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("all"), Body: []byte("x")})
	if err != nil || string(out.Body) != "x-v2" {
		t.Fatalf("while baking: %v %v", out, err)
	}
	waitFor(t, 10*time.Second, "InService on the new configuration", func() bool {
		return e.Status() == spec.StatusInService && e.record().ConfigName == "all-v2"
	})
	inService := time.Now()
	waitFor(t, 10*time.Second, "the old fleet's removal", func() bool { return h.backend.closed.Load() == 1 })
	if waited := time.Since(inService); waited < 700*time.Millisecond {
		t.Errorf("the old fleet went %v after the deployment completed, want TerminationWaitInSeconds (1 s here)", waited)
	}
}

// TestGuardrailsRetainAndDescribe: CreateEndpoint's DeploymentConfig is
// shown as LastDeploymentConfig; an UpdateEndpoint with
// RetainDeploymentConfig runs under it (it bakes); one without
// DeploymentConfig and without RetainDeploymentConfig does not.
func TestGuardrailsRetainAndDescribe(t *testing.T) {
	h := guardHarness(t, 600)
	sm := h.sm()
	ctx := context.Background()
	newConfig(t, sm, "ret-v1", "-v1", 1)
	newConfig(t, sm, "ret-v2", "-v2", 1)
	newConfig(t, sm, "ret-v3", "-v3", 1)
	dc := blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 300, nil) // 0.5 s
	if _, err := sm.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("ret"), EndpointConfigName: aws.String("ret-v1"),
		DeploymentConfig: dc}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, sm, "ret", smtypes.EndpointStatusInService)
	d := describeEP(t, sm, "ret")
	if l := d.LastDeploymentConfig; l == nil || aws.ToInt32(l.BlueGreenUpdatePolicy.TrafficRoutingConfiguration.WaitIntervalInSeconds) != 300 {
		t.Fatalf("LastDeploymentConfig after CreateEndpoint = %+v", l)
	}
	e := h.srv.reg.get("ret")
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("ret"), EndpointConfigName: aws.String("ret-v2"),
		RetainDeploymentConfig: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	baked := false
	waitFor(t, 10*time.Second, "the retained deployment's end", func() bool {
		if r := e.record(); r.Deploying != nil && r.Deploying.Status == "Baking" {
			baked = true
		}
		return e.Status() == spec.StatusInService && e.record().ConfigName == "ret-v2"
	})
	if !baked {
		t.Error("the update with RetainDeploymentConfig did not bake")
	}
	// Without either, a plain update: no guardrails, the last config kept.
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("ret"), EndpointConfigName: aws.String("ret-v3")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the plain update's end", func() bool {
		if e.record().Deploying != nil {
			t.Fatal("an update without DeploymentConfig ran under guardrails")
		}
		return e.Status() == spec.StatusInService && e.record().ConfigName == "ret-v3"
	})
	if d := describeEP(t, sm, "ret"); d.LastDeploymentConfig == nil {
		t.Error("LastDeploymentConfig went after a plain update")
	}
}

// TestGuardrailsRefusals: hostile and impossible DeploymentConfigs are
// refused with ValidationException before anything changes.
func TestGuardrailsRefusals(t *testing.T) {
	h := newHarness(t, Config{}) // no CloudWatch
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "ref", "-v1", 2)
	newConfig(t, sm, "ref-v2", "-v2", 2)
	huge := blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 3601, nil)
	huge.BlueGreenUpdatePolicy.TerminationWaitInSeconds = aws.Int32(-1)
	canary := blueGreen(smtypes.TrafficRoutingConfigTypeCanary, 10, instancesOf(2))
	cases := []struct {
		dc   *smtypes.DeploymentConfig
		want string
	}{
		{huge, "2 validation errors detected: Value '3601' at 'deploymentConfig.blueGreenUpdatePolicy.trafficRoutingConfiguration.waitIntervalInSeconds' failed to satisfy constraint: Member must have value less than or equal to 3600; Value '-1' at 'deploymentConfig.blueGreenUpdatePolicy.terminationWaitInSeconds' failed to satisfy constraint: Member must have value greater than or equal to 0"},
		{canary, "CanarySize (2 instances) must be at most 50% of the new fleet's capacity (2 instances)."},
		{blueGreen(smtypes.TrafficRoutingConfigTypeCanary, 10, nil), "CanarySize is required when the TrafficRoutingConfiguration Type is CANARY."},
		{blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 10, nil, "any"), "there is nothing to watch"},
		{&smtypes.DeploymentConfig{}, "DeploymentConfig needs a BlueGreenUpdatePolicy or a RollingUpdatePolicy."},
	}
	for _, c := range cases {
		_, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("ref"), EndpointConfigName: aws.String("ref-v2"), DeploymentConfig: c.dc})
		if err == nil {
			t.Fatalf("%+v accepted", c.dc)
		}
		code, msg := apiCode(t, err)
		if code != "ValidationException" || !strings.Contains(msg, c.want) {
			t.Errorf("refusal %s %q, want ValidationException with %q", code, msg, c.want)
		}
	}
	if d := describeEP(t, sm, "ref"); d.EndpointStatus != smtypes.EndpointStatusInService || d.LastDeploymentConfig != nil {
		t.Errorf("after the refusals: %s, last %+v", d.EndpointStatus, d.LastDeploymentConfig)
	}
	// With CloudWatch, an alarm that does not exist.
	h2 := guardHarness(t, 1)
	sm2 := h2.sm()
	createAll(t, sm2, "ref", "-v1", 1)
	newConfig(t, sm2, "ref-v2", "-v2", 1)
	_, err := sm2.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("ref"), EndpointConfigName: aws.String("ref-v2"),
		DeploymentConfig: blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 10, nil, "nope")})
	if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, "[nope]") {
		t.Errorf("missing alarm: %s %q", code, msg)
	}
}

// TestGuardrailsRestartMidDeployment: mce stops while a deployment bakes;
// the next start brings the endpoint back on its old configuration, with
// a FailureReason saying why, the new fleet removed and nothing pending.
func TestGuardrailsRestartMidDeployment(t *testing.T) {
	h := guardHarness(t, 60)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "rs", "-v1", 1)
	newConfig(t, sm, "rs-v2", "-v2", 1)
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("rs"), EndpointConfigName: aws.String("rs-v2"),
		DeploymentConfig: blueGreen(smtypes.TrafficRoutingConfigTypeAllAtOnce, 3600, nil)}); err != nil {
		t.Fatal(err)
	}
	e := h.srv.reg.get("rs")
	waitFor(t, 10*time.Second, "baking", func() bool { r := e.record(); return r.Deploying != nil && r.Deploying.Status == "Baking" })
	st := h.srv.store
	closed := h.backend.closed.Load()
	h.srv.Close(ctx) // as mce stops: both fleets' containers go
	if got := h.backend.closed.Load() - closed; got != 2 {
		t.Errorf("mce's stop closed %d fleets, want both", got)
	}
	b := &fakeBackend{t: t}
	s := New(Config{Backend: b, Store: st, Logger: zerolog.Nop()})
	defer s.Close(ctx)
	if err := s.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	ctxw, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := s.WaitEndpoint(ctxw, "rs"); err != nil {
		t.Fatal(err)
	}
	r := s.reg.get("rs").record()
	if r.Status != spec.StatusInService || r.ConfigName != "rs-config" || r.Deploying != nil || r.Pending != "" ||
		!strings.Contains(r.FailureReason, "rolled back") || !strings.Contains(r.FailureReason, "mce restarted") {
		t.Errorf("after the restart: %s on %s, reason %q, deploying %+v", r.Status, r.ConfigName, r.FailureReason, r.Deploying)
	}
	if len(r.Plan.Variants) != 1 || r.Plan.Variants[0].Containers[0].Image != "-v1" || b.launches.Load() != 1 {
		t.Errorf("after the restart: plan %+v, %d launches (want the old fleet's only)", r.Plan, b.launches.Load())
	}
}

func rolling(batch, rollbackBatch *smtypes.CapacitySize, wait int32, alarms ...string) *smtypes.DeploymentConfig {
	d := &smtypes.DeploymentConfig{RollingUpdatePolicy: &smtypes.RollingUpdatePolicy{MaximumBatchSize: batch,
		WaitIntervalInSeconds: aws.Int32(wait), RollbackMaximumBatchSize: rollbackBatch}}
	if len(alarms) > 0 {
		d.AutoRollbackConfiguration = &smtypes.AutoRollbackConfig{}
		for _, a := range alarms {
			d.AutoRollbackConfiguration.Alarms = append(d.AutoRollbackConfiguration.Alarms, smtypes.Alarm{AlarmName: aws.String(a)})
		}
	}
	return d
}

// blueCount is how many instances the endpoint's own route (the old fleet
// during a deployment) has in variant AllTraffic.
func blueCount(e *Endpoint) int {
	if r := e.route.Load(); r != nil && r.Variant("AllTraffic") != nil {
		return len(r.Variant("AllTraffic").Instances())
	}
	return -1
}

// TestGuardrailsRollingCompletes: a rolling update of 1 instance at a time
// from 4 to 4 brings the new fleet up one instance a batch while the old
// one shrinks (never more than 5 instances running), the share following
// capacity; no call fails; the old fleet goes at the end.
func TestGuardrailsRollingCompletes(t *testing.T) {
	h := guardHarness(t, 600)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "roll", "-v1", 4)
	newConfig(t, sm, "roll-v2", "-v2", 4)
	e := h.srv.reg.get("roll")
	tr := startTraffic(h, "roll")
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("roll"), EndpointConfigName: aws.String("roll-v2"),
		DeploymentConfig: rolling(instancesOf(1), nil, 120)}); err != nil {
		t.Fatal(err)
	}
	var shares []float64
	most := 0
	waitFor(t, 20*time.Second, "the end of the rolling update", func() bool {
		if sp := e.split.Load(); sp != nil {
			g := len(sp.Green().Variant("AllTraffic").Instances())
			if b := blueCount(e); g+b > most {
				most = g + b
			}
			if f := sp.Share(); f > 0 && (len(shares) == 0 || shares[len(shares)-1] != f) {
				shares = append(shares, f)
			}
		}
		return e.Status() == spec.StatusInService && e.record().ConfigName == "roll-v2"
	})
	waitFor(t, 5*time.Second, "the old fleet's removal", func() bool { return h.backend.closed.Load() == 1 })
	bodies, broken, failed := tr.end()
	if len(failed) > 0 || broken > 0 {
		t.Errorf("%d calls failed, first: %v", len(failed), failed)
	}
	if bodies["x-v1"] == 0 || bodies["x-v2"] == 0 {
		t.Errorf("answers %v: want both fleets to have answered", bodies)
	}
	if want := []float64{0.2, 0.4, 0.6, 1}; !equalFloats(shares, want) {
		t.Errorf("shares observed %v, want %v", shares, want)
	}
	if most > 5 {
		t.Errorf("%d instances ran at once, want at most 5 (4 and a batch)", most)
	}
	if n := blueCount(e); n != 4 {
		t.Errorf("the new fleet has %d instances, want 4", n)
	}
}

// TestGuardrailsRollingRollsBack: an alarm set to ALARM (SetAlarmState)
// once the rolling update has shrunk the old fleet rolls it back: the old
// fleet is brought back to 4 instances in batches of
// RollbackMaximumBatchSize, the new one goes, and no call fails.
func TestGuardrailsRollingRollsBack(t *testing.T) {
	h := guardHarness(t, 60)
	sm := h.sm()
	ctx := context.Background()
	createAll(t, sm, "rollb", "-v1", 4)
	newConfig(t, sm, "rollb-v2", "-v2", 4)
	cwc := h.cloudWatch(nil)
	if _, err := cwc.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{
		AlarmName: aws.String("rollb-latency"), Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("elsewhere")}, {Name: aws.String("VariantName"), Value: aws.String("AllTraffic")}},
		Statistic:  cwtypes.StatisticAverage, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(1e9),
		ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold, TreatMissingData: aws.String("notBreaching"),
	}); err != nil {
		t.Fatal(err)
	}
	e := h.srv.reg.get("rollb")
	stopStatuses := statuses(e)
	tr := startTraffic(h, "rollb")
	if _, err := sm.UpdateEndpoint(ctx, &sagemaker.UpdateEndpointInput{EndpointName: aws.String("rollb"), EndpointConfigName: aws.String("rollb-v2"),
		DeploymentConfig: rolling(instancesOf(1), instancesOf(1), 120, "rollb-latency")}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the old fleet to shrink", func() bool { return e.split.Load() != nil && blueCount(e) == 3 })
	if _, err := cwc.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("rollb-latency"),
		StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("test")}); err != nil {
		t.Fatal(err)
	}
	var d *sagemaker.DescribeEndpointOutput
	waitFor(t, 20*time.Second, "the rollback", func() bool {
		d = describeEP(t, sm, "rollb")
		return d.EndpointStatus == smtypes.EndpointStatusInService && aws.ToString(d.FailureReason) != ""
	})
	time.Sleep(100 * time.Millisecond)
	bodies, broken, failed := tr.end()
	seen := stopStatuses()
	if len(failed) > 0 || broken > 0 {
		t.Errorf("%d calls failed, first: %v", len(failed), failed)
	}
	if bodies["x-v1"] == 0 || bodies["x-v2"] == 0 {
		t.Errorf("answers %v: want both fleets to have answered", bodies)
	}
	if want := []spec.Status{spec.StatusInService, spec.StatusUpdating, spec.StatusRollingBack, spec.StatusInService}; !equalStatuses(seen, want) {
		t.Errorf("statuses %v, want %v", seen, want)
	}
	if n := blueCount(e); n != 4 || aws.ToString(d.EndpointConfigName) != "rollb-config" || e.split.Load() != nil || h.backend.closed.Load() != 1 {
		t.Errorf("after the rollback: %d instances, config %s, split %v, %d fleets closed", n, aws.ToString(d.EndpointConfigName), e.split.Load(), h.backend.closed.Load())
	}
	if !strings.Contains(aws.ToString(d.FailureReason), "rollb-latency") {
		t.Errorf("FailureReason %q", aws.ToString(d.FailureReason))
	}
	for range 10 {
		out, err := h.invoke(&sagemakerruntime.InvokeEndpointInput{EndpointName: aws.String("rollb"), Body: []byte("x")})
		if err != nil || string(out.Body) != "x-v1" {
			t.Fatalf("after the rollback: %v %v", out, err)
		}
	}
}

// TestGuardrailsComponentBatch: UpdateInferenceComponent's
// RollingUpdatePolicy.MaximumBatchSize sets how many copies a batch
// replaces (2 of 4 here, 50% too); AutoRollbackConfiguration without
// CloudWatch, and sizes of the wrong type, are refused.
func TestGuardrailsComponentBatch(t *testing.T) {
	h, b := newICHarness(t, nil)
	b.delay = 30 * time.Millisecond
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "icb", "ml.m5.4xlarge", 1)
	sp := func(image string) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image)},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(1), MinMemoryRequiredInMb: aws.Int32(256)}}
	}
	if err := createIC(ctx, sm, "ic", "icb", sp("-v1"), 4); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "ic")
	policy := func(typ smtypes.InferenceComponentCapacitySizeType, v int32) *smtypes.InferenceComponentDeploymentConfig {
		return &smtypes.InferenceComponentDeploymentConfig{RollingUpdatePolicy: &smtypes.InferenceComponentRollingUpdatePolicy{
			MaximumBatchSize:      &smtypes.InferenceComponentCapacitySize{Type: typ, Value: aws.Int32(v)},
			WaitIntervalInSeconds: aws.Int32(0)}}
	}
	for i, dc := range []*smtypes.InferenceComponentDeploymentConfig{policy(smtypes.InferenceComponentCapacitySizeTypeCopyCount, 2), policy(smtypes.InferenceComponentCapacitySizeTypeCapacityPercent, 50)} {
		if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("ic"),
			Specification: sp(fmt.Sprintf("-v%d", i+2)), DeploymentConfig: dc}); err != nil {
			t.Fatal(err)
		}
		batch := 0
		waitFor(t, 15*time.Second, "the component's update", func() bool {
			r := h.srv.ics.Get("ic").Record()
			if r.Rollout != nil {
				batch = r.Rollout.Batch
			}
			return r.Rollout == nil && waitICStatus(t, sm, "ic") == smtypes.InferenceComponentStatusInService
		})
		if batch != 2 {
			t.Errorf("%s %d: batches of %d copies, want 2", dc.RollingUpdatePolicy.MaximumBatchSize.Type, *dc.RollingUpdatePolicy.MaximumBatchSize.Value, batch)
		}
	}
	withAlarms := policy(smtypes.InferenceComponentCapacitySizeTypeCopyCount, 1)
	withAlarms.AutoRollbackConfiguration = &smtypes.AutoRollbackConfig{Alarms: []smtypes.Alarm{{AlarmName: aws.String("a")}}}
	for dc, want := range map[*smtypes.InferenceComponentDeploymentConfig]string{
		withAlarms:                  "this mce serves no CloudWatch",
		policy("INSTANCE_COUNT", 1): "Value 'INSTANCE_COUNT' at 'deploymentConfig.rollingUpdatePolicy.maximumBatchSize.type' failed to satisfy constraint: Member must satisfy enum value set: [COPY_COUNT, CAPACITY_PERCENT]",
	} {
		_, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("ic"),
			Specification: sp("-v9"), DeploymentConfig: dc})
		if code, msg := apiCode(t, err); code != "ValidationException" || !strings.Contains(msg, want) {
			t.Errorf("refusal %s %q, want %q", code, msg, want)
		}
	}
}

// TestGuardrailsTargetVariantStaysWhereItIs: during a deployment, a call
// for a TargetVariant only the old fleet has stays on the old fleet; one
// the new fleet has follows the split.
func TestGuardrailsTargetVariantStaysWhereItIs(t *testing.T) {
	blue := pipeline.NewRoute("ep", pipeline.Serial, []*pipeline.Variant{pipeline.NewVariant("Old", 1, nil), pipeline.NewVariant("Both", 1, nil)})
	green := pipeline.NewRoute("ep", pipeline.Serial, []*pipeline.Variant{pipeline.NewVariant("New", 1, nil), pipeline.NewVariant("Both", 1, nil)})
	sp := deploy.NewSplit(green)
	sp.Set(1)
	for target, want := range map[string]*pipeline.Route{"": green, "Old": blue, "Both": green, "New": green, "Neither": green} {
		if got := pickFleet(sp, blue, target); got != want {
			t.Errorf("TargetVariant %q went to the other fleet", target)
		}
	}
}

// TestGuardrailsComponentAlarmRollsBack: an inference component's rolling
// update bakes WaitIntervalInSeconds after each batch with its alarms
// watched; an alarm in ALARM (SetAlarmState) rolls it back to the previous
// specification, with a FailureReason naming the alarm, and no call fails.
func TestGuardrailsComponentAlarmRollsBack(t *testing.T) {
	svc, err := cw.Open(cw.Options{Dir: filepath.Join(t.TempDir(), "cloudwatch"), AlarmInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { svc.Close() })
	clock, err := awsclock.New(60)
	if err != nil {
		t.Fatal(err)
	}
	h, b := newICHarnessWith(t, nil, Config{CloudWatch: svc, Clock: clock})
	b.delay = 20 * time.Millisecond
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "ica", "ml.m5.4xlarge", 1)
	sp := func(image string) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image)},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(1), MinMemoryRequiredInMb: aws.Int32(256)}}
	}
	if err := createIC(ctx, sm, "ic", "ica", sp("-v1"), 3); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "ic")
	cwc := h.cloudWatch(nil)
	if _, err := cwc.PutMetricAlarm(ctx, &cloudwatch.PutMetricAlarmInput{AlarmName: aws.String("ic-guard"),
		Namespace: aws.String("AWS/SageMaker"), MetricName: aws.String("ModelLatency"),
		Dimensions: []cwtypes.Dimension{{Name: aws.String("EndpointName"), Value: aws.String("nowhere")}},
		Statistic:  cwtypes.StatisticAverage, Period: aws.Int32(60), EvaluationPeriods: aws.Int32(1), Threshold: aws.Float64(1e12),
		ComparisonOperator: cwtypes.ComparisonOperatorGreaterThanThreshold, TreatMissingData: aws.String("notBreaching")}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var failed []error
	answers := map[string]int{}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			out, err := h.invokeIC("ica", "ic")
			mu.Lock()
			if err != nil {
				failed = append(failed, err)
			} else {
				answers[out]++
			}
			mu.Unlock()
		}
	}()
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("ic"),
		Specification: sp("-v2"), DeploymentConfig: &smtypes.InferenceComponentDeploymentConfig{
			RollingUpdatePolicy: &smtypes.InferenceComponentRollingUpdatePolicy{
				MaximumBatchSize:      &smtypes.InferenceComponentCapacitySize{Type: smtypes.InferenceComponentCapacitySizeTypeCopyCount, Value: aws.Int32(1)},
				WaitIntervalInSeconds: aws.Int32(3600)}, // a minute here: the alarm ends it
			AutoRollbackConfiguration: &smtypes.AutoRollbackConfig{Alarms: []smtypes.Alarm{{AlarmName: aws.String("ic-guard")}}}}}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 20*time.Second, "the first batch to serve", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return answers["x-v2"] > 0
	})
	if _, err := cwc.SetAlarmState(ctx, &cloudwatch.SetAlarmStateInput{AlarmName: aws.String("ic-guard"),
		StateValue: cwtypes.StateValueAlarm, StateReason: aws.String("test")}); err != nil {
		t.Fatal(err)
	}
	var d *sagemaker.DescribeInferenceComponentOutput
	waitFor(t, 20*time.Second, "the rollback", func() bool {
		d = waitIC(t, sm, "ic")
		return d.InferenceComponentStatus == smtypes.InferenceComponentStatusInService
	})
	time.Sleep(50 * time.Millisecond)
	close(stop)
	<-done
	if len(failed) > 0 {
		t.Errorf("%d calls failed, first: %v", len(failed), failed[0])
	}
	if !strings.Contains(aws.ToString(d.FailureReason), "ic-guard") || aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage) != "-v1" ||
		aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 {
		t.Errorf("after the rollback: %q, image %s, %d copies", aws.ToString(d.FailureReason), aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage), aws.ToInt32(d.RuntimeConfig.CurrentCopyCount))
	}
	if out, err := h.invokeIC("ica", "ic"); err != nil || out != "x-v1" {
		t.Errorf("after the rollback: %q %v", out, err)
	}
}

// TestGuardrailsComponentTimeoutRollsBackInBatches: an inference
// component's rolling update still rolling after its
// MaximumExecutionTimeoutInSeconds is rolled back, and the rollback brings
// the old copies back RollbackMaximumBatchSize at a time (one here; the
// record's Rollout says so while it runs), no call failing meanwhile.
func TestGuardrailsComponentTimeoutRollsBackInBatches(t *testing.T) {
	clock, err := awsclock.New(600) // a bake of 600 s lasts a second
	if err != nil {
		t.Fatal(err)
	}
	h, b := newICHarnessWith(t, nil, Config{Clock: clock})
	b.delay = 150 * time.Millisecond // each batch of the rollback lasts long enough to be seen
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "ict", "ml.m5.4xlarge", 1)
	sp := func(image string) *smtypes.InferenceComponentSpecification {
		return &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String(image)},
			ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{NumberOfCpuCoresRequired: aws.Float32(1), MinMemoryRequiredInMb: aws.Int32(256)}}
	}
	if err := createIC(ctx, sm, "ict", "ict", sp("-v1"), 3); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "ict")
	traffic := testenv.StartTraffic(t, 2, func() error {
		_, err := h.invokeIC("ict", "ict")
		return err
	})
	if _, err := sm.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("ict"),
		Specification: sp("-v2"), DeploymentConfig: &smtypes.InferenceComponentDeploymentConfig{
			RollingUpdatePolicy: &smtypes.InferenceComponentRollingUpdatePolicy{
				MaximumBatchSize:                 &smtypes.InferenceComponentCapacitySize{Type: smtypes.InferenceComponentCapacitySizeTypeCopyCount, Value: aws.Int32(1)},
				WaitIntervalInSeconds:            aws.Int32(600),
				MaximumExecutionTimeoutInSeconds: aws.Int32(900), // ends during the second batch's bake
				RollbackMaximumBatchSize:         &smtypes.InferenceComponentCapacitySize{Type: smtypes.InferenceComponentCapacitySizeTypeCopyCount, Value: aws.Int32(1)}}}}); err != nil {
		t.Fatal(err)
	}
	var sawBatch bool
	var d *sagemaker.DescribeInferenceComponentOutput
	waitFor(t, 30*time.Second, "the update rolled back", func() bool {
		if ro := h.srv.ics.Get("ict").Record().Rollout; ro != nil && ro.RollingBack && ro.RollbackBatch == 1 {
			sawBatch = true
		}
		var err error
		if d, err = sm.DescribeInferenceComponent(ctx, &sagemaker.DescribeInferenceComponentInput{InferenceComponentName: aws.String("ict")}); err != nil {
			t.Fatal(err)
		}
		return d.InferenceComponentStatus == smtypes.InferenceComponentStatusInService
	})
	traffic.Stop()
	if traffic.Failed() > 0 {
		t.Errorf("%v", traffic)
	}
	if !strings.Contains(aws.ToString(d.FailureReason), "MaximumExecutionTimeoutInSeconds (900)") ||
		aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage) != "-v1" || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 {
		t.Errorf("after the timeout: %q, image %s, %d copies", aws.ToString(d.FailureReason),
			aws.ToString(d.Specification.Container.DeployedImage.SpecifiedImage), aws.ToInt32(d.RuntimeConfig.CurrentCopyCount))
	}
	if !sawBatch {
		t.Error("the rollback's record never held RollbackMaximumBatchSize 1")
	}
	if out, err := h.invokeIC("ict", "ict"); err != nil || out != "x-v1" {
		t.Errorf("after the rollback: %q %v", out, err)
	}
}
