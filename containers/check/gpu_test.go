//go:build cgo

package check

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"

	"github.com/mce-run/mce/containers/gpu"
)

const gib = 1 << 30

// fakeGPUServer is a multi-model container on one fake GPU: a load takes
// footprint bytes of the GPU, or answers oomStatus when they do not fit; an
// unload gives them back unless leak is set (PyTorch without
// torch.cuda.empty_cache()). The GPU is read through go-nvml's mock.
type fakeGPUServer struct {
	footprint, total uint64
	context          uint64 // the CUDA context, used before any load
	oomStatus        int
	leak             bool

	mu     sync.Mutex
	used   uint64
	models map[string]uint64
}

func newFakeGPUServer(t *testing.T, s *fakeGPUServer) (*httptest.Server, *gpu.Inventory) {
	s.models = map[string]uint64{}
	s.used = s.context
	srv := httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(srv.Close)
	dev := &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return "GPU-00000000-0000-0000-0000-000000000000", nvml.SUCCESS },
		GetNameFunc: func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			s.mu.Lock()
			defer s.mu.Unlock()
			return nvml.Memory{Total: s.total, Used: s.used, Free: s.total - s.used}, nvml.SUCCESS
		},
	}
	lib := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i != 0 {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return dev, nvml.SUCCESS
		},
	}
	inv := gpu.NewInventory(lib)
	t.Cleanup(func() { inv.Close() })
	return srv, inv
}

