package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mce-run/mce/containers/check"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
)

type checkFlags struct {
	modelData    string
	env          []string
	input        string
	contentType  string
	accept       string
	json         bool
	healthWindow time.Duration
	timeout      time.Duration
	multiModel   string
	gpus         string
	gpuThreshold float64
	gpuMax       int
	// gpu reads the host's GPUs; nil means NVML. Tests set a stand-in.
	gpu check.GPUInventory
}

func newCheckCmd() *cobra.Command {
	var f checkFlags
	cmd := &cobra.Command{
		Use:   "check IMAGE",
		Short: "Check that an image honours SageMaker's inference container contract",
		Long: `check runs IMAGE on the local Docker engine as SageMaker would and reports, one line per
rule, whether it honours SageMaker's inference container contract, with timings:

  image present, labels   com.amazonaws.sagemaker.capabilities.accept-bind-to-port=true (and
                          multi-models=true when checked as a multi-model container)
  starts with serve       the container runs after "docker run IMAGE serve" (else: its exit
                          status and last log lines)
  /ping                   200 within the health window (--health-window), and how long it took
  /invocations            the sample (--input, --content-type, --accept) answers 200: latency,
                          content type and size; skipped when no sample is given
  multi-model API         when the image is labelled multi-models=true and --model-data names a
                          model artifact (.tar.gz): load 200, load again 409, list, get, invoke,
                          unload 200, invoke and get after unload 404
  oversize body           7 MiB: 4xx passes; 2xx, 5xx or a dropped connection warn
  wrong content type      4xx passes (the SageMaker toolkits answer 415); 2xx warns; 5xx fails
                          (both: the container must keep running and answering /ping)
  listens only on 8080    no TCP listener on any other port (read from the container's network
                          namespace in /proc, so it works for FROM scratch images; skipped when
                          the engine runs on another machine)
  gpu (with --gpus)       for a multi-model image: copies of the --model-data model are loaded under
                          distinct names until the container refuses one (or --gpu-threshold of the
                          GPU memory is used, or --gpu-max-models are loaded), then all unloaded,
                          reading NVML after each call: each copy's GPU footprint, how many fit,
                          whether running out answers 507 (what mce evicts on; 500 fails), whether
                          unloads give the memory back (a leak fails), load and unload times
  two copies              a second copy in the first one's network namespace with
                          SAGEMAKER_BIND_TO_PORT=8081, as in a multi-container endpoint: both answer
                          /ping (a fixed second port collides here)

With --gpus the container gets those GPUs (through the NVIDIA runtime or CDI, whichever the engine
offers); a host without them (no driver, no GPU) or an engine that cannot hand them out is exit
status 2, before anything starts.

The container gets SAGEMAKER_BIND_TO_PORT=8080, SAGEMAKER_SAFE_PORT_RANGE, the --env variables, and
the model data read-only at /opt/ml/model (multi-model: /opt/ml/models/<hash>/model with
SAGEMAKER_MULTI_MODEL=true), on a bridge network of its own. Everything check creates is labelled
io.mce.check and removed before it exits, Ctrl-C included; what a killed run left is removed by the
next one. The image must be present (check never pulls).

Exit status: 0 when nothing failed (warnings and skips allowed), 1 when a check failed, 2 for bad
arguments or when the checks could not run, 130 when interrupted.`,
		Example: `  mce check mce-example/probe:latest
  mce check mce-example/classifier:latest --model-data build/models/classifier.tar.gz \
      --input examples/containers/check/classifier.csv --content-type text/csv --accept application/json
  mce check mce-example/modelserver:latest --model-data build/mme-models/model-000.tar.gz \
      --input examples/containers/check/modelserver.json --content-type application/json --json
  mce check mce-framework/sklearn:latest --model-data build/models/framework/cancer-v1.tar.gz \
      --input build/models/framework/cancer-sample.csv --content-type text/csv --env SAGEMAKER_PROGRAM=inference.py
  mce check --gpus all mce-framework/pytorch:latest --model-data model.tar.gz --multi-model on`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runCheck(cmd.Context(), f, args[0], cmd.OutOrStdout())
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.modelData, "model-data", "", "model data: s3://bucket/key, file:///path or a path (.tar.gz, or a folder for a single-model container)")
	fl.StringArrayVar(&f.env, "env", nil, "K=V added to the container's environment (repeatable)")
	fl.StringVar(&f.input, "input", "", "file holding a sample request body for /invocations (at most 6 MiB)")
	fl.StringVar(&f.contentType, "content-type", "", "Content-Type of the sample")
	fl.StringVar(&f.accept, "accept", "", "Accept sent with the sample")
	fl.BoolVar(&f.json, "json", false, "print one JSON object: {image, mode, passed, checks: [{name, status, detail, duration_ms}], duration_ms}")
	fl.DurationVar(&f.healthWindow, "health-window", check.DefaultHealthWindow, "how long /ping may take to answer 200 (SageMaker allows 4m by default, up to 1h)")
	fl.DurationVar(&f.timeout, "timeout", check.DefaultTimeout, "time limit of each invocation and model load")
	fl.StringVar(&f.multiModel, "multi-model", "auto", "auto (multi-model when labelled and --model-data is given), on, or off")
	fl.StringVar(&f.gpus, "gpus", "", `GPUs for the container ("all", a count, or device indexes/UUIDs) and the GPU checks`)
	fl.Float64Var(&f.gpuThreshold, "gpu-threshold", 1, "GPU checks: stop loading copies once this share of GPU memory is used (1: until the container refuses one)")
	fl.IntVar(&f.gpuMax, "gpu-max-models", check.DefaultGPUMaxModels, "GPU checks: load at most this many copies")
	return cmd
}

