package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/parallel"
)

// setTrue sets m[k], making m when it is nil.
func setTrue(m map[string]bool, k string) map[string]bool {
	if m == nil {
		m = map[string]bool{}
	}
	m[k] = true
	return m
}

// ErrNotAdoptable means the containers found for an endpoint do not match
// its spec exactly, or are not all running and healthy; the caller launches
// the endpoint afresh (Reconcile removes what was found).
var ErrNotAdoptable = errors.New("running containers cannot be adopted")

// Adopt takes over the containers an earlier run of this instance left
// running for the endpoint, when they match spec exactly (every copy of every
// variant, the same definitions and images) and all answer /ping. The adopted
// deployment is then managed as if this runtime had launched it: logs
// followed, crashes restarted, scaling and teardown as usual. Start the
// runtime with Options.Adopt so New does not remove them first.
func (rt *Runtime) Adopt(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	key := deploymentKey{spec.Name, spec.Generation}
	if !rt.reserve(key) {
		return nil, fmt.Errorf("endpoint %q generation %d is already deployed", spec.Name, spec.Generation)
	}
	d, err := rt.adopt(ctx, spec)
	rt.settle(key, d, err)
	return d, err
}

func (rt *Runtime) adopt(ctx context.Context, spec EndpointSpec) (*Deployment, error) {
	f := client.Filters{}.
		Add("label", LabelInstance+"="+rt.opts.Instance).
		Add("label", LabelEndpoint+"="+spec.Name).
		Add("label", LabelGeneration+"="+strconv.Itoa(spec.Generation))
	cctx, cancel := context.WithTimeout(ctx, callTimeout)
	list, err := rt.engine.ContainerList(cctx, client.ContainerListOptions{All: true, Filters: f})
	cancel()
	if err != nil {
		return nil, classify("list containers of "+spec.Name, err)
	}
	byName := map[string]string{} // Docker name → ID
	for _, s := range list.Items {
		for _, n := range s.Names {
			byName[trimSlash(n)] = s.ID
		}
	}
	d := rt.newDeployment(spec)
	want := 0
	for _, v := range spec.Variants {
		want += v.Copies * len(v.Containers)
	}
	if len(list.Items) != want {
		return nil, fmt.Errorf("%w: found %d containers for endpoint %q, its spec has %d", ErrNotAdoptable, len(list.Items), spec.Name, want)
	}
	images := map[string]string{} // reference → image ID now
	var adopted []*Container
	fail := func(err error) (*Deployment, error) {
		// Forget them (their background work ends); Reconcile removes them.
		parallel.Each(adopted, func(c *Container) error {
			c.cancel()
			c.wg.Wait()
			if c.models != nil {
				c.models.Close()
			}
			rt.untrack(c)
			return nil
		})
		return nil, err
	}
	for _, v := range spec.Variants {
		vd := &VariantDeployment{Name: v.Name}
		health := v.HealthTimeout
		if health == 0 {
			health = DefaultHealthTimeout
		}
		fp := v.fingerprint()
		for cp := range v.Copies {
			var set []*Container
			for i, cs := range v.Containers {
				name := containerName(d.netName, d.gen, v.Name, cp, cs.Hostname)
				id, ok := byName[name]
				if !ok {
					return fail(fmt.Errorf("%w: container %s is missing", ErrNotAdoptable, name))
				}
				cctx, cancel := context.WithTimeout(ctx, callTimeout)
				res, err := rt.engine.ContainerInspect(cctx, id, client.ContainerInspectOptions{})
				cancel()
				if err != nil {
					return fail(classify("inspect "+name, err))
				}
				ic := res.Container
				if ic.State == nil || !ic.State.Running || ic.Config == nil || ic.Config.Labels[LabelSpec] != fp {
					return fail(fmt.Errorf("%w: container %s is stopped or was made from another definition", ErrNotAdoptable, name))
				}
				if _, ok := images[cs.Image]; !ok {
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					img, err := rt.engine.ImageInspect(cctx, cs.Image)
					cancel()
					if err != nil {
						return fail(fmt.Errorf("%w: image %s: %v", ErrNotAdoptable, cs.Image, err))
					}
					images[cs.Image] = img.ID
					if img.Config != nil && img.Config.Labels[containers.LabelBidirectionalStreaming] == "true" {
						d.bidi = setTrue(d.bidi, cs.Image)
					}
				}
				if ic.Image != images[cs.Image] {
					return fail(fmt.Errorf("%w: container %s runs an older build of %s", ErrNotAdoptable, name, cs.Image))
				}
				for _, m := range ic.Mounts {
					switch m.Destination {
					case "/opt/ml/model":
						d.models[modelKey{v.Name, cs.Hostname}] = m.Source
					case containers.CodeDir:
						d.codes[modelKey{v.Name, cs.Hostname}] = m.Source
					default:
						if ch, ok := strings.CutPrefix(m.Destination, containers.AdditionalModelDataDir+"/"); ok {
							d.channels[channelKey{v.Name, cs.Hostname, ch}] = m.Source
						}
					}
				}
				opts, _, err := d.createOptions(v, cp, i, cs, d.modelDir(v.Name, cs.Hostname))
				if err != nil {
					return fail(fmt.Errorf("%w: %v", ErrNotAdoptable, err))
				}
				c := d.newContainer(id, name, v.Name, cp, cs, containers.ContainerPort(i), health)
				c.create, c.network = opts, d.networkFor(v)
				adopted = append(adopted, c)
				if cs.MultiModel {
					cache, err := d.multiModelCache(v.Name, cs)
					if err == nil {
						err = d.attachModels(c, cache)
					}
					if err != nil {
						return fail(fmt.Errorf("%w: %v", ErrNotAdoptable, err))
					}
				}
				if err := c.refreshAddress(ctx); err != nil {
					return fail(fmt.Errorf("%w: %v", ErrNotAdoptable, err))
				}
				if err := c.ping(ctx); err != nil {
					return fail(fmt.Errorf("%w: container %s does not answer /ping: %v", ErrNotAdoptable, name, err))
				}
				set = append(set, c)
			}
			vd.Copies = append(vd.Copies, set)
		}
		d.variants = append(d.variants, vd)
	}
	// The artifacts they mount are on disk and in use: counted, never refused.
	seen := map[string]bool{}
	for _, dir := range slices.Concat(slices.Collect(maps.Values(d.models)), slices.Collect(maps.Values(d.codes)), slices.Collect(maps.Values(d.channels))) {
		if !seen[dir] {
			seen[dir] = true
			if n, err := artifact.DirSize(dir); err == nil {
				rt.budget.Force(n)
				d.reserved += n
			}
		}
	}
	for _, c := range adopted {
		c.ready.Store(true)
		c.wg.Add(2)
		go c.streamLogs(time.Now())
		go c.supervise()
	}
	rt.log.Info().Str("endpoint", spec.Name).Int("generation", spec.Generation).Int("containers", len(adopted)).
		Msg("adopted the running containers of an earlier run")
	return d, nil
}

func trimSlash(s string) string {
	if len(s) > 0 && s[0] == '/' {
		return s[1:]
	}
	return s
}
