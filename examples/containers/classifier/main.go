// Command classifier is the example inference container: feature vectors in, ticket labels out (see package
// internal/classifier and ../README.md).
//
// It implements the SageMaker inference container contract: classifier [serve], listening on
// $SAGEMAKER_BIND_TO_PORT (default 8080), model in /opt/ml/model (or $SM_MODEL_DIR).
package main

import (
	"os"

	"github.com/mce-run/mce/examples/containers/internal/classifier"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func main() {
	os.Exit(smserve.Main(classifier.Program()))
}
