package host

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/components"
)

// adapterFolders is capBackend with folders of adapters that stage
// nothing (the fake containers answer the adapter API's calls with 200).
type adapterFolders struct{ *capBackend }

func (adapterFolders) StageAdapter(_ context.Context, _, _, name, _, _ string) (string, error) {
	return containers.AdapterMount + "/" + strings.ToLower(name), nil
}

func (adapterFolders) RemoveAdapter(string, string, string) error { return nil }

var _ containers.AdapterStore = adapterFolders{}

func newAdapterHarness(t *testing.T, cfg Config) *harness {
	b := adapterFolders{&capBackend{fakeBackend: &fakeBackend{t: t}}}
	return newHarnessOn(t, b, b.fakeBackend, cfg)
}

func createAdapter(ctx context.Context, sm *sagemaker.Client, name, endpoint, base, artifact string) error {
	_, err := sm.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(name),
		EndpointName: aws.String(endpoint), Specification: adapterSpec(base, artifact)})
	return err
}

func adapterSpec(base, artifact string) *smtypes.InferenceComponentSpecification {
	return &smtypes.InferenceComponentSpecification{BaseInferenceComponentName: aws.String(base),
		Container: &smtypes.InferenceComponentContainerSpecification{ArtifactUrl: aws.String(artifact)}}
}

// TestAdapterAuthorizedOnItsBase: creating, updating and deleting an
// adapter needs the caller's action on its base too (the base's ARN, the
// base's tags). Principals denied the base, by ARN or by tag, used to
// attach adapters to it (loaded into its copies, and holding it: its owner
// could not delete it), and to update or delete the owner's adapters.
func TestAdapterAuthorizedOnItsBase(t *testing.T) {
	a := devAuthz(t,
		`{Sid: BaseByName, Effect: Deny, Action: "sagemaker:*", Resource: "arn:aws:sagemaker:*:*:inference-component/theirs-*"}`,
		`{Sid: BaseByTag, Effect: Deny, Action: "sagemaker:*", Resource: "*", Condition: {StringEquals: {"aws:ResourceTag/owner": admin}}}`)
	h := newAdapterHarness(t, Config{Authz: a})
	admin, dev := h.smAs("AKIAADMIN0000EXAMPLE", "admin-secret"), h.smAs("AKIADEV00000EXAMPLE", "dev-secret")
	ctx := context.Background()
	createICEndpoint(t, admin, "shared", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	for _, b := range []struct {
		client *sagemaker.Client
		name   string
		tags   []smtypes.Tag
	}{
		{admin, "theirs-base", nil},
		{admin, "tagged-base", []smtypes.Tag{{Key: aws.String("owner"), Value: aws.String("admin")}}},
		{dev, "dev-base", nil},
	} {
		if _, err := b.client.CreateInferenceComponent(ctx, &sagemaker.CreateInferenceComponentInput{InferenceComponentName: aws.String(b.name),
			EndpointName: aws.String("shared"), VariantName: aws.String("AllTraffic"), Specification: sp,
			RuntimeConfig: &smtypes.InferenceComponentRuntimeConfig{CopyCount: aws.Int32(1)}, Tags: b.tags}); err != nil {
			t.Fatal(err)
		}
		if d := waitIC(t, admin, b.name); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
			t.Fatalf("%s: %s %s", b.name, d.InferenceComponentStatus, aws.ToString(d.FailureReason))
		}
	}
	// Attaching to a base the caller is denied.
	for _, base := range []string{"theirs-base", "Tagged-Base"} {
		if err := createAdapter(ctx, dev, "sneaky-"+strings.ToLower(base), "shared", base, "file://adapters/a.tar.gz"); !isAccessDenied(err) {
			t.Errorf("dev attached an adapter to %s: %v", base, err)
		}
	}
	if err := createAdapter(ctx, dev, "dev-adapter", "shared", "dev-base", "file://adapters/a.tar.gz"); err != nil {
		t.Fatalf("dev attaching an adapter to its own base: %v", err)
	}
	if d := waitIC(t, dev, "dev-adapter"); d.InferenceComponentStatus != smtypes.InferenceComponentStatusInService {
		t.Fatalf("dev-adapter: %s %s", d.InferenceComponentStatus, aws.ToString(d.FailureReason))
	}
	// Updating and deleting the owner's adapter (its own ARN and tags are
	// not denied: the base's are).
	if err := createAdapter(ctx, admin, "owners-adapter", "shared", "theirs-base", "file://adapters/o.tar.gz"); err != nil {
		t.Fatal(err)
	}
	waitIC(t, admin, "owners-adapter")
	_, err := dev.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("owners-adapter"),
		Specification: adapterSpec("theirs-base", "file://adapters/evil.tar.gz")})
	if !isAccessDenied(err) {
		t.Errorf("dev updated an adapter of theirs-base: %v", err)
	}
	if _, err := dev.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("owners-adapter")}); !isAccessDenied(err) {
		t.Errorf("dev deleted an adapter of theirs-base: %v", err)
	}
	if got := h.srv.ics.Get("owners-adapter"); got == nil || got.Record().Spec.Container.ArtifactURL != "file://adapters/o.tar.gz" || got.Deleting() {
		t.Fatalf("owners-adapter after dev's tries: %+v", got)
	}
	// The owner's own calls go through; nothing of dev's holds the base.
	if _, err := admin.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("owners-adapter")}); err != nil {
		t.Fatal(err)
	}
	waitComponentGone(t, h, "owners-adapter")
	if _, err := admin.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("theirs-base")}); err != nil {
		t.Fatalf("the owner deleting its base: %v", err)
	}
	// dev's own adapter: updated and deleted.
	if _, err := dev.UpdateInferenceComponent(ctx, &sagemaker.UpdateInferenceComponentInput{InferenceComponentName: aws.String("dev-adapter"),
		Specification: adapterSpec("dev-base", "file://adapters/b.tar.gz")}); err != nil {
		t.Fatalf("dev updating its adapter: %v", err)
	}
	waitIC(t, dev, "dev-adapter")
	if _, err := dev.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("dev-adapter")}); err != nil {
		t.Fatalf("dev deleting its adapter: %v", err)
	}
}

