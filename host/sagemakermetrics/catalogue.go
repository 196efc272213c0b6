package sagemakermetrics

import "github.com/mce-run/mce/host/cloudwatch"

// The catalogue: each metric mce publishes, with the namespace, unit and
// resolution SageMaker gives it
// (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
// The dimensions are set where the handles are made: EndpointName and
// VariantName, or InferenceComponentName, or EndpointName alone (the
// asynchronous backlog).

// Namespaces SageMaker publishes endpoint metrics in.
const (
	NamespaceInvocations = "AWS/SageMaker"
	NamespaceEndpoints   = "/aws/sagemaker/Endpoints"
	NamespaceComponents  = "/aws/sagemaker/InferenceComponents"
)

type metric struct {
	namespace, name, unit string
	resolution            cloudwatch.Resolution
}

// catalogue is every metric below, in the order declared: def adds each
// as its variable is initialized, so the list cannot miss one.
var catalogue []metric

func def(m metric) metric {
	catalogue = append(catalogue, m)
	return m
}

func inv(name, unit string) metric {
	return def(metric{NamespaceInvocations, name, unit, cloudwatch.Standard})
}

var (
	// Per endpoint and variant, and per inference component.
	mInvocations            = inv("Invocations", "None")
	mInvocationsPerInstance = inv("InvocationsPerInstance", "None")
	mInvocation4XX          = inv("Invocation4XXErrors", "None")
	mInvocation5XX          = inv("Invocation5XXErrors", "None")
	mModelErrors            = inv("InvocationModelErrors", "None")
	mModelLatency           = inv("ModelLatency", "Microseconds")
	mOverheadLatency        = inv("OverheadLatency", "Microseconds")
	// Per inference component: calls refused because it had no copy
	// (what scale-out from zero's step scaling alarms on).
	mNoCapacity = inv("NoCapacityInvocationFailures", "None")
	// Per inference component: each call counts 1/copies, so a minute's
	// Sum is the calls per copy (what target tracking's
	// SageMakerInferenceComponentInvocationsPerCopy reads).
	mInvocationsPerCopy = inv("InvocationsPerCopy", "None")
	// Calls in flight, at SageMaker's high resolution.
	mConcurrentPerModel = def(metric{NamespaceInvocations, "ConcurrentRequestsPerModel", "None", cloudwatch.HighResolution})
	mConcurrentPerCopy  = def(metric{NamespaceInvocations, "ConcurrentRequestsPerCopy", "None", cloudwatch.HighResolution})
	// Multi-model endpoints, per endpoint and variant.
	mModelLoadingWaitTime = inv("ModelLoadingWaitTime", "Microseconds")
	mModelLoadingTime     = inv("ModelLoadingTime", "Microseconds")
	mModelUnloadingTime   = inv("ModelUnloadingTime", "Microseconds")
	mModelDownloadingTime = inv("ModelDownloadingTime", "Microseconds")
	mModelCacheHit        = inv("ModelCacheHit", "None")
	mLoadedModelCount     = inv("LoadedModelCount", "None")
	// Asynchronous endpoints, per endpoint.
	mBacklogSize            = inv("ApproximateBacklogSize", "None")
	mBacklogSizePerInstance = inv("ApproximateBacklogSizePerInstance", "None")
	mOldestRequestAge       = inv("ApproximateAgeOfOldestRequest", "Seconds")
	mBacklogNoCapacity      = inv("HasBacklogWithoutCapacity", "None")
	// Resource use, per endpoint and variant.
	mCPU       = def(metric{NamespaceEndpoints, "CPUUtilization", "Percent", cloudwatch.Standard})
	mMemory    = def(metric{NamespaceEndpoints, "MemoryUtilization", "Percent", cloudwatch.Standard})
	mGPU       = def(metric{NamespaceEndpoints, "GPUUtilization", "Percent", cloudwatch.Standard})
	mGPUMemory = def(metric{NamespaceEndpoints, "GPUMemoryUtilization", "Percent", cloudwatch.Standard})
	mDisk      = def(metric{NamespaceEndpoints, "DiskUtilization", "Percent", cloudwatch.Standard})
	// Resource use of an inference component's copies against what each
	// copy reserved.
	mCPUNormalized       = def(metric{NamespaceComponents, "CPUUtilizationNormalized", "Percent", cloudwatch.Standard})
	mMemoryNormalized    = def(metric{NamespaceComponents, "MemoryUtilizationNormalized", "Percent", cloudwatch.Standard})
	mGPUNormalized       = def(metric{NamespaceComponents, "GPUUtilizationNormalized", "Percent", cloudwatch.Standard})
	mGPUMemoryNormalized = def(metric{NamespaceComponents, "GPUMemoryUtilizationNormalized", "Percent", cloudwatch.Standard})
)

// Catalogue lists every metric the Publisher writes, for the docs' table
// and the tests that hold the two together.
func Catalogue() []struct{ Namespace, Name, Unit string } {
	out := make([]struct{ Namespace, Name, Unit string }, len(catalogue))
	for i, m := range catalogue {
		out[i] = struct{ Namespace, Name, Unit string }{m.namespace, m.name, m.unit}
	}
	return out
}
