package check

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
)

// GPUInventory is what a GPU check reads of the host's GPUs;
// *gpu.Inventory implements it with NVML.
type GPUInventory interface {
	Devices() ([]gpu.Device, error)
	Memory(index int) (used, total uint64, err error)
}

// Defaults of the GPU options.
const (
	// DefaultGPUMaxModels bounds the copies loaded by the GPU check.
	DefaultGPUMaxModels = 64
	// DefaultGPUSettle is how long the GPU check waits after an unload for
	// the GPU's used memory to fall.
	DefaultGPUSettle = 2 * time.Second
)

// Names of the GPU checks, in report order.
const (
	nameGPUFootprint = "gpu: footprint per model"
	nameGPUFit       = "gpu: models that fit"
	nameGPUOOM       = "gpu: out of memory answers 507"
	nameGPUUnload    = "gpu: unload gives memory back"
	nameGPUTimes     = "gpu: load and unload times"
)

// gpuNames are the GPU checks this run reports, or none.
func (r *run) gpuNames() []string {
	if r.opts.GPUs.IsZero() {
		return nil
	}
	return []string{nameGPUFootprint, nameGPUFit, nameGPUOOM, nameGPUUnload, nameGPUTimes}
}

// GPUsPresent says whether this host's driver lists the GPUs req asks for
// (the engine's runtime is checked when the run starts). The error wraps
// gpu.ErrNoDriver, gpu.ErrNoGPU, gpu.ErrTooMany or gpu.ErrUnknownDevice.
func GPUsPresent(inv GPUInventory, req gpu.Request) error {
	if req.IsZero() {
		return nil
	}
	devs, err := inv.Devices()
	return gpu.Check(req, devs, err, gpu.RuntimeInfo{DefaultRuntime: "nvidia"})
}

// gpuIndexes are the GPUs req gives the container, as NVML indexes them.
func gpuIndexes(req gpu.Request, devs []gpu.Device) []int {
	var out []int
	for _, d := range devs {
		switch {
		case req.All, req.Count > len(out):
			out = append(out, d.Index)
		case slices.ContainsFunc(req.DeviceIDs, func(id string) bool {
			return id == strconv.Itoa(d.Index) || strings.EqualFold(id, d.UUID)
		}):
			out = append(out, d.Index)
		}
	}
	return out
}

// gpuProbe loads copies of one model, under distinct names, into a running
// multi-model container until it refuses one (507 or another answer), the
// GPU memory passes the threshold or max copies are loaded; then it
// unloads them all, reading the GPUs' used memory after every call.
type gpuProbe struct {
	c         *Checker
	base      string // the container's base URL
	modelURL  string // the url of every load request
	prefix    string // copies are named prefix-1, prefix-2, …
	mem       GPUInventory
	indexes   []int
	max       int
	threshold float64 // in (0, 1]; 1: until the container refuses
	settle    time.Duration
	timeout   time.Duration
}

type gpuLoad struct {
	name      string
	took      time.Duration
	footprint uint64
}

type gpuUnload struct {
	took    time.Duration
	freed   uint64
	failure string // "" when it answered 200
}

// gpuFindings are what a probe saw.
type gpuFindings struct {
	baseline, total uint64 // used and total memory before the first load
	peak            uint64 // used memory with every copy loaded
	loads           []gpuLoad
	stop            string // "507", "threshold", "max" or "refused"
	refusal         string // the answer that stopped loading, when stop is "507" or "refused"
	refusalStatus   int    // its status; 0 without an answer
	unloads         []gpuUnload
	after           uint64 // used memory after unloading everything
	memErr          error  // reading the GPU memory failed: nothing is judged
}

func (p *gpuProbe) used() (used, total uint64, err error) {
	for _, i := range p.indexes {
		u, t, err := p.mem.Memory(i)
		if err != nil {
			return 0, 0, err
		}
		used += u
		total += t
	}
	return used, total, nil
}

