package docker

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"syscall"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
)

// cpuSample is the previous CPU reading of a container.
type cpuSample struct {
	mu            sync.Mutex
	total, system uint64
	ok            bool
}

// Usage samples every ready container through the engine's one-shot stats,
// in parallel. CPU use is the change since the previous call, so the first
// call reports containers without a CPU figure (CPUPercent -1).
func (rt *Runtime) Usage(ctx context.Context) []containers.Usage {
	rt.mu.Lock()
	cs := make([]*Container, 0, len(rt.byID))
	for _, c := range rt.byID {
		if c.ready.Load() {
			cs = append(cs, c)
		}
	}
	rt.mu.Unlock()
	out := make([]containers.Usage, len(cs))
	var wg sync.WaitGroup
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = c.usage(ctx)
		}()
	}
	wg.Wait()
	kept := out[:0]
	for _, u := range out {
		if u.Container != "" {
			kept = append(kept, u)
		}
	}
	return kept
}

func (c *Container) usage(ctx context.Context) containers.Usage {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	res, err := c.rt.engine.ContainerStats(cctx, c.ID(), client.ContainerStatsOptions{})
	if err != nil {
		return containers.Usage{}
	}
	defer res.Body.Close()
	var st container.StatsResponse
	if err := json.NewDecoder(io.LimitReader(res.Body, 1<<20)).Decode(&st); err != nil {
		return containers.Usage{}
	}
	u := containers.Usage{Endpoint: c.endpoint, Variant: c.variant, Container: c.spec.Hostname, Copy: c.copy, CPUPercent: -1}
	total, system := st.CPUStats.CPUUsage.TotalUsage, st.CPUStats.SystemUsage
	c.cpu.mu.Lock()
	if c.cpu.ok && system > c.cpu.system && total >= c.cpu.total {
		cores := float64(st.CPUStats.OnlineCPUs)
		if cores == 0 {
			cores = float64(len(st.CPUStats.CPUUsage.PercpuUsage))
		}
		u.CPUPercent = float64(total-c.cpu.total) / float64(system-c.cpu.system) * cores * 100
	}
	c.cpu.total, c.cpu.system, c.cpu.ok = total, system, true
	c.cpu.mu.Unlock()
	if lim := st.MemoryStats.Limit; lim > 0 {
		used := st.MemoryStats.Usage
		for _, k := range []string{"inactive_file", "total_inactive_file"} { // cgroup v2, v1
			if v, ok := st.MemoryStats.Stats[k]; ok && v < used {
				used -= v
				break
			}
		}
		u.MemoryPercent = 100 * float64(used) / float64(lim)
	}
	if !c.spec.GPUs.IsZero() {
		u.GPUs, _ = c.rt.gpuIndexes(c.spec.GPUs)
	}
	return u
}

// DiskPercent is the used share of the filesystem holding the state folder
// (model artifacts and caches): SageMaker's DiskUtilization of the volume
// models live on.
func (rt *Runtime) DiskPercent() (float64, error) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(rt.opts.StateDir, &fs); err != nil {
		return 0, err
	}
	total := float64(fs.Blocks) * float64(fs.Bsize)
	if total == 0 {
		return 0, nil
	}
	return 100 * (total - float64(fs.Bavail)*float64(fs.Bsize)) / total, nil
}

// GPUUtilization reads one GPU's busy and memory shares through NVML.
func (rt *Runtime) GPUUtilization(index int) (gpuPercent, memoryPercent float64, err error) {
	rt.mu.Lock()
	inv := rt.gpus
	rt.mu.Unlock()
	if inv == nil {
		return 0, 0, errNoGPUs
	}
	return inv.Utilization(index)
}
