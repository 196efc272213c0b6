// Package spec owns mce's endpoint definitions: SageMaker's own request
// shapes for CreateModel, CreateEndpointConfig and CreateEndpoint
// (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpointConfig.html,
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateEndpoint.html), how they are decoded from endpoint files and request
// bodies, how they are validated, and how an endpoint resolves into the
// plan the runtime starts (EndpointPlan → VariantPlan → ContainerPlan).
//
// It owns no state and does no I/O beyond reading the files handed to
// LoadFiles: it does not talk to Docker, serve HTTP or keep a registry.
// The control-plane API decodes request bodies with DecodeJSON into the same
// types, runs the same Validate methods, encodes the types back (encoding/json,
// omitempty tags) in Describe* responses, and resolves stored shapes with
// BuildPlan.
//
// # Endpoint files
//
// An endpoint file is YAML or JSON (chosen by the .yaml/.yml/.json
// extension, otherwise sniffed) holding three lists of requests, with the
// member names boto3 sends, so that a boto3 request dict pastes in:
//
//	Models:            # CreateModel requests
//	  - ModelName: ab-model
//	    Containers:    # or PrimaryContainer: {...}
//	      - ContainerHostname: english
//	        Image: mce-example/sentiment:latest
//	        ModelDataUrl: file://../models/sentiment-en.tar.gz
//	        Environment: {LANGUAGE: en}
//	      - ContainerHostname: german
//	        Image: mce-example/sentiment:latest
//	        ModelDataUrl: file://../models/sentiment-de.tar.gz
//	    InferenceExecutionConfig: {Mode: Direct}
//	EndpointConfigs:   # CreateEndpointConfig requests
//	  - EndpointConfigName: ab-config
//	    ProductionVariants:
//	      - {VariantName: AllTraffic, ModelName: ab-model, InitialInstanceCount: 1,
//	         InstanceType: ml.m5.large, InitialVariantWeight: 1}
//	Endpoints:         # CreateEndpoint requests
//	  - {EndpointName: ab-test, EndpointConfigName: ab-config}
//
// A top-level InferenceComponents list holds CreateInferenceComponent
// requests, created after the endpoints (a relative file:// ArtifactUrl
// resolves against the file's folder).
//
// Several files may be loaded together — a model in one file, its endpoint
// in another; names are global across them and compare case-insensitively,
// as SageMaker's lower-cased ARNs do. Files under testdata/ are examples.
//
// Top-level keys starting with "x-" are ignored; they hold YAML anchors for
// parts that several definitions share (see testdata/pipeline.yaml).
//
// Decoding is strict and the same for YAML, JSON and API bodies: YAML is
// first turned into JSON's data model (anchors, aliases and merge keys are
// expanded; one document per file), then one decoder assigns values to the
// shapes. Keys are case-sensitive and unknown keys are refused with their
// full path (`ab.yaml: Models[0].Containers[1].Imagee: unknown field`), as
// are values of the wrong type (quote numbers meant as strings, e.g.
// Environment values). Null means absent. A file may hold MaxFileSize bytes
// and nest MaxDepth levels.
//
// # mce's additions and limits
//
//   - ModelDataUrl may be file://PATH for local artifacts: absolute
//     (file:///srv/models/m.tar.gz) or relative to the folder of the file
//     that defines the model (file://../models/m.tar.gz). mce serve reads
//     it only inside its model roots: the folders of the -f files, the
//     data those files name, and --model-root folders.
//   - ContainerDefinition.Resources (mce-only) limits a container locally:
//     Gpus ("all", "none", a count, or "device=0,1" / GPU UUIDs), Cpus,
//     MemoryMiB.
//   - InstanceType may also be SageMaker local mode's "local" (no GPUs) or
//     "local_gpu" (all GPUs). An ml.* GPU type gives each container that
//     type's GPU count (ml.g5.12xlarge → 4) unless Resources.Gpus says
//     otherwise; CPU types give none.
//   - Members SageMaker has but mce cannot honour (ServerlessConfig,
//     ExplainerConfig, ModelPackageName, …) are refused
//     with "… is not supported by mce"; harmless ones (
//     ExecutionRoleArn, VpcConfig, KmsKeyId, ImageConfig, VolumeSizeInGB, …)
//     are accepted and reported as warnings ("… ignored locally"). Tags
//     are kept (ListTags, AddTags, DeleteTags) and have no effect.
//   - A production variant needs ModelName, InstanceType and
//     InitialInstanceCount (SageMaker makes them optional for serverless
//     variants and inference components, which mce does not run), and all
//     variants of an endpoint must share one InferenceExecutionConfig Mode.
//   - ShadowProductionVariants follow SageMaker's rules for shadow
//     variants (shadow.go): one production and one shadow variant, names
//     unique across both, none of the features SageMaker excludes from
//     shadow testing (asynchronous, serverless, multi-container and
//     multi-model endpoints, Inf1, Elastic Inference); BuildPlan puts the
//     shadow variant after the production one, marked Shadow.
//   - Containers without ContainerHostname are named container-1,
//     container-2, … by position; a PrimaryContainer is named primary.
//
// # Errors
//
// Decoding fails with *DecodeError. Validation fails with *ValidationError,
// whose Message is SageMaker's ValidationException text: constraint failures
// as "1 validation error detected: Value 'x y' at
// 'containers.2.member.containerHostname' failed to satisfy constraint: …",
// rule failures as one sentence. References to missing definitions are
// *NotFoundError (`Could not find model "arn:aws:sagemaker:…:model/x".`),
// names defined twice *AlreadyExistsError (`Cannot create already existing
// model "arn:…".`). All are matched with errors.As.
package spec
