package docker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/docker/go-units"
	"github.com/moby/moby/api/types/jsonstream"
	"github.com/moby/moby/client"
)

// ErrUnauthorized marks a pull the registry refused for lack of credentials.
var ErrUnauthorized = errors.New("unauthorized")

// Pull pulls ref with the credentials the docker CLI would use (or an ECR
// token), logging progress at info at most every 3 s. Concurrent pulls
// of one reference share one engine pull.
func (rt *Runtime) Pull(ctx context.Context, ref string) error {
	ch := rt.pulls.DoChan(ref, func() (any, error) {
		// The pull is shared: a caller that gives up does not cancel it for
		// the others; it ends with the pull or when the runtime closes.
		pctx := context.WithoutCancel(ctx)
		pctx, cancel := context.WithCancel(pctx)
		defer cancel()
		stop := context.AfterFunc(rt.ctx, cancel)
		defer stop()
		return nil, rt.pull(pctx, ref)
	})
	select {
	case r := <-ch:
		return r.Err
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (rt *Runtime) pull(ctx context.Context, ref string) error {
	host, err := registryHost(ref)
	if err != nil {
		return fmt.Errorf("pull image: %w", err)
	}
	creds, err := rt.auth.resolve(ctx, host)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	header, err := encodeAuth(creds.auth)
	if err != nil {
		return fmt.Errorf("pull image %s: %w", ref, err)
	}
	dial := ref
	if addr, ok := rt.opts.Registry.HostAddrs[host]; ok {
		dial = addr + strings.TrimPrefix(ref, host)
	}
	rt.log.Info().Str("image", ref).Str("registry", host).Bool("credentials", creds.auth != nil).
		Str("credentials_from", creds.source).Msg("pulling image")
	start := time.Now()
	resp, err := rt.engine.ImagePull(ctx, dial, client.ImagePullOptions{RegistryAuth: header})
	if err != nil {
		return rt.pullError(ref, host, creds, err)
	}
	p := pullProgress{layers: map[string]*layerProgress{}}
	last := time.Now()
	for m, err := range resp.JSONMessages(ctx) {
		if err != nil {
			return rt.pullError(ref, host, creds, err)
		}
		if m.Error != nil {
			return rt.pullError(ref, host, creds, errors.New(m.Error.Message))
		}
		p.add(m.ID, m.Status, m.Progress)
		if time.Since(last) >= pullProgressEvery {
			last = time.Now()
			rt.logProgress(ref, &p, start, "pull progress")
		}
	}
	if dial != ref {
		if _, err := rt.engine.ImageTag(ctx, client.ImageTagOptions{Source: dial, Target: ref}); err != nil {
			return fmt.Errorf("pull image %s: tag: %w", ref, err)
		}
	}
	rt.logProgress(ref, &p, start, "pulled image")
	return nil
}

// pullProgressEvery is how often a pull in progress is reported: often
// enough to show it moves, rarely enough not to drown the log (as the
// artifact package's progress lines).
const pullProgressEvery = 3 * time.Second

func (rt *Runtime) logProgress(ref string, p *pullProgress, start time.Time, msg string) {
	done, n, cur, total := p.sums()
	rt.log.Info().Str("event", "pull").Str("image", ref).Int("layers_done", done).Int("layers", n).
		Str("downloaded", units.HumanSize(float64(cur))).Str("size", units.HumanSize(float64(total))).
		Int64("downloaded_bytes", cur).Int64("size_bytes", total).
		Dur("elapsed_ms", time.Since(start)).Msg(msg)
}

// pullError says what to do about a failed pull.
func (rt *Runtime) pullError(ref, host string, creds credentials, err error) error {
	msg := err.Error()
	low := strings.ToLower(msg)
	switch {
	case strings.Contains(low, "unauthorized") || strings.Contains(low, "authentication required") ||
		strings.Contains(low, "no basic auth credentials") || strings.Contains(low, "denied"):
		what := fmt.Sprintf("run `docker login %s` (mce reads the docker CLI's config.json, credential helpers included)", host)
		if ecrHost.MatchString(host) {
			what = "check that the AWS credentials used (" + creds.source + ") may call ecr:GetAuthorizationToken and pull from this repository"
		}
		have := "no credentials were found for it (" + creds.source + ")"
		if creds.auth != nil {
			have = "the credentials from " + creds.source + " were refused"
		}
		return fmt.Errorf("pull image %s: registry %s refused access: %s; %s: %w (%s)", ref, host, have, what, ErrUnauthorized, firstLine(msg, 300))
	case strings.Contains(low, "not found") || strings.Contains(low, "manifest unknown") || strings.Contains(low, "does not exist"):
		return fmt.Errorf("pull image %s: registry %s has no such image (check the repository name and tag): %w", ref, host, ErrNotFound)
	}
	return fmt.Errorf("pull image %s: %s", ref, firstLine(msg, 500))
}

type layerProgress struct {
	current, total int64
	done           bool
}

type pullProgress struct {
	layers map[string]*layerProgress
}

func (p *pullProgress) add(id, status string, pr *jsonstream.Progress) {
	if id == "" || strings.HasPrefix(status, "Pulling from") || strings.HasPrefix(status, "Digest:") || strings.HasPrefix(status, "Status:") {
		return // about the image, not a layer
	}
	l := p.layers[id]
	if l == nil {
		l = &layerProgress{}
		p.layers[id] = l
	}
	switch {
	case status == "Downloading" && pr != nil:
		l.current = pr.Current
		if pr.Total > 0 {
			l.total = pr.Total
		}
	case status == "Download complete" || status == "Verifying Checksum":
		if l.total > 0 {
			l.current = l.total
		}
	case status == "Pull complete" || status == "Already exists":
		l.done = true
		if l.total > 0 {
			l.current = l.total
		}
	}
}

func (p *pullProgress) sums() (done, n int, cur, total int64) {
	for _, l := range p.layers {
		n++
		if l.done {
			done++
		}
		cur += l.current
		total += l.total
	}
	return done, n, cur, total
}
