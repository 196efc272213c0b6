package sagemakermetrics

import (
	"runtime"
	"time"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/host/cloudwatch"
)

// The gauges: sampled, each sample a datapoint of its period, so a
// minute's Average is the mean of its samples and Maximum the highest.

// sampleConcurrency publishes the calls in flight per variant
// (ConcurrentRequestsPerModel) and per copy of each inference component
// (ConcurrentRequestsPerCopy), and refreshes each variant's instance
// count for InvocationsPerInstance.
func (p *Publisher) sampleConcurrency(now time.Time) {
	if p.src.Variants != nil {
		live := map[[2]string]bool{}
		for _, v := range p.src.Variants() {
			live[[2]string{v.Endpoint, v.Variant}] = true
			s := p.variant(v.Endpoint, v.Variant)
			s.instances.Store(int64(max(v.Instances, 1)))
			s.concurrent.ObserveAt(now, float64(v.InFlight))
		}
		p.prune(func(k [2]string) bool { return live[k] }, nil)
	}
	if p.src.Components != nil {
		live := map[string]bool{}
		for _, c := range p.src.Components() {
			live[c.Component] = true
			if c.Copies == 0 {
				continue
			}
			s := p.component(c.Component)
			s.copies.Store(int64(c.Copies))
			s.concurrent.ObserveAt(now, float64(c.InFlight)/float64(c.Copies))
		}
		p.prune(nil, func(name string) bool { return live[name] })
	}
}

// prune drops the handles of variants and components that no longer
// serve, so that endpoints and components made and deleted under new
// names do not grow the maps without end (a variant that serves again
// resolves its handles again; what was recorded stays in the store).
// A multi-model variant's handles stay while its containers report.
func (p *Publisher) prune(variantLive func([2]string) bool, componentLive func(string) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if variantLive != nil {
		for k := range p.variants {
			if !variantLive(k) && p.mmeCounts[k] == nil {
				delete(p.variants, k)
			}
		}
	}
	if componentLive != nil {
		for k := range p.components {
			if !componentLive(k) {
				delete(p.components, k)
			}
		}
	}
}

// sampleLoadedModels publishes each multi-model variant's loaded models,
// so that a minute with no load or unload has its datapoint too.
func (p *Publisher) sampleLoadedModels(now time.Time) {
	p.mu.RLock()
	keys := make([][2]string, 0, len(p.mmeCounts))
	for k := range p.mmeCounts {
		keys = append(keys, k)
	}
	p.mu.RUnlock()
	for _, k := range keys {
		p.variant(k[0], k[1]).loadedModels.ObserveAt(now, float64(p.loadedModels(k)))
	}
}

// sampleBacklogs publishes the asynchronous backlog.
func (p *Publisher) sampleBacklogs(now time.Time) {
	if p.src.Backlogs != nil {
		for _, b := range p.src.Backlogs() {
			p.observeBacklog(b, now)
		}
	}
}

// ObserveUsage publishes one sample of the containers' resource use (the
// one host/metrics' UsageCollector takes: the engine is asked once), with
// the disk and GPU figures of Sources.Usage.
func (p *Publisher) ObserveUsage(us []containers.Usage) {
	if p.src.Usage == nil {
		return
	}
	var comps map[[3]string]ComponentLoad
	if p.src.Components != nil {
		comps = map[[3]string]ComponentLoad{}
		for _, c := range p.src.Components() {
			comps[[3]string{c.Endpoint, c.Variant, c.Component}] = c
		}
	}
	p.observeUsage(us, comps, p.src.Usage, p.now())
}

func (p *Publisher) observeBacklog(b Backlog, now time.Time) {
	d := []cloudwatch.Dimension{{Name: "EndpointName", Value: b.Endpoint}}
	perInstance := float64(b.Size)
	if b.Instances > 0 {
		perInstance /= float64(b.Instances)
	}
	noCapacity := 0.0
	if b.Size > 0 && b.Instances == 0 {
		noCapacity = 1
	}
	// Backlogs are few and sampled seldom: resolving by name is fine here.
	for m, v := range map[metric]float64{
		mBacklogSize: float64(b.Size), mBacklogSizePerInstance: perInstance,
		mOldestRequestAge: b.Oldest.Seconds(), mBacklogNoCapacity: noCapacity,
	} {
		p.series(m, d).ObserveAt(now, v)
	}
}

