package docker

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mce-run/mce/containers/mme"
)

// launchParallelism bounds concurrent create/start calls to the engine.
const launchParallelism = 8

// Deployment is one generation of an endpoint's running containers: every
// copy of every variant's container set, with their model artifacts. During an
// update two generations of one endpoint run side by side on the endpoint's
// network; the network goes with the last of them.
type Deployment struct {
	rt       *Runtime
	endpoint string
	gen      int
	spec     EndpointSpec
	netName  string
	workDir  string

	mu       sync.Mutex
	variants []*VariantDeployment
	models   map[modelKey]string     // model folder per variant container, shared by copies
	codes    map[modelKey]string     // fetched SAGEMAKER_SUBMIT_DIRECTORY folder, likewise
	channels map[channelKey]string   // each AdditionalModelDataSources channel's folder, likewise
	bidi     map[string]bool         // images that carry containers.LabelBidirectionalStreaming=true
	caches   map[modelKey]*mme.Cache // model cache per multi-model container definition
	reserved int64                   // bytes of models counted against the runtime's disk budget

	closeOnce sync.Once
	closeErr  error
}

// VariantDeployment is a snapshot of a variant's running copies, each an
// ordered container set (the chain order of the model's Containers).
type VariantDeployment struct {
	Name   string
	Copies [][]*Container
}

type deploymentKey struct {
	endpoint string
	gen      int
}

// Endpoint is the endpoint's name.
func (d *Deployment) Endpoint() string { return d.endpoint }

// Generation tells this deployment from others of the same endpoint.
func (d *Deployment) Generation() int { return d.gen }

// Network is the name of the endpoint's bridge network.
func (d *Deployment) Network() string { return d.netName }

// Variants returns a snapshot of the running variants in spec order.
func (d *Deployment) Variants() []*VariantDeployment {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]*VariantDeployment, len(d.variants))
	for i, v := range d.variants {
		out[i] = &VariantDeployment{Name: v.Name, Copies: append([][]*Container(nil), v.Copies...)}
	}
	return out
}

// Copies returns a snapshot of a variant's copies; nil for an unknown variant.
func (d *Deployment) Copies(variant string) [][]*Container {
	for _, v := range d.Variants() {
		if v.Name == variant {
			return v.Copies
		}
	}
	return nil
}

// Containers returns every container of the deployment.
func (d *Deployment) Containers() []*Container {
	var out []*Container
	for _, v := range d.Variants() {
		for _, cp := range v.Copies {
			out = append(out, cp...)
		}
	}
	return out
}

// LaunchError says which container kept an endpoint from starting and why,
// with the container's last log lines.
type LaunchError struct {
	Endpoint, Variant, Container string
	Reason                       string
	LogTail                      []string
	Err                          error
}

func (e *LaunchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "container %q (variant %q) of endpoint %q %s", e.Container, e.Variant, e.Endpoint, e.Reason)
	if e.Err != nil {
		b.WriteString(": ")
		b.WriteString(e.Err.Error())
	}
	if len(e.LogTail) > 0 {
		b.WriteString("; last log lines:\n  ")
		b.WriteString(strings.Join(e.LogTail, "\n  "))
	}
	return b.String()
}

func (e *LaunchError) Unwrap() error { return e.Err }

// Deploy brings up every copy of every variant of the endpoint in parallel and
// returns once all of them answer GET /ping with 200. Everything is checked
// before anything is created (spec, images, GPUs); if any container fails to
// come up, everything created so far is removed and the error names the
// container, the cause and its last log lines.
func (rt *Runtime) Deploy(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	key := deploymentKey{spec.Name, spec.Generation}
	if !rt.reserve(key) {
		return nil, fmt.Errorf("endpoint %q generation %d is already deployed", spec.Name, spec.Generation)
	}
	d, err := rt.deploy(ctx, spec)
	rt.settle(key, d, err)
	return d, err
}

// reserve claims a deployment key; settle records the outcome.
func (rt *Runtime) reserve(key deploymentKey) bool {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, taken := rt.deployments[key]; taken {
		return false
	}
	rt.deployments[key] = nil
	return true
}

