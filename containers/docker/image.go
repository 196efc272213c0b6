package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
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
// serve a multi-model endpoint (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipeline-real-time.html, https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
const LabelMultiModels = "com.amazonaws.sagemaker.capabilities.multi-models"

// checkImages makes sure every image is present (pulling it only when the
// runtime is allowed to) and, for multi-container sets, carries SageMaker's
// bind-to-port label. It returns the images that carry
// containers.LabelBidirectionalStreaming=true.
func (rt *Runtime) checkImages(ctx context.Context, spec EndpointSpec) (bidi map[string]bool, err error) {
	type need struct{ multi bool }
	images := map[string]*need{}
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			n := images[c.Image]
			if n == nil {
				n = &need{}
				images[c.Image] = n
			}
			n.multi = n.multi || len(v.Containers) > 1
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(images)) {
		labels, err := InspectImage(ctx, rt.engine, ref)
		if (errors.Is(err, ErrNotFound) && rt.opts.PullPolicy == PullIfMissing) || rt.opts.PullPolicy == PullAlways {
			if perr := rt.Pull(ctx, ref); perr != nil {
				return nil, perr
			}
			labels, err = InspectImage(ctx, rt.engine, ref)
		}
		if err != nil {
			if errors.Is(err, ErrNotFound) {
				return nil, fmt.Errorf("image %q is not present on the Docker engine and the pull policy is never (start mce with --pull to pull missing images, or build it or docker pull it first): %w", ref, ErrNotFound)
			}
			return nil, err
		}
		if images[ref].multi && labels[LabelBindToPort] != "true" {
			return nil, fmt.Errorf("image %q does not carry the label %s=true that SageMaker requires of containers in a multi-container endpoint or pipeline", ref, LabelBindToPort)
		}
		if labels[containers.LabelBidirectionalStreaming] == "true" {
			if bidi == nil {
				bidi = map[string]bool{}
			}
			bidi[ref] = true
		}
	}
	return bidi, nil
}
