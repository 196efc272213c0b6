package gpucheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/containers/mme"
)

// GPU is what the check reads of the GPUs; *gpu.Inventory is one.
type GPU interface {
	Devices() ([]gpu.Device, error)
	Memory(index int) (used, total uint64, err error)
}

// Options of a run. Zero values take the documented defaults; Dry changes
// some of them.
type Options struct {
	// Python runs the server: a python3 with PyTorch, numpy and werkzeug.
	// Default "python3".
	Python string
	// Toolkit is the folder holding the mce_serving package
	// (examples/containers/framework). Required.
	Toolkit string
	// Work is where models, the model cache and the server's log go.
	// Empty: a fresh temporary folder, removed afterwards.
	Work string
	// Models is how many models are generated: default 40 (dry: 12).
	Models int
	// Bytes is each model's weights: default 3 GiB (dry: 8 MiB).
	Bytes int64
	// Calls, Clients: the workload, default 400 calls from 4 clients; two
	// thirds of the calls go to the first third of the models.
	Calls, Clients int
	// WarmCalls is the number of warm calls timed each way. Default 100.
	WarmCalls int
	// Dry runs the models on the CPU under the server's RAM budget (room
	// for DryFit models), with NVML only where it answers.
	Dry    bool
	DryFit int
	// GPU reads the GPUs; nil means NVML.
	GPU GPU
	// GPUIndex is the GPU the server uses (CUDA's default device). Default 0.
	GPUIndex int
	// Threshold is the Manager's GPUThreshold. Default 0.9.
	Threshold float64
	// StartTimeout bounds the server's start. Default 3 minutes.
	StartTimeout time.Duration
	// Seed makes the call sequence repeatable. Default 1.
	Seed uint64
}

func (o *Options) defaults() error {
	if o.Toolkit == "" {
		return errors.New("the toolkit's folder (examples/containers/framework) is required")
	}
	if _, err := os.Stat(filepath.Join(o.Toolkit, "mce_serving", "multimodel.py")); err != nil {
		return fmt.Errorf("%s holds no mce_serving package: %w", o.Toolkit, err)
	}
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	if o.Python == "" {
		o.Python = "python3"
	}
	if o.Dry {
		def(&o.Models, 12)
		def(&o.DryFit, 4)
		if o.Bytes <= 0 {
			o.Bytes = 8 << 20
		}
	} else {
		def(&o.Models, 40)
		if o.Bytes <= 0 {
			o.Bytes = 3 << 30
		}
	}
	def(&o.Calls, 400)
	def(&o.Clients, 4)
	def(&o.WarmCalls, 100)
	if o.Threshold <= 0 || o.Threshold > 1 {
		o.Threshold = mme.DefaultGPUThreshold
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 3 * time.Minute
	}
	if o.Seed == 0 {
		o.Seed = 1
	}
	return nil
}

// Report is what a run measured. Memory figures are bytes of the GPU's
// used memory (NVML: every process on it); HaveGPU is false without NVML.
type Report struct {
	Models, Calls, Clients int
	Bytes                  int64
	Device                 string // the GPU's name, or "CPU (dry run)"
	HaveGPU                bool

	MeanResident, PeakResident float64
	Fit                        int // models resident at most when filled with GPU accounting off
	Hits, Misses               int
	HitP50, HitP99             time.Duration
	MissP50, MissP99           time.Duration
	Evictions                  int64
	Failed                     int
	FailedWhy                  map[string]int

	MemStart, MemAfterUnload, MemTotal uint64

	OOMStatuses map[int]int // non-200 answers to loads with GPU accounting off
	OOMFailed   int         // calls that failed in that phase
	LoadsOff    int         // loads answered 200 in that phase

	WarmManager, WarmDirect time.Duration // p50 of a warm call each way
	Took                    time.Duration
}