func runCheck(ctx context.Context, f checkFlags, image string, stdout io.Writer) error {
	opts := check.Options{
		Image: image, ModelData: f.modelData, ContentType: f.contentType, Accept: f.accept,
		HealthWindow: f.healthWindow, Timeout: f.timeout, MultiModel: check.MultiModel(f.multiModel),
		Env: map[string]string{},
	}
	if f.gpus != "" {
		req, err := gpu.ParseRequest(f.gpus)
		if err != nil {
			return &exitError{code: 2, msg: "--gpus: " + err.Error()}
		}
		opts.GPUs, opts.GPU, opts.GPUThreshold, opts.GPUMaxModels = req, f.gpu, f.gpuThreshold, f.gpuMax
		if opts.GPU == nil {
			inv := gpu.NewInventory(nil)
			defer inv.Close()
			opts.GPU = inv
		}
		// Before the engine is reached: a host without the GPUs is told so.
		if err := check.GPUsPresent(opts.GPU, req); err != nil {
			return &exitError{code: 2, msg: "--gpus " + f.gpus + ": " + err.Error()}
		}
	}
	for _, kv := range f.env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return &exitError{code: 2, msg: fmt.Sprintf("--env %q: want K=V", kv)}
		}
		opts.Env[k] = v
	}
	if f.input != "" {
		b, err := readCapped(f.input, check.MaxInput)
		if err != nil {
			return &exitError{code: 2, msg: "--input: " + err.Error()}
		}
		opts.Input = b
	}
	if !f.json {
		opts.OnResult = func(r check.Result) { io.WriteString(stdout, check.FormatResult(r)) }
	}
	cli, err := docker.Connect(ctx)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	defer cli.Close()
	c, err := check.New(cli, opts)
	if err != nil {
		return &exitError{code: 2, msg: err.Error()}
	}
	rep, err := c.Run(ctx)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, ctx.Err()) {
			return &exitError{code: 130, msg: "interrupted; what check started was removed"}
		}
		return &exitError{code: 2, msg: err.Error()}
	}
	if f.json {
		if err := rep.WriteJSON(stdout); err != nil {
			return err
		}
	} else {
		fmt.Fprintln(stdout, termSafe(rep.Summary()))
	}
	if !rep.Passed {
		return &exitError{code: 1}
	}
	return nil
}

// readCapped reads a file of at most limit bytes.
func readCapped(path string, limit int64) ([]byte, error) {
	file, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	b, err := io.ReadAll(io.LimitReader(file, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is over SageMaker's 6 MiB limit", path)
	}
	return b, nil
}
