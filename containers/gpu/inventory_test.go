//go:build cgo

package gpu

import (
	"errors"
	"fmt"
	"reflect"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
)

const gib = 1 << 30

// fakeDevice is the state behind one mock GPU.
type fakeDevice struct {
	uuid, name  string
	total, used uint64
	uuidRet     nvml.Return
	nameRet     nvml.Return
	memRet      nvml.Return
}

func newFake(i int) *fakeDevice {
	return &fakeDevice{
		uuid:  fmt.Sprintf("GPU-%08d-0000-0000-0000-000000000000", i),
		name:  "NVIDIA H100 80GB HBM3",
		total: 80 * gib,
		used:  uint64(i+1) * gib,
	}
}

func (f *fakeDevice) mock() *mock.Device {
	ret := func(r nvml.Return) nvml.Return {
		if r == 0 {
			return nvml.SUCCESS
		}
		return r
	}
	return &mock.Device{
		GetUUIDFunc: func() (string, nvml.Return) { return f.uuid, ret(f.uuidRet) },
		GetNameFunc: func() (string, nvml.Return) { return f.name, ret(f.nameRet) },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: f.total, Used: f.used, Free: f.total - f.used}, ret(f.memRet)
		},
	}
}

func (f *fakeDevice) want(i int) Device {
	return Device{Index: i, UUID: f.uuid, Name: f.name, MemoryTotal: f.total, MemoryUsed: f.used, MemoryFree: f.total - f.used}
}

// fakeLib returns a mock NVML over fakes; Init and Shutdown succeed.
func fakeLib(fakes ...*fakeDevice) *mock.Interface {
	devs := make([]*mock.Device, len(fakes))
	for i, f := range fakes {
		devs[i] = f.mock()
	}
	return &mock.Interface{
		InitFunc:           func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:       func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc: func() (int, nvml.Return) { return len(devs), nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(i int) (nvml.Device, nvml.Return) {
			if i < 0 || i >= len(devs) {
				return nil, nvml.ERROR_INVALID_ARGUMENT
			}
			return devs[i], nvml.SUCCESS
		},
	}
}

func fakes(n int) []*fakeDevice {
	fs := make([]*fakeDevice, n)
	for i := range fs {
		fs[i] = newFake(i)
	}
	return fs
}

func TestInventoryDevices(t *testing.T) {
	tests := []struct {
		name    string
		lib     func() *mock.Interface
		want    []Device
		wantIs  []error // errors.Is targets; nil means success
		wantMsg string
	}{
		{name: "no GPU", lib: func() *mock.Interface { return fakeLib() }, want: []Device{}},
		{
			name: "one GPU",
			lib:  func() *mock.Interface { return fakeLib(newFake(0)) },
			want: []Device{newFake(0).want(0)},
		},
		{
			name: "four GPUs",
			lib:  func() *mock.Interface { return fakeLib(fakes(4)...) },
			want: []Device{newFake(0).want(0), newFake(1).want(1), newFake(2).want(2), newFake(3).want(3)},
		},
		{
			name: "memory not supported",
			lib: func() *mock.Interface {
				f := newFake(0)
				f.memRet = nvml.ERROR_NOT_SUPPORTED
				return fakeLib(f)
			},
			want: []Device{{Index: 0, UUID: newFake(0).uuid, Name: newFake(0).name}},
		},
		{
			name: "library missing",
			lib: func() *mock.Interface {
				l := fakeLib(newFake(0))
				l.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
				return l
			},
			wantIs:  []error{ErrNoDriver, nvml.ERROR_LIBRARY_NOT_FOUND},
			wantMsg: "no NVIDIA driver found on this host: ERROR_LIBRARY_NOT_FOUND",
		},
		{
			name: "driver not loaded",
			lib: func() *mock.Interface {
				l := fakeLib(newFake(0))
				l.InitFunc = func() nvml.Return { return nvml.ERROR_DRIVER_NOT_LOADED }
				return l
			},
			wantIs:  []error{ErrNoDriver, nvml.ERROR_DRIVER_NOT_LOADED},
			wantMsg: "no NVIDIA driver found on this host: ERROR_DRIVER_NOT_LOADED",
		},
		{
			name: "count fails",
			lib: func() *mock.Interface {
				l := fakeLib(newFake(0))
				l.DeviceGetCountFunc = func() (int, nvml.Return) { return 0, nvml.ERROR_UNKNOWN }
				return l
			},
			wantIs:  []error{nvml.ERROR_UNKNOWN},
			wantMsg: "count GPUs: ERROR_UNKNOWN",
		},
		{
			name: "handle fails",
			lib: func() *mock.Interface {
				l := fakeLib(fakes(2)...)
				l.DeviceGetHandleByIndexFunc = func(int) (nvml.Device, nvml.Return) { return nil, nvml.ERROR_GPU_IS_LOST }
				return l
			},
			wantIs:  []error{nvml.ERROR_GPU_IS_LOST},
			wantMsg: "GPU 0: get handle: ERROR_GPU_IS_LOST",
		},
		{
			name: "uuid fails",
			lib: func() *mock.Interface {
				fs := fakes(2)
				fs[1].uuidRet = nvml.ERROR_UNKNOWN
				return fakeLib(fs...)
			},
			wantIs:  []error{nvml.ERROR_UNKNOWN},
			wantMsg: "GPU 1: read UUID: ERROR_UNKNOWN",
		},
		{
			name: "name fails",
			lib: func() *mock.Interface {
				fs := fakes(2)
				fs[1].nameRet = nvml.ERROR_UNKNOWN
				return fakeLib(fs...)
			},
			wantIs:  []error{nvml.ERROR_UNKNOWN},
			wantMsg: "GPU 1: read name: ERROR_UNKNOWN",
		},
		{
			name: "memory fails",
			lib: func() *mock.Interface {
				fs := fakes(4)
				fs[3].memRet = nvml.ERROR_GPU_IS_LOST
				return fakeLib(fs...)
			},
			wantIs:  []error{nvml.ERROR_GPU_IS_LOST},
			wantMsg: "GPU 3: read memory: ERROR_GPU_IS_LOST",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inv := NewInventory(tt.lib())
			got, err := inv.Devices()
			if tt.wantIs == nil {
				if err != nil {
					t.Fatalf("Devices(): %v", err)
				}
				if !reflect.DeepEqual(got, tt.want) {
					t.Errorf("Devices() = %+v, want %+v", got, tt.want)
				}
				return
			}
			if err == nil {
				t.Fatalf("Devices() = %+v, want error", got)
			}
			for _, target := range tt.wantIs {
				if !errors.Is(err, target) {
					t.Errorf("Devices() error %q is not %v", err, target)
				}
			}
			if tt.wantIs[0] != ErrNoDriver && errors.Is(err, ErrNoDriver) {
				t.Errorf("Devices() error %q wraps ErrNoDriver, but the driver answered", err)
			}
			if err.Error() != tt.wantMsg {
				t.Errorf("Devices() error = %q, want %q", err, tt.wantMsg)
			}
		})
	}
}

