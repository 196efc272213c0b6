package docker

import (
	"context"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/network"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/mme"
)

// environment is what the container sees: its definition's Environment, then
// the variables SageMaker sets, which win.
func environment(cs ContainerSpec, index int) []string {
	return containers.SageMakerEnv(cs.Environment, index, cs.MultiModel)
}

// createOptions translates one container of the plan into the engine's
// create call; a recreated container is made from the same options (same
// name, hostname, environment, mounts, network and alias). For a multi-model
// container it also returns the model cache mounted into it.
func (d *Deployment) createOptions(v VariantSpec, cp, index int, cs ContainerSpec, modelDir string) (client.ContainerCreateOptions, *mme.Cache, error) {
	rt := d.rt
	variant := v.Name
	port := containers.ContainerPort(index)
	name := containerName(d.netName, d.gen, variant, cp, cs.Hostname)
	labels := rt.labels(d.endpoint)
	labels[LabelVariant] = variant
	labels[LabelCopy] = strconv.Itoa(cp)
	labels[LabelContainer] = cs.Hostname
	labels[LabelGeneration] = strconv.Itoa(d.gen)
	labels[LabelSpec] = v.fingerprint()
	if v.Shadow {
		labels[LabelShadow] = "true"
	}

	cport, err := network.ParsePort(strconv.Itoa(port) + "/tcp")
	if err != nil {
		return client.ContainerCreateOptions{}, nil, err
	}
	netName := d.networkFor(v)
	cfg := &container.Config{
		Image:    cs.Image,
		Hostname: cs.Hostname,
		Env:      environment(cs, index),
		Labels:   labels,
		Cmd:      []string{"serve"}, // SageMaker runs `docker run IMAGE serve` (https://docs.aws.amazon.com/sagemaker/latest/dg/your-algorithms-inference-code.html)
	}
	host := &container.HostConfig{
		NetworkMode: container.NetworkMode(netName),
		// A process in the container cannot gain privileges it was not
		// started with (setuid binaries, file capabilities).
		SecurityOpt: []string{"no-new-privileges"},
		Resources: container.Resources{
			NanoCPUs:       int64(cs.CPUs * 1e9),
			Memory:         cs.MemoryBytes,
			DeviceRequests: rt.gpuDeviceRequests(cs.GPUs),
			PidsLimit:      rt.pidsLimit(),
		},
	}
	var cache *mme.Cache
	if cs.MultiModel {
		var err error
		if cache, err = d.multiModelCache(variant, cs); err != nil {
			return client.ContainerCreateOptions{}, nil, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
				Reason: "has no model cache", Err: err}
		}
		// Models are extracted under Dir/<id>/model and appear live in the
		// container at /opt/ml/models/<id>/model (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html).
		host.Binds = []string{cache.Dir() + ":/opt/ml/models:ro"}
	} else if modelDir != "" {
		host.Binds = []string{modelDir + ":/opt/ml/model:ro"}
	}
	host.Binds = append(host.Binds, d.channelBinds(variant, cs)...)
	if cs.Adapters {
		dir, err := rt.adapterDir(d.endpoint, cs.Hostname)
		if err != nil {
			return client.ContainerCreateOptions{}, nil, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
				Reason: "has no adapter folder", Err: err}
		}
		host.Binds = append(host.Binds, dir+":"+containers.AdapterMount+":ro")
	}
	if code := d.codeDir(variant, cs.Hostname); code != "" {
		host.Binds = append(host.Binds, code+":"+containers.CodeDir+":ro")
		cfg.Env = containers.WithCodeDir(cfg.Env)
	}
	if rt.network == NetworkPublished {
		cfg.ExposedPorts = network.PortSet{cport: struct{}{}}
		host.PortBindings = network.PortMap{cport: {{HostIP: netip.MustParseAddr(loopback)}}}
	}
	netcfg := &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{
		netName: {Aliases: []string{cs.Hostname}},
	}}
	return client.ContainerCreateOptions{Name: name, Config: cfg, HostConfig: host, NetworkingConfig: netcfg}, cache, nil
}

// startContainer creates and starts one container and begins following its
// logs. The returned container is tracked even when an error is returned, so
// teardown removes it.
func (d *Deployment) startContainer(ctx context.Context, v VariantSpec, cp, index int, cs ContainerSpec, modelDir string, health time.Duration) (*Container, error) {
	rt := d.rt
	variant := v.Name
	opts, cache, err := d.createOptions(v, cp, index, cs, modelDir)
	if err != nil {
		return nil, err
	}
	name := opts.Name

	// As for networks: a create the engine carries out must be seen, so it is
	// not cut short; the container is tracked before cancellation is honoured.
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
	res, err := rt.engine.ContainerCreate(cctx, opts)
	cancel()
	if err != nil {
		return nil, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "could not be created", Err: classify("create container "+name, err)}
	}
	c := d.newContainer(res.ID, name, variant, cp, cs, containers.ContainerPort(index), health)
	c.create, c.network = opts, d.networkFor(v)
	if cache != nil {
		if err := d.attachModels(c, cache); err != nil {
			return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname, Reason: "has no model manager", Err: err}
		}
	}

	if err := ctx.Err(); err != nil {
		return c, err
	}
	started := time.Now()
	cctx, cancel = context.WithTimeout(ctx, callTimeout)
	_, err = rt.engine.ContainerStart(cctx, c.ID(), client.ContainerStartOptions{})
	cancel()
	if err != nil {
		return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "could not be started", Err: classify("start container "+name, err)}
	}
	c.wg.Add(1)
	go c.streamLogs(started.Add(-time.Second))
	if err := c.refreshAddress(ctx); err != nil {
		return c, &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: cs.Hostname,
			Reason: "has no address", Err: err, LogTail: c.LogTail()}
	}
	return c, nil
}

const loopback = "127.0.0.1"

// containerName is the Docker name of one container of a deployment.
func containerName(network string, gen int, variant string, cp int, hostname string) string {
	return fmt.Sprintf("%s-g%d-%s-%d-%s", network, gen, variant, cp, hostname)
}

// newContainer makes and tracks the Container for a created Docker container.
func (d *Deployment) newContainer(id, name, variant string, cp int, cs ContainerSpec, port int, health time.Duration) *Container {
	c := &Container{
		rt: d.rt, name: name, endpoint: d.endpoint, gen: d.gen, variant: variant, copy: cp,
		spec: cs, port: port, health: health,
		log: d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", variant).
			Str("container", cs.Hostname).Int("copy", cp).Logger(),
		tail: newLineRing(tailLines),
		died: make(chan int, 4),
		bidi: d.bidi[cs.Image],
	}
	c.id.Store(&id)
	c.lastExit.Store(-1)
	c.ctx, c.cancel = context.WithCancel(d.rt.ctx)
	d.rt.track(c)
	return c
}
