package host

import (
	"context"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/host/components"
	"github.com/mce-run/mce/host/store"
)

// newHarnessOn is a harness whose server runs on backend b (fake is the
// fake backend inside it).
func newHarnessOn(t *testing.T, b containers.Engine, fake *fakeBackend, cfg Config) *harness {
	t.Helper()
	cfg.Backend, cfg.Logger, cfg.Store = b, zerolog.Nop(), openStore(t)
	s := New(cfg)
	hs := httptest.NewUnstartedServer(s.Handler())
	hs.Config.ConnContext = ConnContext
	hs.Start()
	t.Cleanup(func() {
		hs.Close()
		s.Close(context.Background())
	})
	return &harness{t: t, srv: s, http: hs, backend: fake}
}

// gatedCapacity is capBackend whose InstanceCapacity (which a
// CreateInferenceComponent reads between its checks of the endpoint and
// the registration of the component) first runs the armed gate, once.
type gatedCapacity struct {
	*capBackend
	gate atomic.Pointer[func()]
}

func (b *gatedCapacity) InstanceCapacity(ctx context.Context) (containers.InstanceCapacity, error) {
	if g := b.gate.Swap(nil); g != nil {
		(*g)()
	}
	return b.capBackend.InstanceCapacity(ctx)
}

// PlaceCopies and CopyFits read the gated capacity.
func (b *gatedCapacity) PlaceCopies(ctx context.Context, r containers.CopyRequest) ([]containers.CopyPlace, string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.PlaceCopies(ctx, r)
}

func (b *gatedCapacity) CopyFits(ctx context.Context, v containers.CopyVariant, n containers.CopyNeeds) (string, error) {
	return docker.Packer{Capacity: b.InstanceCapacity}.CopyFits(ctx, v, n)
}

// TestComponentNeverOutlivesItsEndpoint: CreateInferenceComponent racing
// DeleteEndpoint either fails or creates a component that goes with the
// endpoint. The create used to check that the endpoint was not being
// deleted and register the component later, while the deletion collected
// the endpoint's components in between: the component was left behind (7
// rounds of 8 in the report) and served again on a new endpoint of the
// same name. Each round races the two calls; in two rounds of three the
// deletion is sent from inside the create, once its checks have passed,
// and the create goes on when the deletion was answered or is complete.
func TestComponentNeverOutlivesItsEndpoint(t *testing.T) {
	b := &gatedCapacity{capBackend: &capBackend{fakeBackend: &fakeBackend{t: t}}}
	h := newHarnessOn(t, b, b.fakeBackend, Config{})
	s, sm := h.srv, h.sm()
	ctx := context.Background()
	sp := &smtypes.InferenceComponentSpecification{Container: &smtypes.InferenceComponentContainerSpecification{Image: aws.String("-r")},
		ComputeResourceRequirements: &smtypes.InferenceComponentComputeResourceRequirements{MinMemoryRequiredInMb: aws.Int32(128)}}
	deleteEP := func(ep string) error {
		_, err := sm.DeleteEndpoint(ctx, &sagemaker.DeleteEndpointInput{EndpointName: aws.String(ep)})
		return err
	}
	gone := func(ep string) bool {
		deadline := time.Now().Add(30 * time.Second)
		for s.reg.get(ep) != nil {
			if time.Now().After(deadline) {
				return false
			}
			time.Sleep(5 * time.Millisecond)
		}
		return true
	}
	const rounds = 24
	created := 0
	for i := range rounds {
		ep, ic := fmt.Sprintf("race-%d", i), fmt.Sprintf("racer-%d", i)
		createICEndpoint(t, sm, ep, "local", 1)
		var createErr, deleteErr error
		switch i % 3 {
		case 0: // both at once
			start := make(chan struct{})
			var wg sync.WaitGroup
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				createErr = createIC(ctx, sm, ic, ep, sp, 1)
			}()
			go func() {
				defer wg.Done()
				<-start
				deleteErr = deleteEP(ep)
			}()
			close(start)
			wg.Wait()
		case 1: // the deletion answered (the endpoint is Deleting) mid-create
			g := func() { deleteErr = deleteEP(ep) }
			b.gate.Store(&g)
			createErr = createIC(ctx, sm, ic, ep, sp, 1)
		case 2: // the deletion complete mid-create
			g := func() {
				if deleteErr = deleteEP(ep); deleteErr == nil && !gone(ep) {
					deleteErr = fmt.Errorf("endpoint %s still there", ep)
				}
			}
			b.gate.Store(&g)
			createErr = createIC(ctx, sm, ic, ep, sp, 1)
		}
		b.gate.Store(nil)
		if deleteErr != nil {
			t.Fatalf("round %d: DeleteEndpoint: %v", i, deleteErr)
		}
		if createErr == nil {
			created++
		}
		if !gone(ep) {
			t.Fatalf("round %d: endpoint %s still there (create: %v)", i, ep, createErr)
		}
		// The endpoint is gone: so is every component of it, in memory
		// and in the durable state.
		for _, c := range s.ics.OfEndpoint(ep) {
			t.Errorf("round %d: component %s (%s) outlived endpoint %s (create: %v)", i, c.Name(), c.Record().Status, ep, createErr)
		}
		var left []string
		if err := store.List(s.store, store.InferenceComponents, func(r components.Record) error {
			if r.EndpointName == ep {
				left = append(left, r.Name)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("round %d: stored records %v outlived endpoint %s", i, left, ep)
		}
	}
	t.Logf("%d of %d creates succeeded before the deletion", created, rounds)
	// A new endpoint of a raced name starts with no component.
	if _, err := sm.DeleteEndpointConfig(ctx, &sagemaker.DeleteEndpointConfigInput{EndpointConfigName: aws.String("race-2-config")}); err != nil {
		t.Fatal(err)
	}
	createICEndpoint(t, sm, "race-2", "local", 1)
	out, err := sm.ListInferenceComponents(ctx, &sagemaker.ListInferenceComponentsInput{EndpointNameEquals: aws.String("race-2")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.InferenceComponents) > 0 {
		t.Errorf("the new endpoint race-2 has the components %+v of the deleted one", out.InferenceComponents)
	}
}
