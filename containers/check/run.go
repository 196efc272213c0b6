package check

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/containers/gpu"
)

// Checker runs the checks of one image. Make it with [New]; it is meant for
// one [Checker.Run] at a time.
type Checker struct {
	engine   Engine
	opts     Options
	http     *http.Client
	procRoot string // "/proc"; tests may point it elsewhere
}

// New validates opts and returns a Checker.
func New(engine Engine, opts Options) (*Checker, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if !opts.GPUs.IsZero() {
		if opts.GPU == nil {
			opts.GPU = gpu.NewInventory(nil)
		}
		if err := GPUsPresent(opts.GPU, opts.GPUs); err != nil {
			return nil, err
		}
	}
	return &Checker{engine: engine, opts: opts, http: newHTTPClient(), procRoot: "/proc"}, nil
}

// run is the state of one Run.
type run struct {
	*Checker
	rep   *Report
	s     *session
	multi bool
	model *modelData

	first    string // container ID of the first copy
	pid      int
	base     string // http://address of the first copy, without port
	ports    []netip.AddrPort
	portsErr error
	modelRef string // the multi-model hash (model_name) and its Target-Model name
	target   string

	gpuIndexes []int                     // the container's GPUs, with Options.GPUs
	gpuDevices []container.DeviceRequest // how the engine gives them
	died       bool                      // the first copy died during a check; later ones are skipped
}

// skipDead is the reason checks after the first copy's death are skipped.
const skipDead = "the container died in an earlier check"