func (p *gpuProbe) run(ctx context.Context) gpuFindings {
	var f gpuFindings
	used, total, err := p.used()
	if err != nil {
		f.memErr = err
		return f
	}
	f.baseline, f.total, f.peak = used, total, used
	hdr := map[string]string{"Content-Type": "application/json", "Accept": "application/json"}
	for i := 1; ; i++ {
		if i > p.max {
			f.stop = "max"
			break
		}
		if p.threshold < 1 && float64(used) > p.threshold*float64(total) {
			f.stop = "threshold"
			break
		}
		name := p.prefix + "-" + strconv.Itoa(i)
		body, _ := json.Marshal(map[string]string{"model_name": name, "url": p.modelURL})
		a, err := p.c.call(ctx, http.MethodPost, p.base+"/models", body, hdr, p.timeout)
		after, _, merr := p.used()
		if merr != nil {
			f.memErr = merr
			break
		}
		if err != nil || a.status != http.StatusOK {
			f.stop, f.refusal, f.refusalStatus = "refused", got(a, err), a.status
			if err == nil && a.status == http.StatusInsufficientStorage {
				f.stop = "507"
			}
			break
		}
		fp := uint64(0)
		if after > used {
			fp = after - used
		}
		f.loads = append(f.loads, gpuLoad{name: name, took: a.took, footprint: fp})
		used = after
		f.peak = max(f.peak, used)
	}
	// Unload, newest first, and see what each gives back.
	for i := len(f.loads) - 1; i >= 0; i-- {
		l := f.loads[i]
		before, _, _ := p.used()
		a, err := p.c.call(ctx, http.MethodDelete, p.base+"/models/"+url.PathEscape(l.name), nil, hdr, p.timeout)
		u := gpuUnload{took: a.took}
		if err != nil || a.status != http.StatusOK {
			u.failure = l.name + ": " + got(a, err)
		}
		now := p.settled(ctx, before, l.footprint)
		if before > now {
			u.freed = before - now
		}
		f.unloads = append(f.unloads, u)
	}
	f.after, _, _ = p.used()
	return f
}

// settled reads the used memory until it has fallen by half of want below
// before, or the settle time is over.
func (p *gpuProbe) settled(ctx context.Context, before, want uint64) uint64 {
	deadline := time.Now().Add(p.settle)
	for {
		now, _, err := p.used()
		if err != nil || now+want/2 <= before || !time.Now().Before(deadline) {
			return now
		}
		select {
		case <-ctx.Done():
			return now
		case <-time.After(min(100*time.Millisecond, p.settle)):
		}
	}
}

// results judges the findings: one Result per GPU check name.
func (f gpuFindings) results(p *gpuProbe) []Result {
	var out []Result
	add := func(name string, st Status, d time.Duration, detail string) {
		out = append(out, Result{Name: name, Status: st, Detail: detail, DurationMS: millis(d)})
	}
	if f.memErr != nil {
		for _, n := range []string{nameGPUFootprint, nameGPUFit, nameGPUOOM, nameGPUUnload, nameGPUTimes} {
			add(n, Skip, 0, "the GPU memory could not be read: "+f.memErr.Error())
		}
		return out
	}
	n := len(f.loads)
	var sum, lo, hi uint64
	var loadTimes, unloadTimes []time.Duration
	for i, l := range f.loads {
		sum += l.footprint
		if i == 0 || l.footprint < lo {
			lo = l.footprint
		}
		hi = max(hi, l.footprint)
		loadTimes = append(loadTimes, l.took)
	}
	for _, u := range f.unloads {
		unloadTimes = append(unloadTimes, u.took)
	}
	var mean uint64
	if n > 0 {
		mean = sum / uint64(n)
	}
	free := uint64(0)
	if f.total > f.peak {
		free = f.total - f.peak
	}

	// Footprint.
	switch {
	case n == 0:
		add(nameGPUFootprint, Fail, 0, "the first copy did not load: "+f.refusal)
	case mean == 0:
		add(nameGPUFootprint, Warn, 0, fmt.Sprintf("%d copies loaded but GPU memory did not grow: does the model run on the CPU?", n))
	default:
		add(nameGPUFootprint, Pass, 0, fmt.Sprintf("%s per copy (min %s, max %s, %d copies); %s of %s used before the first load",
			bytesText(mean), bytesText(lo), bytesText(hi), n, bytesText(f.baseline), bytesText(f.total)))
	}

	// How many fit.
	why := map[string]string{
		"507":       "then the container answered 507",
		"threshold": fmt.Sprintf("then used memory passed the threshold (%.0f%%)", p.threshold*100),
		"max":       fmt.Sprintf("the limit of %d copies, before the GPU filled", p.max),
		"refused":   "then a load failed",
	}[f.stop]
	fit := fmt.Sprintf("%d copies loaded (%s of %s used), %s", n, bytesText(f.peak), bytesText(f.total), why)
	if n > 0 {
		add(nameGPUFit, Pass, 0, fit)
	} else {
		add(nameGPUFit, Fail, 0, fit)
	}

	// What running out of memory answers.
	full := n > 0 && (free < 2*mean || float64(f.peak) > 0.9*float64(f.total))
	switch {
	case f.stop == "507":
		add(nameGPUOOM, Pass, 0, fmt.Sprintf("copy %d: %s (%s free)", n+1, f.refusal, bytesText(free)))
	case f.stop == "refused" && full:
		add(nameGPUOOM, Fail, 0, fmt.Sprintf("copy %d, with %s of %s GPU memory free, answered %s; a multi-model container must answer 507 when it is out of memory, "+
			"so that mce (and SageMaker) unload the least recently used model and try again — this container's loads will fail once the GPU is full "+
			"(a PyTorch server: catch torch.OutOfMemoryError and answer 507)", n+1, bytesText(free), bytesText(f.total), f.refusal))
	case f.stop == "refused":
		add(nameGPUOOM, Fail, 0, fmt.Sprintf("copy %d failed to load with %s of %s GPU memory still free: %s", n+1, bytesText(free), bytesText(f.total), f.refusal))
	default:
		add(nameGPUOOM, Skip, 0, "the GPU did not run out of memory: "+why)
	}

	// Unloads.
	var failures []string
	var freed uint64
	for _, u := range f.unloads {
		freed += u.freed
		if u.failure != "" {
			failures = append(failures, u.failure)
		}
	}
	kept := uint64(0)
	if f.after > f.baseline {
		kept = f.after - f.baseline
	}
	switch {
	case len(failures) > 0:
		add(nameGPUUnload, Fail, 0, fmt.Sprintf("%d of %d unloads did not answer 200: %s", len(failures), len(f.unloads), strings.Join(failures, "; ")))
	case sum == 0:
		add(nameGPUUnload, Skip, 0, "no copy took GPU memory")
	case kept > sum/4:
		add(nameGPUUnload, Fail, 0, fmt.Sprintf("after unloading all %d copies %s of the %s they took is still in use (%s before the first load, %s after the last unload); "+
			"the container keeps GPU memory after an unload, so evictions free nothing "+
			"(a PyTorch server: torch.cuda.empty_cache() after dropping the model; Triton: a known leak in several releases)",
			n, bytesText(kept), bytesText(sum), bytesText(f.baseline), bytesText(f.after)))
	default:
		add(nameGPUUnload, Pass, 0, fmt.Sprintf("unloading %d copies gave back %s of %s (%s before the first load, %s after the last unload)",
			n, bytesText(freed), bytesText(sum), bytesText(f.baseline), bytesText(f.after)))
	}

	// Times.
	if n == 0 {
		add(nameGPUTimes, Skip, 0, "nothing loaded")
	} else {
		add(nameGPUTimes, Pass, sumDur(loadTimes)+sumDur(unloadTimes), fmt.Sprintf("load p50 %s, max %s; unload p50 %s, max %s",
			formatDuration(p50(loadTimes)), formatDuration(slices.Max(loadTimes)), formatDuration(p50(unloadTimes)), formatDuration(maxDur(unloadTimes))))
	}
	return out
}

