package containers

// Usage is one running container's resource use, as SageMaker's instance
// metrics count it (https://docs.aws.amazon.com/sagemaker/latest/dg/monitoring-cloudwatch.html).
type Usage struct {
	Endpoint, Variant, Container string
	Copy                         int
	// CPUPercent sums over cores: 0–100 × cores (CPUUtilization).
	CPUPercent float64
	// MemoryPercent is the share of its memory limit, or of the host's
	// memory without one, that the container uses, page cache excluded.
	MemoryPercent float64
	// GPUs are the NVML indexes of the container's GPUs, if it asked for any.
	GPUs []int
}
