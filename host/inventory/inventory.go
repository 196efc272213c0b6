// Package inventory holds the shapes of what mce runs now, as the status
// page, GET /mce/endpoints and the state metrics show it: endpoints, their
// variants, each copy's containers with health, restarts and recent
// output, and the models a multi-model container holds. host fills them
// (Server.Inventory); the readers only read. It owns no state and reaches
// containers only through the optional capabilities of package containers
// (ContainerDetail, MultiModelDetail, MultiModelGPUDetail).
package inventory

import (
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/spec"
)

// Inventory is a snapshot of everything the host runs: endpoints, their
// variants, each copy's containers with health, restarts and recent output,
// and the models a multi-model container holds. The status page and the
// state metrics (endpoint status, restarts, cache contents) read it; it is
// built on demand and never blocks invocations.
type Inventory struct {
	Taken     time.Time  `json:"Taken"`
	Endpoints []Endpoint `json:"Endpoints"`
}

// Endpoint is one endpoint in an Inventory.
type Endpoint struct {
	Name          string      `json:"EndpointName"`
	Status        spec.Status `json:"EndpointStatus"`
	FailureReason string      `json:"FailureReason,omitempty"`
	ConfigName    string      `json:"EndpointConfigName"`
	Mode          string      `json:"Mode"` // Serial, Direct or MultiModel
	Created       time.Time   `json:"CreationTime"`
	Modified      time.Time   `json:"LastModifiedTime"`
	Variants      []Variant   `json:"Variants"`
}

// Variant is one production or shadow variant: the plan's settings and
// the copies running now.
type Variant struct {
	Name         string  `json:"VariantName"`
	ModelName    string  `json:"ModelName"`
	InstanceType string  `json:"InstanceType"`
	Weight       float64 `json:"CurrentWeight"`
	// Shadow marks a shadow variant (ShadowProductionVariants): it gets
	// copies of the production variant's requests and answers no caller.
	Shadow bool `json:"Shadow,omitempty"`
	// DesiredCount is the plan's instance count; Copies holds those running.
	DesiredCount int    `json:"DesiredInstanceCount"`
	Copies       []Copy `json:"Copies"`
}

// Copy is one copy (instance) of a variant's container set, in chain
// order.
type Copy struct {
	Index      int         `json:"Index"`
	Containers []Container `json:"Containers"`
}

// Container is one running container.
type Container struct {
	Hostname string `json:"ContainerHostname"`
	Image    string `json:"Image,omitempty"`
	ID       string `json:"ContainerId,omitempty"`
	Ready    bool   `json:"Ready"`
	// Unavailable says why the container takes no calls ("" when Ready).
	Unavailable  string   `json:"Unavailable,omitempty"`
	Restarts     int      `json:"Restarts"`
	LastExitCode int      `json:"LastExitCode"`
	LogTail      []string `json:"LogTail,omitempty"`
	// MultiModel is set for a multi-model container: the models loaded now,
	// and the cache shared by the variant's copies.
	MultiModel *MultiModel `json:"MultiModel,omitempty"`
}

// MultiModel is a multi-model container's state.
type MultiModel struct {
	Loaded      []string `json:"LoadedModels"`
	CacheBytes  int64    `json:"CacheBytes"`
	CacheModels int      `json:"CacheModels"`
	// GPU is set where the manager accounts the container's GPU memory.
	GPU *GPUMemory `json:"GPUMemory,omitempty"`
}

// GPUMemory is a multi-model container's GPU memory as its manager
// measured it around loads and unloads (mme.GPUReport).
type GPUMemory struct {
	// UsedBytes is the container's own use where NVML lists its processes
	// (PerContainer), else its GPUs' used memory.
	UsedBytes    int64 `json:"UsedBytes"`
	TotalBytes   int64 `json:"TotalBytes"`
	PerContainer bool  `json:"PerContainer"`
	// UnreleasedBytes is memory the container kept after unloads that
	// freed less than half of what their models took.
	UnreleasedBytes  int64 `json:"UnreleasedBytes"`
	LeakyUnloads     int64 `json:"LeakyUnloads"`
	RestartRequested bool  `json:"RestartRequested,omitempty"`
}

// ContainerOf is the snapshot of container c (a pipeline.Container)
// reachable as host, running image, with what its optional capabilities
// tell.
func ContainerOf(host, image string, ready bool, c any) Container {
	out := Container{Hostname: host, Image: image, Ready: ready}
	if d, ok := c.(containers.ContainerDetail); ok {
		out.ID, out.Restarts, out.LastExitCode = d.ID(), d.Restarts(), d.LastExitCode()
		out.LogTail, out.Unavailable = d.LogTail(), d.Unavailable()
	}
	if m, ok := c.(containers.MultiModelDetail); ok {
		mm := &MultiModel{Loaded: m.LoadedModels()}
		mm.CacheBytes, mm.CacheModels = m.CacheUsage()
		if g, ok := c.(containers.MultiModelGPUDetail); ok {
			if r, ok := g.GPUMemory(); ok {
				mm.GPU = &GPUMemory{UsedBytes: int64(r.Used), TotalBytes: int64(r.Total), PerContainer: r.PerContainer,
					UnreleasedBytes: int64(r.Unreleased), LeakyUnloads: r.LeakyUnloads, RestartRequested: r.RestartRequested}
			}
		}
		out.MultiModel = mm
	}
	return out
}
