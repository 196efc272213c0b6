package containers

import (
	"context"
	"fmt"

	"github.com/moby/moby/client"
)

// ImageInspector is the one engine call [InspectImage] needs; [Engine] and
// *client.Client satisfy it.
type ImageInspector interface {
	ImageInspect(ctx context.Context, image string, opts ...client.ImageInspectOption) (client.ImageInspectResult, error)
}

// InspectImage looks the image up on the engine without pulling it and
// returns its labels (nil when it has none). An image that is not present
// gives an error matching [ErrNotFound] that names the reference; other
// engine errors are classified as the rest of this package's are. The call
// is bounded in time.
func InspectImage(ctx context.Context, e ImageInspector, ref string) (map[string]string, error) {
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	img, err := e.ImageInspect(cctx, ref)
	if err != nil {
		if gone(err) {
			return nil, fmt.Errorf("image %q is not present on the Docker engine: %w", ref, ErrNotFound)
		}
		return nil, classify("inspect image "+ref, err)
	}
	if img.Config == nil {
		return nil, nil
	}
	return img.Config.Labels, nil
}

// LabelMultiModels is the image label SageMaker requires of containers that
// serve a multi-model endpoint (contracts doc §3.2, §4.1).
const LabelMultiModels = "com.amazonaws.sagemaker.capabilities.multi-models"
