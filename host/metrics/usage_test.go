package metrics

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/mce-run/mce/containers"
)

// usageStub stands in for NVML and the engine's statistics, which need a
// GPU and running containers: it reports fixed percentages.
type usageStub struct{}

func (usageStub) Usage(context.Context) []containers.Usage {
	return []containers.Usage{
		{Endpoint: "e", Variant: "v", Container: "c", Copy: 0, CPUPercent: 150, MemoryPercent: 40, GPUs: []int{0, 1}},
		{Endpoint: "e", Variant: "v", Container: "c", Copy: 1, CPUPercent: 50, MemoryPercent: 20, GPUs: []int{0, 1}},
		{Endpoint: "e", Variant: "w", Container: "c", CPUPercent: -1, MemoryPercent: 10}, // no CPU figure yet
	}
}
func (usageStub) DiskPercent() (float64, error) { return 30, nil }
func (usageStub) GPUUtilization(i int) (float64, float64, error) {
	if i > 1 {
		return 0, 0, errors.New("no such GPU")
	}
	return 50, 25, nil
}

// TestUsageRatios: CloudWatch's percentages become ratios (value / 100),
// CPU and memory averaged over copies, GPUs summed over the variant's.
func TestUsageRatios(t *testing.T) {
	want := `
# HELP mce_container_cpu_utilization_ratio CPU use of a container, summed over cores (0 to the number of cores), averaged over the variant's copies (CloudWatch CPUUtilization / 100).
# TYPE mce_container_cpu_utilization_ratio gauge
mce_container_cpu_utilization_ratio{container="c",endpoint="e",variant="v"} 1
# HELP mce_container_memory_utilization_ratio Memory use of a container as a share of its limit (or of the host's memory), page cache excluded, averaged over copies (CloudWatch MemoryUtilization / 100).
# TYPE mce_container_memory_utilization_ratio gauge
mce_container_memory_utilization_ratio{container="c",endpoint="e",variant="v"} 0.3
mce_container_memory_utilization_ratio{container="c",endpoint="e",variant="w"} 0.1
# HELP mce_disk_utilization_ratio Used share of the filesystem holding mce's model artifacts and caches, shared by every variant (CloudWatch DiskUtilization / 100).
# TYPE mce_disk_utilization_ratio gauge
mce_disk_utilization_ratio 0.3
# HELP mce_gpu_memory_utilization_ratio GPU memory use summed over the variant's GPUs (0 to the number of GPUs), from NVML (CloudWatch GPUMemoryUtilization / 100).
# TYPE mce_gpu_memory_utilization_ratio gauge
mce_gpu_memory_utilization_ratio{endpoint="e",variant="v"} 0.5
# HELP mce_gpu_utilization_ratio GPU busy share summed over the variant's GPUs (0 to the number of GPUs), from NVML (CloudWatch GPUUtilization / 100).
# TYPE mce_gpu_utilization_ratio gauge
mce_gpu_utilization_ratio{endpoint="e",variant="v"} 1
`
	uc := NewUsageCollector(usageStub{})
	uc.Refresh(context.Background())
	if err := testutil.CollectAndCompare(uc, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
}

// TestUsageAlsoSeesEachSample: the consumer given to Also gets the very
// figures of each sample, so SageMaker's CloudWatch metrics need no read of
// the engine of their own.
func TestUsageAlsoSeesEachSample(t *testing.T) {
	uc := NewUsageCollector(usageStub{})
	var got [][]containers.Usage
	uc.Also(func(us []containers.Usage) { got = append(got, us) })
	uc.Refresh(context.Background())
	uc.Refresh(context.Background())
	want := usageStub{}.Usage(context.Background())
	if len(got) != 2 || !reflect.DeepEqual(got[0], want) || !reflect.DeepEqual(got[1], want) {
		t.Fatalf("Also was told %v, want the stub's figures twice: %v", got, want)
	}
}
