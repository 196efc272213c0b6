// Package smserve is the serving skeleton shared by the example model containers: it owns the SageMaker
// inference container contract (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html,
// https://docs.aws.amazon.com/sagemaker/latest/dg/inference-pipeline-real-time.html) and nothing model-specific.
//
// It reads SAGEMAKER_BIND_TO_PORT (default 8080) and SM_MODEL_DIR (default /opt/ml/model), listens, loads the
// model in the background while GET /ping answers 503, then answers GET /ping with 200 and an empty body and
// hands POST /invocations to the program's handler. It stops on SIGTERM with a graceful http.Server.Shutdown
// bounded by ShutdownTimeout. It also provides what every handler needs: request bodies capped at
// MaxBodyBytes, Content-Type / Accept negotiation (415 / 406), and JSON error bodies {"error": "…"} produced
// in one place (WriteError).
//
// It must not know any model format; programs plug in through Program.Load.
package smserve