// gpuReader reads one GPU's utilization and memory use, in percent.
type gpuReader interface {
	DiskPercent() (float64, error)
	GPUUtilization(index int) (gpuPercent, memoryPercent float64, err error)
}

// observeUsage turns one sample of the containers' use into
// /aws/sagemaker/Endpoints (per instance of a variant: CPU summed over
// its containers, 0–100 × cores; memory their mean; the variant's GPUs
// summed, 0–100 × GPUs; the disk of mce's state) and
// /aws/sagemaker/InferenceComponents (per copy, against what it reserved).
func (p *Publisher) observeUsage(us []containers.Usage, comps map[[3]string]ComponentLoad, gr gpuReader, now time.Time) {
	type instKey struct {
		e, v string
		copy int
	}
	type inst struct {
		cpu, mem   float64
		ncpu, nmem int
	}
	insts := map[instKey]*inst{}
	gpus := map[[2]string]map[int]bool{}
	for _, u := range us {
		k := instKey{u.Endpoint, u.Variant, u.Copy}
		in := insts[k]
		if in == nil {
			in = &inst{}
			insts[k] = in
		}
		if u.CPUPercent >= 0 {
			in.cpu += u.CPUPercent
			in.ncpu++
		}
		in.mem += u.MemoryPercent
		in.nmem++
		vk := [2]string{u.Endpoint, u.Variant}
		if gpus[vk] == nil {
			gpus[vk] = map[int]bool{}
		}
		for _, g := range u.GPUs {
			gpus[vk][g] = true
		}
		if c, ok := comps[[3]string{u.Endpoint, u.Variant, u.Container}]; ok {
			p.observeCopy(c, u, gr, now)
		}
	}
	disk, diskErr := gr.DiskPercent()
	for k, in := range insts {
		v := p.variant(k.e, k.v)
		if in.ncpu > 0 {
			v.cpu.ObserveAt(now, in.cpu)
		}
		if in.nmem > 0 {
			v.memory.ObserveAt(now, in.mem/float64(in.nmem))
		}
		if diskErr == nil {
			v.disk.ObserveAt(now, disk)
		}
	}
	for vk, set := range gpus {
		if len(set) == 0 {
			continue
		}
		var g, m float64
		ok := true
		for i := range set {
			gp, mp, err := gr.GPUUtilization(i)
			if err != nil {
				ok = false
				break
			}
			g, m = g+gp, m+mp
		}
		if ok {
			v := p.variant(vk[0], vk[1])
			v.gpu.ObserveAt(now, g)
			v.gpuMemory.ObserveAt(now, m)
		}
	}
}

// observeCopy publishes one copy of an inference component against what
// it reserved: CPU over its cores (over the host's when it reserved
// none), memory over its limit (the engine's MemoryPercent already is),
// and the mean of its GPUs.
func (p *Publisher) observeCopy(c ComponentLoad, u containers.Usage, gr gpuReader, now time.Time) {
	s := p.component(c.Component)
	if u.CPUPercent >= 0 {
		cores := c.CPUCores
		if cores <= 0 {
			cores = float64(runtime.NumCPU())
		}
		s.cpu.ObserveAt(now, u.CPUPercent/cores)
	}
	s.memory.ObserveAt(now, u.MemoryPercent)
	if len(u.GPUs) == 0 {
		return
	}
	var g, m float64
	for _, i := range u.GPUs {
		gp, mp, err := gr.GPUUtilization(i)
		if err != nil {
			return
		}
		g, m = g+gp, m+mp
	}
	n := float64(len(u.GPUs))
	s.gpu.ObserveAt(now, g/n)
	s.gpuMemory.ObserveAt(now, m/n)
}
