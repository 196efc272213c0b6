//go:build cgo

package check_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/NVIDIA/go-nvml/pkg/nvml"
	"github.com/NVIDIA/go-nvml/pkg/nvml/mock"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/check"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
	"github.com/mce-run/mce/internal/testenv"
)

// TestGPUsOnAnEngineWithoutThem: with a GPU on the host (go-nvml's mock)
// but a real engine that has neither the NVIDIA runtime nor CDI, the check
// stops before starting anything, naming what is missing.
func TestGPUsOnAnEngineWithoutThem(t *testing.T) {
	cli := testenv.Docker(t)
	probe := testenv.Image(t, "probe")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	info, err := cli.Info(ctx, client.InfoOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := docker.GPURuntimeInfo(info, cli).Mode(); m != gpu.ModeNone {
		t.Skipf("this engine hands out GPUs (%s): nothing to refuse", m)
	}
	dev := &mock.Device{
		GetUUIDFunc:       func() (string, nvml.Return) { return "GPU-00000000-0000-0000-0000-000000000000", nvml.SUCCESS },
		GetNameFunc:       func() (string, nvml.Return) { return "NVIDIA H100 80GB HBM3", nvml.SUCCESS },
		GetMemoryInfoFunc: func() (nvml.Memory, nvml.Return) { return nvml.Memory{Total: 80 << 30, Used: 1 << 29}, nvml.SUCCESS },
	}
	inv := gpu.NewInventory(&mock.Interface{
		InitFunc:                   func() nvml.Return { return nvml.SUCCESS },
		ShutdownFunc:               func() nvml.Return { return nvml.SUCCESS },
		DeviceGetCountFunc:         func() (int, nvml.Return) { return 1, nvml.SUCCESS },
		DeviceGetHandleByIndexFunc: func(int) (nvml.Device, nvml.Return) { return dev, nvml.SUCCESS },
	})
	defer inv.Close()
	c, err := check.New(cli, check.Options{Image: probe, GPUs: gpu.Request{All: true}, GPU: inv})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Run(ctx)
	if !errors.Is(err, gpu.ErrNoRuntime) {
		t.Fatalf("Run = %v, want an error wrapping ErrNoRuntime", err)
	}
	t.Log(err)
	if n := leftovers(t, cli); n > 0 {
		t.Errorf("the check left %d containers and networks behind", n)
	}
}