func TestInventoryMemory(t *testing.T) {
	fs := fakes(2)
	lib := fakeLib(fs...)
	inv := NewInventory(lib)

	used, total, err := inv.Memory(1)
	if err != nil || used != 2*gib || total != 80*gib {
		t.Fatalf("Memory(1) = %d, %d, %v; want %d, %d, nil", used, total, err, 2*gib, 80*gib)
	}
	fs[1].used = 30 * gib // a model was loaded: the next reading sees it
	used, total, err = inv.Memory(1)
	if err != nil || used != 30*gib || total != 80*gib {
		t.Fatalf("Memory(1) after load = %d, %d, %v; want %d, %d, nil", used, total, err, 30*gib, 80*gib)
	}

	errTests := []struct {
		name   string
		index  int
		setup  func()
		wantIs error
	}{
		{name: "index past the end", index: 2, wantIs: ErrUnknownDevice},
		{name: "negative index", index: -1, wantIs: ErrUnknownDevice},
		{name: "read fails", index: 0, setup: func() { fs[0].memRet = nvml.ERROR_GPU_IS_LOST }, wantIs: nvml.ERROR_GPU_IS_LOST},
	}
	for _, tt := range errTests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.setup != nil {
				tt.setup()
			}
			used, total, err := inv.Memory(tt.index)
			if !errors.Is(err, tt.wantIs) {
				t.Errorf("Memory(%d) = %d, %d, %v; want error %v", tt.index, used, total, err, tt.wantIs)
			}
		})
	}

	t.Run("no driver", func(t *testing.T) {
		l := fakeLib(newFake(0))
		l.InitFunc = func() nvml.Return { return nvml.ERROR_LIBRARY_NOT_FOUND }
		_, _, err := NewInventory(l).Memory(0)
		if !errors.Is(err, ErrNoDriver) {
			t.Errorf("Memory(0) error = %v, want ErrNoDriver", err)
		}
	})
}

func TestInventoryInitOnce(t *testing.T) {
	tests := []struct {
		name    string
		initRet nvml.Return
	}{
		{"succeeds", nvml.SUCCESS},
		{"fails", nvml.ERROR_LIBRARY_NOT_FOUND},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib := fakeLib(fakes(4)...)
			lib.InitFunc = func() nvml.Return { return tt.initRet }
			inv := NewInventory(lib)
			if got := len(lib.InitCalls()); got != 0 {
				t.Fatalf("NewInventory called Init %d times, want 0 (lazy)", got)
			}
			var wg sync.WaitGroup
			errs := make([]error, 16)
			for g := range errs {
				wg.Go(func() {
					if g%2 == 0 {
						_, errs[g] = inv.Devices()
					} else {
						_, _, errs[g] = inv.Memory(g % 4)
					}
				})
			}
			wg.Wait()
			if got := len(lib.InitCalls()); got != 1 {
				t.Errorf("Init called %d times, want 1", got)
			}
			for g, err := range errs {
				if (err == nil) != (tt.initRet == nvml.SUCCESS) {
					t.Errorf("call %d: error %v with Init returning %v", g, err, tt.initRet)
				}
			}
		})
	}
}

