package host

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/spec"
	"github.com/mce-run/mce/host/store"
)

// TestPlacementCostsNothingPerInstance: placing copies on a variant of
// 2147483647 instances holds what the copies need, not an entry per
// instance (mce grew by gigabytes and died of it), and SPREAD and BINPACK
// still choose as on a small variant.
func TestPlacementCostsNothingPerInstance(t *testing.T) {
	const instances = 1<<31 - 1
	s := New(Config{Backend: &capBackend{fakeBackend: &fakeBackend{t: t}}, Store: openStore(t), Logger: zerolog.Nop()})
	t.Cleanup(func() { s.Close(context.Background()) })
	sp := spec.InferenceComponentSpecification{ComputeResourceRequirements: &spec.InferenceComponentComputeRequirements{
		NumberOfCpuCoresRequired: new(2.0), MinMemoryRequiredInMb: new(int32(1024))}}
	s.ics.add(&component{name: "held", endpoint: "wide", rec: ComponentRecord{Name: "held", EndpointName: "wide", VariantName: "AllTraffic",
		Spec: sp, SpecVersion: 1, Copies: []CopyRecord{{ID: 1, Instance: 0, SpecVersion: 1}, {ID: 2, Instance: instances - 1, SpecVersion: 1},
			{ID: 3, Instance: -1, SpecVersion: 1}, {ID: 4, Instance: instances, SpecVersion: 1}}}})
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	for _, cp := range s.ics.get("held").record().Copies {
		p.holds(cp.Instance)
	}
	var spread []int
	for range 1000 {
		inst, _, short := p.take(needsOf(sp), false)
		if inst < 0 {
			t.Fatalf("no room on %d instances: %s", instances, short)
		}
		spread = append(spread, inst)
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 4<<20 {
		t.Errorf("placing 1000 copies on %d instances allocated %d MiB", instances, grew>>20)
	}
	// Instances 0 and the last hold a copy each (of 8 cores, 2 taken): the
	// empty ones come first, by number.
	if !slices.Equal(spread[:3], []int{1, 2, 3}) || spread[999] != 1000 {
		t.Errorf("SPREAD placed on %v … %d, want 1 2 3 … 1000", spread[:3], spread[999])
	}
	bp := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	var packed []int
	for range 5 {
		inst, _, _ := bp.take(needsOf(sp), true)
		packed = append(packed, inst)
	}
	// Instance 0 has 6 cores left (3 copies), then instance 1 takes 4.
	if !slices.Equal(packed, []int{0, 0, 0, 1, 1}) {
		t.Errorf("BINPACK placed on %v, want [0 0 0 1 1]", packed)
	}
	// What no instance has is named from the widest one, an empty one.
	small := s.newPlacement(context.Background(), "wide", "AllTraffic", instances, "ml.m5.xlarge")
	big := needs{cpus: 9}
	if _, _, short := small.take(big, false); short != "CPU cores (a copy needs 9, an instance has at most 8 free of 8)" {
		t.Errorf("shortage %q", short)
	}
}

// poisonEndpoint rewrites a stored endpoint and its configuration to
// instances instances, as an mce that accepted any count left them.
func poisonEndpoint(t *testing.T, st *store.Store, name string, instances int) {
	t.Helper()
	var rec EndpointRecord
	if err := st.Get(store.Endpoints, name, &rec); err != nil {
		t.Fatal(err)
	}
	rec.Plan.Variants[0].InstanceCount = instances
	if err := st.Put(store.Endpoints, name, rec); err != nil {
		t.Fatal(err)
	}
	var cfg ConfigRecord
	if err := st.Get(store.EndpointConfigs, rec.ConfigName, &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Input.ProductionVariants[0].InitialInstanceCount = new(int32(instances))
	if err := st.Put(store.EndpointConfigs, rec.ConfigName, cfg); err != nil {
		t.Fatal(err)
	}
}

// TestPoisonedStateAfterRestart: mce restarted on a state an older mce
// left (a components endpoint of 2147483647 instances, a component being
// created on it; a model endpoint of as many) stays up: that component is
// Failed with the reason, the model endpoint Failed and never launched,
// and the other endpoints and components serve. It died of out of memory
// on every start (relaunchComponents → reconcileCopies).
func TestPoisonedStateAfterRestart(t *testing.T) {
	st := openStore(t)
	h1, _ := newICHarness(t, st)
	sm := h1.sm()
	ctx := context.Background()
	createAll(t, sm, "steady", "-steady", 1)
	createAll(t, sm, "wide", "-wide", 1)
	createICEndpoint(t, sm, "shared", "ml.m5.xlarge", 1)
	createICEndpoint(t, sm, "poisoned", "ml.m5.xlarge", 1)
	if err := createIC(ctx, sm, "good", "shared", copySpec("-good"), 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "good")
	h1.http.Close()
	h1.srv.Close(ctx)

	poisonEndpoint(t, st, "poisoned", 1<<31-1)
	poisonEndpoint(t, st, "wide", 1<<31-1)
	var bomb ComponentRecord
	if err := st.Get(store.InferenceComponents, "good", &bomb); err != nil {
		t.Fatal(err)
	}
	bomb.Name, bomb.ARN, bomb.EndpointName = "bomb", strings.Replace(bomb.ARN, "/good", "/bomb", 1), "poisoned"
	bomb.Status, bomb.Copies, bomb.LastCopyID, bomb.Desired = spec.StatusCreating, nil, 0, 2
	if err := st.Put(store.InferenceComponents, "bomb", bomb); err != nil {
		t.Fatal(err)
	}

	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	b := &capBackend{fakeBackend: &fakeBackend{t: t}}
	h2 := newICHarnessOn(t, st, Config{}, b, nil)
	if err := h2.srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	sm2 := h2.sm()
	d := waitIC(t, sm2, "bomb")
	want := "0 of 2 copies of the inference component are running. Variant AllTraffic of the endpoint has 2147483647 instances in its recorded configuration; mce runs 1 to 100 instances per variant. Update the endpoint to a configuration within that limit, then update the inference component."
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusFailed || aws.ToString(d.FailureReason) != want {
		t.Fatalf("bomb: %s %q", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if d := waitIC(t, sm2, "good"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("good: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	if err := h2.srv.WaitEndpoint(ctx, "steady"); err != nil {
		t.Fatal(err)
	}
	err := h2.srv.WaitEndpoint(ctx, "wide")
	if err == nil || !strings.Contains(err.Error(), "Variant AllTraffic has 2147483647 instances in its recorded configuration; mce runs 1 to 100 instances per variant.") {
		t.Fatalf("wide: %v", err)
	}
	b.mu.Lock()
	for gen, p := range b.plans {
		if p.Name == "wide" {
			t.Errorf("wide was launched again (generation %d)", gen)
		}
	}
	b.mu.Unlock()
	for ep, ic := range map[string]string{"steady": "", "shared": "good"} {
		if got, err := h2.invokeIC(ep, ic); err != nil || !strings.HasPrefix(got, "x-") {
			t.Errorf("invoke %s %s after the restart = %q, %v", ep, ic, got, err)
		}
	}
	runtime.ReadMemStats(&after)
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 256<<20 {
		t.Errorf("the restart allocated %d MiB", grew>>20)
	}
	// The poisoned configuration can no longer make an endpoint.
	_, err = sm2.CreateEndpoint(ctx, &sagemaker.CreateEndpointInput{EndpointName: aws.String("again"), EndpointConfigName: aws.String("poisoned-config")})
	wantMessage(t, err, "ValidationException", "1 validation error detected: Value '2147483647' at 'productionVariants.1.member.initialInstanceCount' failed to satisfy constraint: Member must have value less than or equal to 100")
}
