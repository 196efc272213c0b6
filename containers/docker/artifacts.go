package docker

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
)

func (d *Deployment) modelDir(variant, hostname string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.models[modelKey{variant, hostname}]
}

type modelKey struct{ variant, hostname string }

// channelKey names one AdditionalModelDataSources channel of a variant's
// container.
type channelKey struct{ variant, hostname, channel string }

// channelBinds are the read-only mounts of a container's additional model
// data, one folder a channel.
func (d *Deployment) channelBinds(variant string, cs ContainerSpec) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for _, ch := range cs.AdditionalModelData {
		if dir := d.channels[channelKey{variant, cs.Hostname, ch.Channel}]; dir != "" {
			out = append(out, dir+":"+containers.AdditionalModelDataDir+"/"+ch.Channel+":ro")
		}
	}
	return out
}

// prepareArtifacts fetches and extracts each container's model once per
// variant; the copies of a variant share the read-only directory.
func (d *Deployment) prepareArtifacts(ctx context.Context, spec EndpointSpec) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(4)
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			if url, ok := containers.RemoteSubmitDir(c.Environment); ok {
				g.Go(func() error { return d.prepareCode(gctx, v.Name, c, url) })
			}
			for _, ch := range c.AdditionalModelData {
				g.Go(func() error { return d.prepareChannel(gctx, v, c, ch) })
			}
			if c.ModelDataURL == "" || c.MultiModel {
				continue // a multi-model container's URL is a prefix, loaded per model
			}
			g.Go(func() error {
				f, err := d.rt.artifactFetcher()
				if err != nil {
					return err
				}
				work := filepath.Join(d.workDir, v.Name, c.Hostname)
				if err := makeWork(work); err != nil {
					return err
				}
				// Long downloads and extractions are reported with the
				// endpoint's and container's names.
				lctx := d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", v.Name).
					Str("container", c.Hostname).Logger().WithContext(gctx)
				lctx, cancel := withDownloadTimeout(lctx, v.DownloadTimeout)
				defer cancel()
				dir, err := f.Prepare(lctx, c.ModelDataURL, c.BaseDir, work)
				if err == nil {
					err = d.reserve(dir)
				}
				if err != nil {
					reason := fmt.Sprintf("could not get its model data from %q", c.ModelDataURL)
					if errors.Is(lctx.Err(), context.DeadlineExceeded) && gctx.Err() == nil {
						reason += fmt.Sprintf(" within ModelDataDownloadTimeoutInSeconds (%d s)", int(v.DownloadTimeout.Seconds()))
					}
					return &LaunchError{Endpoint: d.endpoint, Variant: v.Name, Container: c.Hostname, Reason: reason, Err: err}
				}
				d.mu.Lock()
				d.models[modelKey{v.Name, c.Hostname}] = dir
				d.mu.Unlock()
				return nil
			})
		}
	}
	return g.Wait()
}

// prepareChannel fetches and extracts one channel of a container's
// AdditionalModelDataSources as its model data is (the same fetcher, limits,
// safe extraction, disk budget and ModelDataDownloadTimeoutInSeconds), into
// a folder of its own.
func (d *Deployment) prepareChannel(ctx context.Context, v VariantSpec, c ContainerSpec, ch containers.ModelDataChannel) error {
	fail := func(err error) error {
		reason := fmt.Sprintf("could not get its additional model data (channel %q) from %q", ch.Channel, ch.URL)
		if errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
			reason += fmt.Sprintf(" within ModelDataDownloadTimeoutInSeconds (%d s)", int(v.DownloadTimeout.Seconds()))
		}
		return &LaunchError{Endpoint: d.endpoint, Variant: v.Name, Container: c.Hostname, Reason: reason, Err: err}
	}
	f, err := d.rt.artifactFetcher()
	if err != nil {
		return fail(err)
	}
	work := filepath.Join(d.workDir, v.Name, c.Hostname, "channels", ch.Channel)
	if err := makeWork(work); err != nil {
		return fail(err)
	}
	lctx := d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", v.Name).
		Str("container", c.Hostname).Str("channel", ch.Channel).Logger().WithContext(ctx)
	lctx, cancel := withDownloadTimeout(lctx, v.DownloadTimeout)
	defer cancel()
	dir, err := f.Prepare(lctx, ch.URL, c.BaseDir, work)
	if err == nil {
		err = d.reserve(dir)
	}
	if err != nil {
		if lctx.Err() != nil {
			err = fmt.Errorf("%w: %w", lctx.Err(), err)
		}
		return fail(err)
	}
	d.mu.Lock()
	d.channels[channelKey{v.Name, c.Hostname, ch.Channel}] = dir
	d.mu.Unlock()
	return nil
}

// makeWork makes an artifact's work folder; its error does not name the
// path (the state folder is not the caller's business).
func makeWork(work string) error {
	if err := os.MkdirAll(work, 0o755); err != nil {
		var pe *fs.PathError
		if errors.As(err, &pe) {
			err = pe.Err
		}
		return fmt.Errorf("artifact folder: %w", err)
	}
	return nil
}

// withDownloadTimeout bounds one model data download by the variant's
// ModelDataDownloadTimeoutInSeconds; a zero d leaves ctx unbounded.
func withDownloadTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if d <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// reserve counts an extracted artifact against the runtime's disk budget
// (making room by deleting unused multi-model files), removing it when it
// does not fit. teardown gives the bytes back.
func (d *Deployment) reserve(dir string) error {
	size, err := artifact.DirSize(dir)
	if err == nil {
		err = d.rt.budget.Reserve(size)
	}
	if err != nil {
		os.RemoveAll(dir)
		return err
	}
	d.mu.Lock()
	d.reserved += size
	d.mu.Unlock()
	return nil
}

// prepareCode fetches and extracts a container's s3://
// SAGEMAKER_SUBMIT_DIRECTORY archive (see CodeDir) once per variant, as
// model data is, into a folder of its own.
func (d *Deployment) prepareCode(ctx context.Context, variant string, c ContainerSpec, url string) error {
	fail := func(err error) error {
		return &LaunchError{Endpoint: d.endpoint, Variant: variant, Container: c.Hostname,
			Reason: fmt.Sprintf("could not get its inference code from %s %q", containers.SubmitDirEnv, url), Err: err}
	}
	f, err := d.rt.artifactFetcher()
	if err != nil {
		return fail(err)
	}
	work := filepath.Join(d.workDir, variant, c.Hostname)
	if err := makeWork(work); err != nil {
		return fail(err)
	}
	lctx := d.rt.log.With().Str("endpoint", d.endpoint).Str("variant", variant).
		Str("container", c.Hostname).Logger().WithContext(ctx)
	dir, err := f.PrepareArchive(lctx, url, c.BaseDir, work)
	if err == nil {
		err = d.reserve(dir)
	}
	if err != nil {
		return fail(err)
	}
	d.mu.Lock()
	d.codes[modelKey{variant, c.Hostname}] = dir
	d.mu.Unlock()
	return nil
}

func (d *Deployment) codeDir(variant, hostname string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.codes[modelKey{variant, hostname}]
}