func TestInventoryClose(t *testing.T) {
	tests := []struct {
		name          string
		initRet       nvml.Return
		shutdownRet   nvml.Return
		use           bool
		wantShutdowns int
		wantErr       error
	}{
		{name: "never used", initRet: nvml.SUCCESS, shutdownRet: nvml.SUCCESS, use: false, wantShutdowns: 0},
		{name: "used", initRet: nvml.SUCCESS, shutdownRet: nvml.SUCCESS, use: true, wantShutdowns: 1},
		{name: "init failed", initRet: nvml.ERROR_LIBRARY_NOT_FOUND, shutdownRet: nvml.SUCCESS, use: true, wantShutdowns: 0},
		{name: "shutdown fails", initRet: nvml.SUCCESS, shutdownRet: nvml.ERROR_UNKNOWN, use: true, wantShutdowns: 1, wantErr: nvml.ERROR_UNKNOWN},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lib := fakeLib(newFake(0))
			lib.InitFunc = func() nvml.Return { return tt.initRet }
			lib.ShutdownFunc = func() nvml.Return { return tt.shutdownRet }
			inv := NewInventory(lib)
			if tt.use {
				_, _ = inv.Devices()
			}
			if err := inv.Close(); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil) {
				t.Errorf("Close() = %v, want %v", err, tt.wantErr)
			}
			if err := inv.Close(); err != nil {
				t.Errorf("second Close() = %v, want nil", err)
			}
			if got := len(lib.ShutdownCalls()); got != tt.wantShutdowns {
				t.Errorf("Shutdown called %d times, want %d", got, tt.wantShutdowns)
			}
			if _, err := inv.Devices(); !errors.Is(err, ErrClosed) {
				t.Errorf("Devices() after Close = %v, want ErrClosed", err)
			}
			if _, _, err := inv.Memory(0); !errors.Is(err, ErrClosed) {
				t.Errorf("Memory(0) after Close = %v, want ErrClosed", err)
			}
			if tt.use == false && len(lib.InitCalls()) != 0 {
				t.Errorf("Init called after Close")
			}
		})
	}
}

func TestInventoryCloseWaitsForCalls(t *testing.T) {
	entered := make(chan struct{})
	release := make(chan struct{})
	var inFlight atomic.Bool
	lib := fakeLib(newFake(0))
	lib.DeviceGetCountFunc = func() (int, nvml.Return) {
		inFlight.Store(true)
		close(entered)
		<-release
		inFlight.Store(false)
		return 1, nvml.SUCCESS
	}
	shutdown := make(chan bool, 1) // whether a call was in flight
	lib.ShutdownFunc = func() nvml.Return {
		shutdown <- inFlight.Load()
		return nvml.SUCCESS
	}
	inv := NewInventory(lib)

	done := make(chan error)
	go func() {
		_, err := inv.Devices()
		done <- err
	}()
	<-entered
	closed := make(chan error)
	go func() { closed <- inv.Close() }()

	// Close must not shut NVML down while Devices is blocked; give a wrong
	// implementation time to do so, then let Devices finish.
	select {
	case <-shutdown:
		t.Error("Shutdown ran while a Devices call was in flight")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Devices(): %v", err)
	}
	if err := <-closed; err != nil {
		t.Fatalf("Close(): %v", err)
	}
	if len(lib.ShutdownCalls()) != 1 {
		t.Errorf("Shutdown called %d times, want 1", len(lib.ShutdownCalls()))
	}
}

func TestNewInventoryNilUsesSystemLibrary(t *testing.T) {
	inv := NewInventory(nil)
	if got, want := fmt.Sprintf("%T", inv.lib), "*nvml.library"; got != want {
		t.Errorf("NewInventory(nil) lib is %s, want %s", got, want)
	}
}

func TestUtilization(t *testing.T) {
	dev := &mock.Device{
		GetUtilizationRatesFunc: func() (nvml.Utilization, nvml.Return) { return nvml.Utilization{Gpu: 73, Memory: 10}, nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) {
			return nvml.Memory{Total: 80 << 30, Used: 20 << 30, Free: 60 << 30}, nvml.SUCCESS
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
	inv := NewInventory(lib)
	defer inv.Close()
	g, m, err := inv.Utilization(0)
	if err != nil || g != 73 || m != 25 {
		t.Errorf("Utilization(0) = %v, %v, %v; want 73, 25", g, m, err)
	}
	if _, _, err := inv.Utilization(3); !errors.Is(err, ErrUnknownDevice) {
		t.Errorf("Utilization(3): %v", err)
	}
}
