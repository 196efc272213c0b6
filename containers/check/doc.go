// Package check is `mce check IMAGE`: it tells whether a container image
// honours SageMaker's inference container contract
// (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html,
// and for multi-model containers https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html)
// before anyone deploys it, by running it
// as SageMaker would and reporting one pass/fail/warn/skip line per rule,
// with timings.
//
// What it runs: the image with the argument `serve`, SAGEMAKER_BIND_TO_PORT
// 8080, SAGEMAKER_SAFE_PORT_RANGE, the caller's environment, and the model
// data (fetched and extracted by containers/artifact) mounted read-only at
// /opt/ml/model — or, for a multi-model image, at /opt/ml/models/<hash>/model
// with SAGEMAKER_MULTI_MODEL=true — on a fresh bridge network of its own.
// Then a second copy joins the first one's network namespace on port 8081,
// as the containers of a multi-container endpoint share one instance; an
// image that binds a fixed second port fails there.
//
// What it owns: every container and network it creates carries the labels
// [LabelCheck] and [LabelOwner] and is removed before [Checker.Run]
// returns, on every path (a cancelled context included); what a killed
// run left behind is removed by the next run on the same machine. It reads
// the container's listening sockets from the host's /proc (the container's
// init process, whose network namespace the copies share), which works for
// FROM scratch images and needs an engine on this machine; elsewhere that
// check is skipped, never guessed.
//
// What it must not touch: anything it did not create. It talks only to the
// containers it started, at their addresses on its own network.
package check
