// Command featurizer is the example preprocessing container: documents in, bag-of-words vectors out (see package
// internal/featurizer and ../README.md).
//
// It implements the SageMaker inference container contract: featurizer [serve], listening on
// $SAGEMAKER_BIND_TO_PORT (default 8080), model in /opt/ml/model (or $SM_MODEL_DIR).
package main

import (
	"os"

	"github.com/mce-run/mce/examples/containers/internal/featurizer"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func main() {
	os.Exit(smserve.Main(featurizer.Program()))
}
