package host

import (
	"context"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/host/async"
	"github.com/mce-run/mce/host/store"
)

// TestDamagedRecordsDoNotStopMce: one record of each kind that does not
// decode (and async and endpoint records without the fields they are
// served by) neither stops Recover — mce's start — nor fails the list
// calls: they are moved to quarantine and the good records are served.
func TestDamagedRecordsDoNotStopMce(t *testing.T) {
	h := newHarness(t, Config{})
	ctx := context.Background()
	sm := h.sm()
	if _, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String("good"),
		PrimaryContainer: &smtypes.ContainerDefinition{Image: aws.String("i")}}); err != nil {
		t.Fatal(err)
	}
	st := h.srv.store
	for _, kind := range []string{store.Models, store.EndpointConfigs, store.Endpoints, store.AsyncRequests} {
		// A JSON string where an object belongs: it does not decode.
		if err := st.Put(kind, "damaged", "\x00\x00garbage"); err != nil {
			t.Fatal(err)
		}
	}
	st.Put(store.AsyncRequests, "empty", async.Record{})  // no endpoint, no locations
	st.Put(store.Endpoints, "nameless", EndpointRecord{}) // no name

	// A fresh server on the same state, as after a restart.
	s := New(Config{Backend: &fakeBackend{t: t}, Store: st, Logger: zerolog.Nop()})
	defer s.Close(ctx)
	if err := s.Recover(ctx); err != nil {
		t.Fatalf("Recover with damaged records: %v", err)
	}
	out, err := sm.ListModels(ctx, &sagemaker.ListModelsInput{})
	if err != nil {
		t.Fatalf("ListModels with a damaged record: %v", err)
	}
	if len(out.Models) != 1 || aws.ToString(out.Models[0].ModelName) != "good" {
		t.Errorf("ListModels = %+v, want the good model", out.Models)
	}
	if _, err := sm.ListEndpointConfigs(ctx, &sagemaker.ListEndpointConfigsInput{}); err != nil {
		t.Errorf("ListEndpointConfigs with a damaged record: %v", err)
	}
	n := 0
	store.List(st, store.Quarantine, func(any) error { n++; return nil })
	if n != 6 {
		t.Errorf("%d records in quarantine, want 6", n)
	}
}