// Run starts the image as SageMaker would, runs every check and removes
// everything it created before returning. The report says what passed;
// an error means the checks could not be run at all (the engine did not
// answer, the model data could not be fetched) or ctx was cancelled.
func (c *Checker) Run(ctx context.Context) (rep *Report, err error) {
	start := time.Now()
	r := &run{Checker: c, rep: &Report{Image: c.opts.Image, Mode: "single-model"}}
	defer c.http.CloseIdleConnections()
	defer func() {
		if rep != nil {
			rep.DurationMS = millis(time.Since(start))
			rep.Passed = len(rep.Failed()) == 0
		}
	}()

	// The image and its labels.
	t := time.Now()
	labels, err := docker.InspectImage(ctx, c.engine, c.opts.Image)
	if errors.Is(err, docker.ErrNotFound) {
		r.add("image present", Fail, t, err.Error()+"; build it or docker load it first")
		return r.rep, nil
	}
	if err != nil {
		return nil, err
	}
	r.add("image present", Pass, t, "")
	r.labels(labels)

	if !c.opts.GPUs.IsZero() {
		if err := r.prepareGPUs(ctx); err != nil {
			return nil, err
		}
	}
	if err := reap(ctx, c.engine); err != nil {
		return nil, fmt.Errorf("removing what an earlier check left behind: %w", err)
	}
	r.s = newSession(c.engine)
	defer func() {
		if r.model != nil {
			r.model.remove()
		}
		cerr := r.s.close(ctx)
		switch {
		case cerr == nil:
		case rep != nil: // a report that leaves things behind is not one to trust
			rep, err = nil, fmt.Errorf("the checks ran, but clean-up failed: %w", cerr)
		default:
			err = errors.Join(err, fmt.Errorf("clean-up: %w", cerr))
		}
	}()
	if c.opts.ModelData != "" {
		if r.model, err = c.prepareModel(ctx, r.multi); err != nil {
			return nil, err
		}
		if r.multi {
			r.modelRef, r.target = r.model.hash, r.model.target
		}
	}
	if err := r.s.createNetwork(ctx); err != nil {
		return nil, err
	}

	r.checks(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return r.rep, nil
}

// add records one result.
func (r *run) add(name string, st Status, since time.Time, detail string) {
	r.addDur(name, st, time.Since(since), detail)
}

func (r *run) addDur(name string, st Status, d time.Duration, detail string) {
	res := Result{Name: name, Status: st, Detail: detail, DurationMS: millis(d)}
	r.rep.Checks = append(r.rep.Checks, res)
	if r.opts.OnResult != nil {
		r.opts.OnResult(res)
	}
}

// skip records checks that cannot run, all for one reason.
func (r *run) skip(why string, names ...string) {
	for _, n := range names {
		r.addDur(n, Skip, 0, why)
	}
}

// labels checks the image's SageMaker capability labels and picks the mode.
func (r *run) labels(l map[string]string) {
	t := time.Now()
	name := "label accept-bind-to-port=true"
	if v := l[docker.LabelBindToPort]; v == "true" {
		r.add(name, Pass, t, "")
	} else {
		r.add(name, Fail, t, fmt.Sprintf("the image lacks %s=true (it has %q); SageMaker refuses it in a multi-container endpoint or pipeline", docker.LabelBindToPort, v))
	}
	labelled := l[docker.LabelMultiModels] == "true"
	mm := "label multi-models=true"
	switch r.opts.MultiModel {
	case MultiModelOn:
		r.multi = true
		if labelled {
			r.add(mm, Pass, t, "")
		} else {
			r.add(mm, Fail, t, fmt.Sprintf("checked as a multi-model container, but the image lacks %s=true, which SageMaker requires of one", docker.LabelMultiModels))
		}
	case MultiModelOff:
		r.skip("checked as a single-model container (--multi-model=off)", mm)
	default:
		switch {
		case labelled && r.opts.ModelData != "":
			r.multi = true
			r.add(mm, Pass, t, "")
		case labelled:
			r.add(mm, Pass, t, "labelled, but no model artifact was given (--model-data), so it is checked as a single-model container")
		default:
			r.skip("not labelled: checked as a single-model container", mm)
		}
	}
	if r.multi {
		r.rep.Mode = "multi-model"
	}
	bidi := "label bidirectional-streaming=true"
	if l[containers.LabelBidirectionalStreaming] == "true" {
		r.add(bidi, Pass, t, "its container must serve a WebSocket at "+containers.BidirectionalStreamPath)
	} else {
		r.skip("not labelled: InvokeEndpointWithBidirectionalStream is not for this image", bidi)
	}
}

// env is the environment of the index-th copy, as mce gives it to the
// index-th container of an instance.
func (r *run) env(index int) []string {
	return containers.SageMakerEnv(r.opts.Env, index, r.multi)
}

func (r *run) hostConfig(netMode string) *container.HostConfig {
	h := &container.HostConfig{
		NetworkMode: container.NetworkMode(netMode),
		SecurityOpt: []string{"no-new-privileges"},
		Resources:   container.Resources{PidsLimit: pidsLimit(), DeviceRequests: r.gpuDevices},
	}
	if r.model != nil {
		h.Binds = []string{r.model.bind()}
	}
	return h
}

// Names of the checks, in report order.
const (
	nameStart    = "starts with serve"
	nameInvoke   = "/invocations answers the sample"
	nameOversize = "oversize body (7 MiB): 4xx, keeps running"
	nameWrongCT  = "wrong content type: 4xx, keeps running"
	nameTwo      = "two copies (ports 8080, 8081) answer /ping"
)

func (r *run) namePing() string  { return "/ping 200 within " + formatWindow(r.opts.HealthWindow) }
func (r *run) namePorts() string { return "listens only on port " + strconv.Itoa(firstPort) }

func formatWindow(d time.Duration) string {
	if d%time.Second == 0 {
		return strconv.Itoa(int(d/time.Second)) + "s"
	}
	return d.String()
}

// checks runs the first copy alone and every check on it, then the second
// copy beside it.
func (r *run) checks(ctx context.Context) {
	later := func() []string {
		names := []string{r.namePing()}
		if !r.multi {
			names = append(names, nameInvoke)
		}
		names = append(names, r.mmeNames()...)
		names = append(names, r.gpuNames()...)
		return append(names, nameOversize, nameWrongCT, r.namePorts(), nameTwo)
	}
	t := time.Now()
	cfg := &container.Config{Image: r.opts.Image, Cmd: []string{"serve"}, Env: r.env(firstIndex), Hostname: "primary"}
	id, err := r.s.launch(ctx, "1", cfg, r.hostConfig(r.s.network))
	r.first = id
	if err != nil {
		r.add(nameStart, Fail, t, err.Error())
		r.skip("the container did not start", later()...)
		return
	}
	started := time.Since(t)
	info, err := r.s.inspect(ctx, id)
	if err == nil {
		r.pid = info.State.Pid
		if ep := info.NetworkSettings.Networks[r.s.network]; ep != nil && ep.IPAddress.IsValid() {
			r.base = "http://" + ep.IPAddress.String()
		}
	}
	if r.base == "" {
		// An address is gone once the container exits: say why it did.
		why := r.exited(ctx, id, t)
		if why == "" {
			why = fmt.Sprintf("the container has no address on network %s (inspect: %v)", r.s.network, err)
		}
		r.addDur(nameStart, Fail, started, why)
		r.skip("the container did not start", later()...)
		return
	}

	// /ping within the window, watching for the container's exit.
	p := r.waitPing(ctx, id, r.url(firstPort, "/ping"))
	if ctx.Err() != nil {
		return // interrupted: Run reports the cancellation, not a failure
	}
	if p.exit != "" {
		r.addDur(nameStart, Fail, started, p.exit)
		r.skip("the container exited", later()...)
		return
	}
	r.addDur(nameStart, Pass, started, "running after start")
	if p.err != nil {
		r.addDur(r.namePing(), Fail, p.took, p.err.Error()+"\nlast log lines:\n"+r.s.tail(ctx, id))
		r.snapshotPorts()
		var calls []string
		if !r.multi {
			calls = append(calls, nameInvoke)
		}
		calls = append(calls, r.mmeNames()...)
		calls = append(calls, r.gpuNames()...)
		r.skip("/ping never answered 200", append(calls, nameOversize, nameWrongCT)...)
		r.portsResult()
		r.skip("/ping never answered 200", nameTwo)
		return
	}
	r.addDur(r.namePing(), Pass, p.took, "")
	r.snapshotPorts()

	invokePath := "/invocations"
	if r.multi {
		invokePath = r.mme(ctx)
	} else {
		r.invoke(ctx, nameInvoke, r.url(firstPort, "/invocations"))
	}
	switch {
	case invokePath == "":
		r.skip("the model did not load", nameOversize, nameWrongCT)
	case r.died:
		r.skip(skipDead, nameOversize, nameWrongCT)
	default:
		r.misuse(ctx, invokePath)
	}
	if r.multi && invokePath != "" {
		r.mmeUnload(ctx)
	}
	switch {
	case len(r.gpuNames()) == 0:
	case !r.multi:
		r.skip("the GPU checks load copies of a model: they need a multi-model image and --model-data", r.gpuNames()...)
	case invokePath == "":
		r.skip("the model did not load", r.gpuNames()...)
	case r.died:
		r.skip(skipDead, r.gpuNames()...)
	default:
		r.gpuChecks(ctx)
	}
	if !r.died {
		r.snapshotPorts()
	}
	r.portsResult()
	if r.died {
		r.skip(skipDead, nameTwo)
		return
	}
	r.twoCopies(ctx)
}

// url is the address of one copy's path.
func (r *run) url(port int, path string) string {
	return r.base + ":" + strconv.Itoa(port) + path
}
