package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"
)

// fakeImages answers ImageInspect from a map; a missing reference is
// Docker's not-found, and "broken" an engine failure.
type fakeImages map[string]map[string]string

func (f fakeImages) ImageInspect(_ context.Context, ref string, _ ...client.ImageInspectOption) (client.ImageInspectResult, error) {
	if ref == "broken" {
		return client.ImageInspectResult{}, errors.New("engine on fire")
	}
	l, ok := f[ref]
	if !ok {
		return client.ImageInspectResult{}, fmt.Errorf("no such image: %s: %w", ref, cerrdefs.ErrNotFound)
	}
	// The engine's JSON, as the client decodes it.
	b, _ := json.Marshal(map[string]any{"Config": map[string]any{"Labels": l}})
	var res client.ImageInspectResult
	err := json.Unmarshal(b, &res.InspectResponse)
	return res, err
}

func TestInspectImage(t *testing.T) {
	f := fakeImages{"a:1": {LabelBindToPort: "true"}}
	l, err := InspectImage(context.Background(), f, "a:1")
	if err != nil || l[LabelBindToPort] != "true" {
		t.Errorf("a:1: %v, %v", l, err)
	}
	_, err = InspectImage(context.Background(), f, "b:1")
	if !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), `image "b:1" is not present`) {
		t.Errorf("missing image: %v", err)
	}
	_, err = InspectImage(context.Background(), f, "broken")
	if err == nil || errors.Is(err, ErrNotFound) {
		t.Errorf("engine failure: %v", err)
	}
}