func (rt *Runtime) settle(key deploymentKey, d *Deployment, err error) {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if err != nil {
		delete(rt.deployments, key)
	} else {
		rt.deployments[key] = d
	}
}

func (rt *Runtime) newDeployment(spec EndpointSpec) *Deployment {
	return &Deployment{
		rt:       rt,
		endpoint: spec.Name,
		gen:      spec.Generation,
		spec:     spec,
		netName:  rt.resourceName(spec.Name),
		workDir:  filepath.Join(rt.artifactsDir(), spec.Name, "g"+strconv.Itoa(spec.Generation)),
		models:   map[modelKey]string{},
		codes:    map[modelKey]string{},
		channels: map[channelKey]string{},
		caches:   map[modelKey]*mme.Cache{},
	}
}

func (rt *Runtime) deploy(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	bidi, err := rt.checkImages(ctx, spec)
	if err != nil {
		return nil, err
	}
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			if err := rt.checkGPUs(ctx, c.GPUs); err != nil {
				return nil, fmt.Errorf("container %q (variant %q): %w", c.Hostname, v.Name, err)
			}
		}
	}

	d := rt.newDeployment(spec)
	d.bidi = bidi
	ok := false
	defer func() {
		if !ok {
			// Tear down detached from ctx's cancellation (ctx may be what
			// failed), keeping its values, bounded on its own.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rt.opts.StopGrace+time.Minute)
			defer cancel()
			d.teardown(cctx, 0, true)
		}
	}()

	for _, isolated := range spec.networks() {
		name := rt.networkName(spec.Name, isolated)
		if err := rt.ensureNetwork(ctx, spec.Name, isolated); err != nil {
			return nil, err
		}
		if err := rt.joinNetwork(ctx, name); err != nil { // NetworkJoin only (join.go)
			return nil, err
		}
	}
	if err := d.prepareArtifacts(ctx, spec); err != nil {
		return nil, err
	}
	for _, v := range spec.Variants {
		d.variants = append(d.variants, &VariantDeployment{Name: v.Name})
	}
	for i, v := range spec.Variants {
		copies, err := d.launchCopies(ctx, v, 0, v.Copies)
		if err != nil {
			return nil, err
		}
		d.variants[i].Copies = copies
	}
	ok = true
	rt.log.Info().Str("endpoint", spec.Name).Int("generation", spec.Generation).
		Int("containers", len(d.Containers())).Str("network", d.netName).Msg("endpoint containers ready")
	return d, nil
}

// launchCopies starts copies [from, to) of a variant in parallel and waits
// until all of their containers pass /ping; on failure the containers it
// started are removed by the caller's teardown (they are tracked).
func (d *Deployment) launchCopies(ctx context.Context, v VariantSpec, from, to int) ([][]*Container, error) {
	health := v.HealthTimeout
	if health == 0 {
		health = DefaultHealthTimeout
	}
	copies := make([][]*Container, to-from)
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(launchParallelism)
	var mu sync.Mutex
	var all []*Container
	for cp := from; cp < to; cp++ {
		copies[cp-from] = make([]*Container, len(v.Containers))
		for i, cs := range v.Containers {
			g.Go(func() error {
				c, err := d.startContainer(gctx, v, cp, i, cs, d.modelDir(v.Name, cs.Hostname), health)
				if c != nil {
					mu.Lock()
					copies[cp-from][i] = c
					all = append(all, c)
					mu.Unlock()
				}
				return err
			})
		}
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	hg, hctx := errgroup.WithContext(ctx)
	for _, c := range all {
		hg.Go(func() error { return c.waitHealthy(hctx, c.health) })
	}
	if err := hg.Wait(); err != nil {
		return nil, err
	}
	for _, c := range all {
		c.ready.Store(true)
		c.wg.Add(1)
		go c.supervise()
	}
	return copies, nil
}

// containersOf returns the tracked containers of one deployment.
func (rt *Runtime) containersOf(endpoint string, gen int) []*Container {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	var out []*Container
	for _, c := range rt.byID {
		if c.endpoint == endpoint && c.gen == gen {
			out = append(out, c)
		}
	}
	return out
}