// Run generates the models, starts the server, drives it and returns the
// report. The server is stopped, and a temporary work folder removed,
// before it returns.
func Run(ctx context.Context, o Options) (*Report, error) {
	start := time.Now()
	if err := o.defaults(); err != nil {
		return nil, err
	}
	work := o.Work
	if work == "" {
		d, err := os.MkdirTemp("", "mce-gpucheck-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(d)
		work = d
	}
	work, _ = filepath.Abs(work)
	modelsDir := filepath.Join(work, "models")
	device := ""
	if o.Dry {
		device = "cpu"
	}
	if err := writeModels(modelsDir, o.Models, o.Bytes, device); err != nil {
		return nil, fmt.Errorf("generate models: %w", err)
	}
	rep := &Report{Models: o.Models, Calls: o.Calls, Clients: o.Clients, Bytes: o.Bytes, FailedWhy: map[string]int{}, OOMStatuses: map[int]int{}}

	// The GPU, when NVML answers.
	inv := o.GPU
	if inv == nil {
		i := gpu.NewInventory(nil)
		defer i.Close()
		inv = i
	}
	devs, derr := inv.Devices()
	switch {
	case derr == nil && o.GPUIndex < len(devs):
		rep.HaveGPU, rep.Device = true, devs[o.GPUIndex].Name
	case o.Dry:
		rep.Device = "CPU (dry run, no GPU memory to read)"
	case derr != nil:
		return nil, fmt.Errorf("a GPU check needs NVML (or --dry): %w", derr)
	default:
		return nil, fmt.Errorf("GPU %d: %w (%d listed)", o.GPUIndex, gpu.ErrUnknownDevice, len(devs))
	}
	if o.Dry && rep.HaveGPU {
		rep.Device += " (dry run: models on the CPU)"
	}
	mem := func() uint64 {
		if !rep.HaveGPU {
			return 0
		}
		u, t, err := inv.Memory(o.GPUIndex)
		if err == nil {
			rep.MemTotal = t
		}
		return u
	}

	fetcher, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{modelsDir}})
	if err != nil {
		return nil, err
	}
	cache, err := mme.NewCache(mme.CacheOptions{Dir: filepath.Join(work, "cache"), Prefix: "file://" + modelsDir + "/", Fetcher: fetcher})
	if err != nil {
		return nil, err
	}
	defer cache.Close()

	// Without accounting on the GPU the server's RAM budget is the limit in
	// a dry run; on a GPU it is out of the way.
	memoryMB := int64(1 << 20)
	if o.Dry {
		memoryMB = max(1, (int64(o.DryFit)*o.Bytes+o.Bytes/2)>>20)
	}
	srv, err := startServer(ctx, &o, work, cache.Dir(), memoryMB)
	if err != nil {
		return nil, err
	}
	defer srv.stop()
	rep.MemStart = mem()

	rec := &recorder{next: &http.Transport{Proxy: nil, DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 64, IdleConnTimeout: 30 * time.Second}}
	hc := &http.Client{Transport: rec}
	newManager := func(accounting bool, obs mme.Observer) (*mme.Manager, error) {
		mo := mme.ManagerOptions{Store: cache, BaseURL: func() string { return srv.base }, Client: hc, Observer: obs,
			LoadTimeout: 10 * time.Minute, Logger: zerolog.Nop(), Endpoint: "gpucheck", Variant: "v", Container: "server"}
		if accounting && rep.HaveGPU && !o.Dry {
			mo.GPU, mo.GPUIndexes, mo.GPUThreshold = inv, []int{o.GPUIndex}, o.Threshold
		}
		return mme.NewManager(mo)
	}

	// 1. The skewed workload, GPU accounting on.
	obs := &observer{}
	m, err := newManager(true, obs)
	if err != nil {
		return nil, err
	}
	var hits, misses []time.Duration
	var resSum, resN atomic.Int64
	var mu sync.Mutex
	seq := callSequence(o)
	work1 := make(chan int)
	var wg sync.WaitGroup
	for range o.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work1 {
				name := modelName(i)
				hit := slices.Contains(m.Loaded(), name)
				resSum.Add(obs.loaded.Load())
				resN.Add(1)
				t := time.Now()
				err := invoke(ctx, m, hc, srv.base, name)
				d := time.Since(t)
				mu.Lock()
				switch {
				case err != nil:
					rep.Failed++
					rep.FailedWhy[firstLine(err.Error())]++
				case hit:
					hits = append(hits, d)
				default:
					misses = append(misses, d)
				}
				mu.Unlock()
			}
		}()
	}
	for _, i := range seq {
		select {
		case work1 <- i:
		case <-ctx.Done():
		}
	}
	close(work1)
	wg.Wait()
	if err := ctx.Err(); err != nil {
		m.Close()
		return nil, err
	}
	rep.Hits, rep.Misses = len(hits), len(misses)
	rep.HitP50, rep.HitP99 = pct(hits, 50), pct(hits, 99)
	rep.MissP50, rep.MissP99 = pct(misses, 50), pct(misses, 99)
	rep.Evictions = obs.evicted.Load()
	if n := resN.Load(); n > 0 {
		rep.MeanResident = float64(resSum.Load()) / float64(n)
	}
	rep.PeakResident = float64(obs.peak.Load())

	// 2. A warm call, through the Manager and straight to the server.
	warm := modelName(0)
	var viaM, direct []time.Duration
	for range o.WarmCalls {
		t := time.Now()
		if err := invoke(ctx, m, hc, srv.base, warm); err != nil {
			return nil, fmt.Errorf("warm call through the Manager: %w", err)
		}
		viaM = append(viaM, time.Since(t))
		t = time.Now()
		if st, err := post(ctx, hc, srv.base+"/models/"+mme.ModelID(warm)+"/invoke"); err != nil || st != http.StatusOK {
			return nil, fmt.Errorf("warm call straight to the server: %d %v", st, err)
		}
		direct = append(direct, time.Since(t))
	}
	rep.WarmManager, rep.WarmDirect = pct(viaM, 50), pct(direct, 50)

	// 3. Unload everything; what is left on the GPU.
	if err := unloadAll(ctx, hc, srv.base); err != nil {
		return nil, err
	}
	m.Close()
	rep.MemAfterUnload = settle(ctx, mem)

	// 4. Fill the server, GPU accounting off: what a load that runs out
	// answers, and how many models fit.
	obs2 := &observer{}
	m2, err := newManager(false, obs2)
	if err != nil {
		return nil, err
	}
	rec.reset()
	for i := range o.Models {
		if err := invoke(ctx, m2, hc, srv.base, modelName(i)); err != nil {
			rep.OOMFailed++
		}
	}
	rep.Fit = int(obs2.peak.Load())
	rep.OOMStatuses, rep.LoadsOff = rec.loadStatuses()
	if err := unloadAll(ctx, hc, srv.base); err != nil {
		return nil, err
	}
	m2.Close()
	rep.Took = time.Since(start)
	return rep, nil
}

