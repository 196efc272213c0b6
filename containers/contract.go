package containers

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
)

// Port numbers handed to containers. In SageMaker the containers of one
// instance share a host, so each gets its own port and its own safe range;
// mce keeps them distinct the same way (https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipeline-real-time.html).
const (
	basePort      = 8080
	baseSafePort  = 9000
	safeRangeSize = 100
)

// A container that takes bidirectional streams
// (InvokeEndpointWithBidirectionalStream) serves a WebSocket at
// BidirectionalStreamPath, and its image carries LabelBidirectionalStreaming=true.
const (
	BidirectionalStreamPath     = "/invocations-bidirectional-stream"
	LabelBidirectionalStreaming = "com.amazonaws.sagemaker.capabilities.bidirectional-streaming"
)

// ContainerPort is the SAGEMAKER_BIND_TO_PORT of the index-th container of
// an instance: 8080, 8081, ...
func ContainerPort(index int) int { return basePort + index }

// SageMakerEnv is the environment of the index-th container of an instance:
// env, plus the variables SageMaker sets (which win): SAGEMAKER_BIND_TO_PORT,
// its own SAGEMAKER_SAFE_PORT_RANGE and, for a multi-model container,
// SAGEMAKER_MULTI_MODEL. Sorted, as the engine takes it.
func SageMakerEnv(env map[string]string, index int, multiModel bool) []string {
	all := map[string]string{}
	maps.Copy(all, env)
	all["SAGEMAKER_BIND_TO_PORT"] = strconv.Itoa(ContainerPort(index))
	lo := baseSafePort + index*safeRangeSize
	all["SAGEMAKER_SAFE_PORT_RANGE"] = fmt.Sprintf("%d-%d", lo, lo+safeRangeSize-1)
	if multiModel {
		all["SAGEMAKER_MULTI_MODEL"] = "true"
	}
	out := make([]string, 0, len(all))
	for _, k := range slices.Sorted(maps.Keys(all)) {
		out = append(out, k+"="+all[k])
	}
	return out
}

// BidirectionalCapable is a running container whose engine knows whether
// its image carries LabelBidirectionalStreaming=true; the host refuses a
// bidirectional stream to one that does not, at once, instead of trying the
// container's WebSocket. An engine that does not know leaves it
// unimplemented.
type BidirectionalCapable interface {
	BidirectionalStreaming() bool
}