func (s *fakeGPUServer) serve(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case r.Method == http.MethodPost && r.URL.Path == "/models":
		var req struct {
			Name string `json:"model_name"`
			URL  string `json:"url"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Name == "" || req.URL != "/opt/ml/models/abc/model" {
			http.Error(w, "bad load request", http.StatusBadRequest)
			return
		}
		if _, ok := s.models[req.Name]; ok {
			http.Error(w, "already loaded", http.StatusConflict)
			return
		}
		if s.used+s.footprint > s.total {
			http.Error(w, `{"code":`+fmt.Sprint(s.oomStatus)+`,"message":"CUDA out of memory"}`, s.oomStatus)
			return
		}
		s.used += s.footprint
		s.models[req.Name] = s.footprint
		fmt.Fprintf(w, `{"status":"Model %s loaded"}`, req.Name)
	case r.Method == http.MethodDelete && strings.HasPrefix(r.URL.Path, "/models/"):
		name := strings.TrimPrefix(r.URL.Path, "/models/")
		fp, ok := s.models[name]
		if !ok {
			http.Error(w, "not loaded", http.StatusNotFound)
			return
		}
		delete(s.models, name)
		if !s.leak {
			s.used -= fp
		}
		fmt.Fprintf(w, `{"status":"Model %s unloaded"}`, name)
	default:
		http.NotFound(w, r)
	}
}

func probeAgainst(t *testing.T, s *fakeGPUServer, threshold float64, max int) (map[string]Result, []Result) {
	t.Helper()
	srv, inv := newFakeGPUServer(t, s)
	p := &gpuProbe{
		c: &Checker{http: newHTTPClient()}, base: srv.URL, modelURL: "/opt/ml/models/abc/model", prefix: "abc-gpu",
		mem: inv, indexes: []int{0}, max: max, threshold: threshold, settle: 50 * time.Millisecond, timeout: 5 * time.Second,
	}
	res := p.run(context.Background()).results(p)
	by := map[string]Result{}
	for _, r := range res {
		by[r.Name] = r
	}
	if len(by) != 5 {
		t.Fatalf("%d results, want the 5 GPU checks: %+v", len(res), res)
	}
	return by, res
}

func TestGPUProbe(t *testing.T) {
	h100 := func() *fakeGPUServer {
		return &fakeGPUServer{footprint: 3 * gib, total: 80 * gib, context: gib / 2, oomStatus: http.StatusInsufficientStorage}
	}
	tests := []struct {
		name       string
		server     func() *fakeGPUServer
		threshold  float64
		max        int
		want       map[string]Status
		wantDetail map[string]string
	}{
		{
			name: "507 on out of memory, unloads give memory back", server: h100, threshold: 1, max: 64,
			want:       map[string]Status{nameGPUFootprint: Pass, nameGPUFit: Pass, nameGPUOOM: Pass, nameGPUUnload: Pass, nameGPUTimes: Pass},
			wantDetail: map[string]string{nameGPUFootprint: "3.0 GiB per copy", nameGPUFit: "26 copies loaded", nameGPUOOM: "copy 27: 507", nameGPUUnload: "gave back 78.0 GiB of 78.0 GiB"},
		},
		{
			name: "unloads keep the memory (leak)", threshold: 1, max: 64,
			server:     func() *fakeGPUServer { s := h100(); s.leak = true; return s },
			want:       map[string]Status{nameGPUFootprint: Pass, nameGPUFit: Pass, nameGPUOOM: Pass, nameGPUUnload: Fail},
			wantDetail: map[string]string{nameGPUUnload: "78.0 GiB of the 78.0 GiB they took is still in use"},
		},
		{
			name: "500 on out of memory is flagged", threshold: 1, max: 64,
			server:     func() *fakeGPUServer { s := h100(); s.oomStatus = 500; return s },
			want:       map[string]Status{nameGPUFit: Pass, nameGPUOOM: Fail, nameGPUUnload: Pass},
			wantDetail: map[string]string{nameGPUOOM: "copy 27, with 1.5 GiB of 80.0 GiB GPU memory free, answered 500"},
		},
		{
			name: "threshold stops before the GPU fills", server: h100, threshold: 0.5, max: 64,
			want:       map[string]Status{nameGPUFit: Pass, nameGPUOOM: Skip, nameGPUUnload: Pass},
			wantDetail: map[string]string{nameGPUFit: "14 copies loaded (42.5 GiB of 80.0 GiB used), then used memory passed the threshold (50%)"},
		},
		{
			name: "the copy limit", server: h100, threshold: 1, max: 3,
			want:       map[string]Status{nameGPUFit: Pass, nameGPUOOM: Skip},
			wantDetail: map[string]string{nameGPUFit: "3 copies loaded (9.5 GiB of 80.0 GiB used), the limit of 3 copies"},
		},
		{
			name: "a model bigger than the GPU", threshold: 1, max: 64,
			server: func() *fakeGPUServer { s := h100(); s.footprint = 100 * gib; return s },
			want:   map[string]Status{nameGPUFootprint: Fail, nameGPUFit: Fail, nameGPUUnload: Skip, nameGPUTimes: Skip},
		},
		{
			name: "a model on the CPU", threshold: 1, max: 4,
			server: func() *fakeGPUServer { s := h100(); s.footprint = 0; return s },
			want:   map[string]Status{nameGPUFootprint: Warn, nameGPUUnload: Skip},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			by, _ := probeAgainst(t, tt.server(), tt.threshold, tt.max)
			for name, st := range tt.want {
				if by[name].Status != st {
					t.Errorf("%s: %s (%s), want %s", name, by[name].Status, by[name].Detail, st)
				}
			}
			for name, d := range tt.wantDetail {
				if !strings.Contains(by[name].Detail, d) {
					t.Errorf("%s: detail %q does not say %q", name, by[name].Detail, d)
				}
			}
		})
	}
}

// TestGPUProbeReport prints the GPU lines of `mce check --gpus all` as they
// read against a stand-in: a PyTorch-like server on an H100 that answers 500
// on out-of-memory and keeps memory after unloads (run with -v to see it).
func TestGPUProbeReport(t *testing.T) {
	_, res := probeAgainst(t, &fakeGPUServer{footprint: 3 * gib, total: 80 * gib, context: gib / 2, oomStatus: 500, leak: true}, 1, 64)
	var b strings.Builder
	for _, r := range res {
		b.WriteString(FormatResult(r))
	}
	t.Log("\n" + b.String())
	if !strings.Contains(b.String(), "FAIL  gpu: out of memory answers 507") || !strings.Contains(b.String(), "FAIL  gpu: unload gives memory back") {
		t.Errorf("the report does not fail the 500 and the leak:\n%s", b.String())
	}
}

func TestGPUNoGPU(t *testing.T) {
	noLib := &mock.Interface{InitFunc: func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }}
	noGPU := &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return 0, nvml.SUCCESS },
	}
	for _, tt := range []struct {
		name string
		lib  nvml.Interface
		want error
	}{{"no driver", noLib, gpu.ErrNoDriver}, {"no GPU", noGPU, gpu.ErrNoGPU}} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(nil, Options{Image: "img", ModelData: "m.tar.gz", GPUs: gpu.Request{All: true}, GPU: gpu.NewInventory(tt.lib)})
			if !errors.Is(err, tt.want) {
				t.Errorf("New = %v, want %v", err, tt.want)
			}
		})
	}
	if _, err := New(nil, Options{Image: "img", GPU: gpu.NewInventory(noLib)}); err != nil {
		t.Errorf("no GPUs asked, New = %v", err)
	}
}

func TestGPUIndexes(t *testing.T) {
	devs := []gpu.Device{{Index: 0, UUID: "GPU-a"}, {Index: 1, UUID: "GPU-b"}, {Index: 2, UUID: "GPU-c"}}
	for _, tt := range []struct {
		req  string
		want string
	}{{"all", "[0 1 2]"}, {"2", "[0 1]"}, {"device=2", "[2]"}, {"GPU-B,0", "[0 1]"}} {
		req, err := gpu.ParseRequest(tt.req)
		if err != nil {
			t.Fatal(err)
		}
		if got := fmt.Sprint(gpuIndexes(req, devs)); got != tt.want {
			t.Errorf("gpuIndexes(%s) = %s, want %s", tt.req, got, tt.want)
		}
	}
}
