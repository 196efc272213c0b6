// Command probe is the fast test and benchmark container whose behaviour requests can switch (see package
// internal/probe and ../README.md).
//
// It implements the SageMaker inference container contract: probe [serve], listening on
// $SAGEMAKER_BIND_TO_PORT (default 8080), model in /opt/ml/model (or $SM_MODEL_DIR).
package main

import (
	"os"

	"github.com/mce-run/mce/examples/containers/internal/probe"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

func main() {
	os.Exit(smserve.Main(probe.Program()))
}