// callSequence is the workload: Calls model indexes, two thirds of them
// from the first third of the models.
func callSequence(o Options) []int {
	r := rand.New(rand.NewPCG(o.Seed, 2))
	popular := max(1, o.Models/3)
	out := make([]int, o.Calls)
	for i := range out {
		if r.IntN(3) < 2 || popular == o.Models {
			out[i] = r.IntN(popular)
		} else {
			out[i] = popular + r.IntN(o.Models-popular)
		}
	}
	return out
}

// invoke is one call as mce's pipeline makes it: a lease on the model,
// POST /models/<id>/invoke, and on 507 the Manager frees memory and the
// call is tried again (at most 3 times).
func invoke(ctx context.Context, m *mme.Manager, hc *http.Client, base, name string) error {
	lease, err := m.Acquire(ctx, name)
	if err != nil {
		return err
	}
	defer lease.Release()
	for attempt := 0; ; attempt++ {
		st, err := post(ctx, hc, base+"/models/"+lease.ModelID()+"/invoke")
		switch {
		case err != nil:
			return err
		case st == http.StatusOK:
			return nil
		case st == http.StatusInsufficientStorage && attempt < 3:
			if err := lease.OutOfMemory(ctx); err != nil {
				return err
			}
		default:
			return fmt.Errorf("invoke answered %d", st)
		}
	}
}

var sample = []byte("[[1.0, 2.0, 3.0, 4.0]]")

func post(ctx context.Context, hc *http.Client, url string) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(sample))
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		return 0, err
	}
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// unloadAll unloads every model the server lists.
func unloadAll(ctx context.Context, hc *http.Client, base string) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, base+"/models", nil)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("list models: %w", err)
	}
	var list struct {
		Models []struct {
			ModelName string `json:"modelName"`
		} `json:"models"`
	}
	err = decodeJSON(resp.Body, &list)
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("list models: %w", err)
	}
	for _, mdl := range list.Models {
		req, _ := http.NewRequestWithContext(ctx, http.MethodDelete, base+"/models/"+mdl.ModelName, nil)
		resp, err := hc.Do(req)
		if err != nil {
			return fmt.Errorf("unload %s: %w", mdl.ModelName, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	return nil
}

// settle reads the memory until two readings 500 ms apart agree (at most 5 s).
func settle(ctx context.Context, mem func() uint64) uint64 {
	last := mem()
	for range 10 {
		select {
		case <-ctx.Done():
			return last
		case <-time.After(500 * time.Millisecond):
		}
		now := mem()
		if now == last {
			return now
		}
		last = now
	}
	return last
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, len(s)*p/100)]
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:200] + "…"
	}
	return s
}
