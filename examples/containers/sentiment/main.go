// Command sentiment is the example sentiment container, one image for the English and German model artifacts (see
// package internal/sentiment and ../README.md).
//
// It implements the SageMaker inference container contract: sentiment [serve], listening on
// $SAGEMAKER_BIND_TO_PORT (default 8080), model in /opt/ml/model (or $SM_MODEL_DIR).
package main

import (
	"os"

	"github.com/mce-run/mce/examples/containers/internal/sentiment"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func main() {
	os.Exit(smserve.Main(sentiment.Program()))
}