func bytesText(b uint64) string {
	if b < 1<<30 {
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	}
	return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
}

func p50(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func maxDur(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return slices.Max(d)
}

func sumDur(d []time.Duration) (t time.Duration) {
	for _, x := range d {
		t += x
	}
	return t
}

// gpuChecks runs the GPU probe on the first copy, with the model already
// checked (and unloaded) by the multi-model checks.
func (r *run) gpuChecks(ctx context.Context) {
	p := &gpuProbe{
		c: r.Checker, base: r.url(firstPort, ""), modelURL: "/opt/ml/models/" + r.modelRef + "/model",
		prefix: r.modelRef + "-gpu", mem: r.opts.GPU, indexes: r.gpuIndexes,
		max: r.opts.GPUMaxModels, threshold: r.opts.GPUThreshold, settle: r.opts.GPUSettle, timeout: r.opts.Timeout,
	}
	for _, res := range p.run(ctx).results(p) {
		r.addDur(res.Name, res.Status, res.Duration(), res.Detail)
	}
}

// engineInfo is the engine's /info, when the engine offers it.
type engineInfo interface {
	Info(ctx context.Context, options client.InfoOptions) (client.SystemInfoResult, error)
}

// prepareGPUs finds the container's GPUs and how this engine hands them
// out, and fails, naming what to install, when it cannot.
func (r *run) prepareGPUs(ctx context.Context) error {
	devs, err := r.opts.GPU.Devices()
	if err != nil {
		return err
	}
	r.gpuIndexes = gpuIndexes(r.opts.GPUs, devs)
	ri := gpu.RuntimeInfo{DefaultRuntime: "nvidia"} // an engine that does not say: its runtime's requests
	if e, ok := r.engine.(engineInfo); ok {
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		info, err := e.Info(cctx, client.InfoOptions{})
		cancel()
		if err != nil {
			return fmt.Errorf("read the engine's info: %w", err)
		}
		ri = *docker.GPURuntimeInfo(info, r.engine)
	}
	if err := gpu.Check(r.opts.GPUs, devs, nil, ri); err != nil {
		return fmt.Errorf("%w — %s", err, docker.GPUFix(err))
	}
	r.gpuDevices = docker.DeviceRequestsFor(r.opts.GPUs, ri.Mode(), devs)
	return nil
}
