// Package modelserver is the example model server for SageMaker multi-model endpoints (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
// With SAGEMAKER_MULTI_MODEL=true it serves the multi-model container API exactly as NVIDIA Triton's
// SageMaker front end does
// (https://github.com/triton-inference-server/server/blob/main/src/sagemaker_server.cc): GET /ping, GET /models, GET /models/<hash>, POST /models (load),
// POST /models/<hash>/invoke and DELETE /models/<hash>, with Triton's routing regex, url pattern, status
// codes (200/400/404/409/507) and {"error": "…"} bodies; models are named by the
// X-Amzn-SageMaker-Target-Model header (falling back to the hash). Without it, it is an ordinary
// single-model container (smserve) answering POST /invocations from /opt/ml/model.
//
// A model is a directory holding model.json, a small dense network (see Spec), optionally with a
// Triton-style config.pbtxt at its root and optionally inside a numeric version directory (1/model.json).
// Inference requests and responses are KServe v2 JSON
// (https://github.com/kserve/kserve/blob/master/docs/predict-api/v2/required_api.md). Every loaded model takes its footprint from a
// memory budget (MODELSERVER_MEMORY_BYTES): the bytes of its weights, or the memory_bytes its model.json
// declares. A load that does not fit answers 507, as a GPU server out of memory does, and unloading gives
// the bytes back. Requests whose scratch memory exceeds the free workspace (MODELSERVER_WORKSPACE_BYTES)
// borrow from the same budget and answer 507 when it is exhausted.
package modelserver
