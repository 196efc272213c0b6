// Command modelserver is the example multi-model server: with SAGEMAKER_MULTI_MODEL=true it serves the
// SageMaker multi-model container API the way NVIDIA Triton's SageMaker front end does; otherwise it is a
// single-model container answering POST /invocations from /opt/ml/model. Models are small dense networks
// (model.json), requests and responses KServe v2 JSON. See package internal/modelserver and README.md.
//
// Usage: modelserver [serve], listening on $SAGEMAKER_BIND_TO_PORT (default 8080).
package main

import (
	"os"

	"github.com/mce-run/mce/examples/containers/internal/modelserver"
)

func main() {
	os.Exit(modelserver.Main())
}
