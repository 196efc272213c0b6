package host

import (
	"context"
	"fmt"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/store"
)

// adoptingBackend is a capBackend whose Adopt always succeeds (a fresh
// fake), as Docker's does for a copy whose container still runs.
type adoptingBackend struct{ *capBackend }

func (b adoptingBackend) Adopt(ctx context.Context, p containers.EndpointPlan, gen int) (containers.Launched, error) {
	return b.capBackend.Launch(ctx, p, gen)
}

// TestCopyOfAnotherEngineAfterRestart: a copy recorded with instance -1
// (the Kubernetes engine writes such records) is placed again on an engine
// that places copies itself; every start of the Docker engine panicked on
// it ("index out of range [-1]" in reconcileCopies).
func TestCopyOfAnotherEngineAfterRestart(t *testing.T) {
	st := openStore(t)
	h1, _ := newICHarness(t, st)
	sm := h1.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "mixed", "ml.m5.xlarge", 1)
	if err := createIC(ctx, sm, "k", "mixed", copySpec("-k"), 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "k")
	h1.http.Close()
	h1.srv.Close(ctx)
	var rec components.Record
	if err := st.Get(store.InferenceComponents, "k", &rec); err != nil {
		t.Fatal(err)
	}
	rec.Copies = []components.CopyRecord{{ID: 7, Instance: -1, SpecVersion: rec.SpecVersion}, {ID: 8, Instance: 5, SpecVersion: rec.SpecVersion}}
	rec.Desired, rec.LastCopyID = 3, 8
	if err := st.Put(store.InferenceComponents, "k", rec); err != nil {
		t.Fatal(err)
	}

	h2 := newICHarnessOn(t, st, Config{}, adoptingBackend{&capBackend{fakeBackend: &fakeBackend{t: t}}}, nil)
	if err := h2.srv.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	d := waitIC(t, h2.sm(), "k")
	if d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService || aws.ToInt32(d.RuntimeConfig.CurrentCopyCount) != 3 {
		t.Fatalf("k: %s %+v %s", d.InferenceComponentStatus, d.RuntimeConfig, aws.ToString(d.FailureReason))
	}
	var got []string
	for _, cp := range h2.srv.ics.Get("k").Record().Copies {
		got = append(got, fmt.Sprintf("%d@%d", cp.ID, cp.Instance))
	}
	if want := []string{"9@0", "10@0", "11@0"}; !slices.Equal(got, want) {
		t.Errorf("copies %+v, want %+v (new numbers, on the variant's one instance)", got, want)
	}
	if got, err := h2.invokeIC("mixed", "k"); err != nil || got != "x-k" {
		t.Errorf("invoke = %q, %v", got, err)
	}
}
