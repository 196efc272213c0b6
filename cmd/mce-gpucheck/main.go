// Command mce-gpucheck is the GPU check for a machine without Docker: it
// runs the toolkit's multi-model server as a plain process and drives it
// through mce's multi-model Manager with generated models
// (internal/gpucheck). scripts/gpu-check.sh builds and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/mce-run/mce/internal/gpucheck"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:])
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "mce-gpucheck:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string) error {
	var o gpucheck.Options
	var gib float64
	fs := flag.NewFlagSet("mce-gpucheck", flag.ContinueOnError)
	fs.StringVar(&o.Toolkit, "toolkit", "examples/containers/framework", "the folder holding the mce_serving package")
	fs.StringVar(&o.Python, "python", "python3", "a python3 with PyTorch (CUDA), numpy and werkzeug")
	fs.StringVar(&o.Work, "work", "", "work folder (models, cache, server.log); default a temporary one, removed")
	fs.IntVar(&o.Models, "models", 0, "models generated (default 40; dry 12)")
	fs.Float64Var(&gib, "gib", 0, "each model's weights in GiB (default 3; dry 8 MiB)")
	fs.IntVar(&o.Calls, "calls", 400, "calls in the workload")
	fs.IntVar(&o.Clients, "clients", 4, "concurrent clients")
	fs.IntVar(&o.WarmCalls, "warm-calls", 100, "warm calls timed each way (Manager, direct)")
	fs.IntVar(&o.GPUIndex, "gpu", 0, "the GPU (NVML index) the server's CUDA default device is")
	fs.Float64Var(&o.Threshold, "threshold", 0.9, "the Manager's GPU memory threshold")
	fs.BoolVar(&o.Dry, "dry", false, "tiny models on the CPU under a RAM budget; NVML optional")
	fs.IntVar(&o.DryFit, "dry-fit", 4, "dry: models the RAM budget holds")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if gib > 0 {
		o.Bytes = int64(gib * (1 << 30))
	}
	rep, err := gpucheck.Run(ctx, o)
	if err != nil {
		return err
	}
	return rep.Write(os.Stdout)
}