func waitComponentGone(t *testing.T, h *harness, name string) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for h.srv.ics.Get(name) != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%s still there", name)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestAdaptersPerBaseCapped: a base takes at most MaxAdaptersPerBase
// adapters; the next one is refused with ResourceLimitExceeded and takes
// nothing, and a deleted adapter makes room. There was no bound.
func TestAdaptersPerBaseCapped(t *testing.T) {
	h := newAdapterHarness(t, Config{})
	sm := h.sm()
	ctx := context.Background()
	createICEndpoint(t, sm, "many", "local", 1)
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-b")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	if err := createIC(ctx, sm, "base", "many", sp, 1); err != nil {
		t.Fatal(err)
	}
	waitIC(t, sm, "base")
	for i := range components.MaxAdaptersPerBase {
		if err := createAdapter(ctx, sm, fmt.Sprintf("a%d", i), "many", "base", "file://adapters/a.tar.gz"); err != nil {
			t.Fatalf("adapter %d: %v", i, err)
		}
	}
	err := createAdapter(ctx, sm, "one-too-many", "many", "base", "file://adapters/a.tar.gz")
	wantMessage(t, err, "ResourceLimitExceeded", fmt.Sprintf(
		"Inference component \"arn:aws:sagemaker:us-east-1:123456789012:inference-component/base\" has %d adapter inference components, the most mce allows on one base inference component; delete one first.",
		components.MaxAdaptersPerBase))
	if h.srv.ics.Get("one-too-many") != nil {
		t.Fatal("the refused adapter exists")
	}
	if _, err := sm.DeleteInferenceComponent(ctx, &sagemaker.DeleteInferenceComponentInput{InferenceComponentName: aws.String("a0")}); err != nil {
		t.Fatal(err)
	}
	if err := createAdapter(ctx, sm, "one-more", "many", "base", "file://adapters/a.tar.gz"); err != nil {
		t.Fatalf("an adapter once one was deleted: %v", err)
	}
}
