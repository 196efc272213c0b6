package docker

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/gpu"
)

// What a pre-flight Problem is about.
const (
	CheckImage       = "image"
	CheckGPU         = "gpu"
	CheckModelData   = "model-data"
	CheckCredentials = "credentials"
)

// Problem is one thing the pre-flight found that would keep an endpoint
// from starting: where (variant and container; empty when it concerns
// several), what is wrong, and what to do about it.
type Problem struct {
	Check     string // CheckImage, CheckGPU, CheckModelData or CheckCredentials
	Variant   string
	Container string
	What      string
	Fix       string
	// Err is the error behind What, for callers that tell causes apart
	// (errors.Is with gpu.ErrNoDriver, artifact.ErrNoCredentials …).
	Err error `json:"-"`
}

func (p Problem) String() string {
	var b strings.Builder
	if p.Container != "" {
		fmt.Fprintf(&b, "container %q (variant %q): ", p.Container, p.Variant)
	}
	b.WriteString(p.What)
	if p.Fix != "" {
		b.WriteString(" — ")
		b.WriteString(p.Fix)
	}
	return b.String()
}

// PreflightOptions bound the pre-flight.
type PreflightOptions struct {
	// CheckTimeout bounds one check that may reach the network (an S3
	// request, a registry's credentials); default 5 s.
	CheckTimeout time.Duration
	// Timeout bounds the whole pre-flight; default 10 s.
	Timeout time.Duration
}

// Preflight checks, before anything is created, everything Deploy would
// need for spec, and returns every problem it finds (nil when none): each
// image is present, or may be pulled under the pull policy with credentials
// that resolve (nothing is pulled, and under PullNever no registry is
// contacted); every GPU request can be met by this host and engine; each
// container's model data exists (file:// inside the model roots, s3://
// objects and prefixes answer HEAD or List) and S3 credentials resolve.
// Checks run concurrently, each within opts.CheckTimeout and all within
// opts.Timeout, so an unreachable store cannot hold the caller.
func (rt *Runtime) Preflight(ctx context.Context, spec EndpointSpec, opts PreflightOptions) []Problem {
	if opts.CheckTimeout <= 0 {
		opts.CheckTimeout = 5 * time.Second
	}
	if opts.Timeout <= 0 {
		opts.Timeout = 10 * time.Second
	}
	ctx, cancel := context.WithTimeout(ctx, opts.Timeout)
	defer cancel()

	var (
		mu       sync.Mutex
		problems []Problem
		wg       sync.WaitGroup
	)
	add := func(p Problem) {
		mu.Lock()
		problems = append(problems, p)
		mu.Unlock()
	}
	run := func(fn func(ctx context.Context)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cctx, cancel := context.WithTimeout(ctx, opts.CheckTimeout)
			defer cancel()
			fn(cctx)
		}()
	}

	// Images: once per reference, reported on every container using it.
	type use struct {
		variant, container string
		multi              bool
	}
	images := map[string][]use{}
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			images[c.Image] = append(images[c.Image], use{v.Name, c.Hostname, len(v.Containers) > 1})
		}
	}
	for _, ref := range slices.Sorted(maps.Keys(images)) {
		run(func(ctx context.Context) {
			what, fix, err := rt.preflightImage(ctx, ref, slices.ContainsFunc(images[ref], func(u use) bool { return u.multi }))
			if what == "" {
				return
			}
			for _, u := range images[ref] {
				add(Problem{Check: CheckImage, Variant: u.variant, Container: u.container, What: what, Fix: fix, Err: err})
			}
		})
	}

	// GPUs: the inventory is local (NVML) and the engine's runtimes are
	// read once.
	for _, v := range spec.Variants {
		for _, c := range v.Containers {
			if c.GPUs.IsZero() {
				continue
			}
			run(func(ctx context.Context) {
				if err := rt.checkGPUs(ctx, c.GPUs); err != nil {
					add(Problem{Check: CheckGPU, Variant: v.Name, Container: c.Hostname,
						What: err.Error(), Fix: GPUFix(err), Err: err})
				}
			})
		}
	}

	// Model data. Missing S3 credentials are one problem for every
	// container whose data is on S3, found without any S3 request.
	f, ferr := rt.artifactFetcher()
	var (
		credMu   sync.Mutex
		noCreds  error
		credWhom []string
		credOne  [2]string // variant and container, when only one has S3 data
	)
	for _, v := range spec.Variants {
		var checks []ContainerSpec // each container's model data, then each additional channel's as one
		for _, c := range v.Containers {
			checks = append(checks, c)
			for _, ch := range c.AdditionalModelData {
				cc := c
				cc.ModelDataURL, cc.MultiModel = ch.URL, false
				checks = append(checks, cc)
			}
		}
		for _, c := range checks {
			if c.ModelDataURL == "" {
				continue
			}
			if ferr != nil {
				add(Problem{Check: CheckModelData, Variant: v.Name, Container: c.Hostname, What: ferr.Error(), Err: ferr})
				continue
			}
			run(func(ctx context.Context) {
				err := f.Check(ctx, c.ModelDataURL, c.BaseDir, c.MultiModel)
				switch {
				case err == nil:
				case errors.Is(err, artifact.ErrNoCredentials):
					credMu.Lock()
					noCreds = err
					credWhom = append(credWhom, fmt.Sprintf("%q (variant %q)", c.Hostname, v.Name))
					credOne = [2]string{v.Name, c.Hostname}
					credMu.Unlock()
				default:
					add(modelDataProblem(ctx, v.Name, c, err, opts.CheckTimeout))
				}
			})
		}
	}
	wg.Wait()
	if noCreds != nil {
		slices.Sort(credWhom)
		what, fix := credentialsProblem()
		p := Problem{Check: CheckCredentials, Variant: credOne[0], Container: credOne[1],
			What: "its model data is on S3, but " + what, Fix: fix, Err: noCreds}
		if len(credWhom) > 1 {
			p.Variant, p.Container = "", ""
			p.What = "containers " + strings.Join(credWhom, ", ") + ": their model data is on S3, but " + what
		}
		add(p)
	}
	// In the order a user fixes them: by variant and container, image
	// first; problems of several containers last.
	order := map[string]int{CheckImage: 0, CheckGPU: 1, CheckModelData: 2, CheckCredentials: 3}
	slices.SortStableFunc(problems, func(a, b Problem) int {
		if (a.Container == "") != (b.Container == "") {
			if a.Container == "" {
				return 1
			}
			return -1
		}
		if c := strings.Compare(a.Variant, b.Variant); c != 0 {
			return c
		}
		if c := strings.Compare(a.Container, b.Container); c != 0 {
			return c
		}
		return order[a.Check] - order[b.Check]
	})
	return problems
}

// preflightImage checks one image; what is empty when it is fine.
func (rt *Runtime) preflightImage(ctx context.Context, ref string, multi bool) (what, fix string, err error) {
	labels, err := InspectImage(ctx, rt.engine, ref)
	switch {
	case err == nil:
		if multi && labels[LabelBindToPort] != "true" {
			return fmt.Sprintf("image %q does not carry the label %s=true that SageMaker requires of containers in a multi-container endpoint or pipeline", ref, LabelBindToPort),
				"rebuild it with `LABEL " + LabelBindToPort + "=true` and make it listen on SAGEMAKER_BIND_TO_PORT", nil
		}
		if rt.opts.PullPolicy != PullAlways {
			return "", "", nil
		}
	case !errors.Is(err, ErrNotFound):
		return fmt.Sprintf("image %q could not be looked up on the Docker engine: %v", ref, err), "check that the Docker engine is running and answers `docker info`", err
	}
	host, herr := registryHost(ref)
	if herr != nil {
		return fmt.Sprintf("image %q is not a valid image reference: %v", ref, herr), "correct the container's Image (registry/repository:tag or @sha256:digest, repository in lower case)", herr
	}
	if rt.opts.PullPolicy == PullNever {
		fix := fmt.Sprintf("run `docker pull %s` (or build it), or start mce with --pull=if-missing", ref)
		if m := ecrHost.FindStringSubmatch(host); m != nil {
			fix = fmt.Sprintf("start mce with --pull=if-missing (it gets an ECR token with your AWS credentials), or run `aws ecr get-login-password --region %s | docker login --username AWS --password-stdin %s` and `docker pull` it", m[2], host)
		}
		return fmt.Sprintf("image %q is not on the Docker engine (pull policy: never)", ref), fix, err
	}
	// The pull itself waits for the launch; only the credentials are
	// resolved here (for ECR a token, cached for the pull).
	if _, cerr := rt.auth.resolve(ctx, host); cerr != nil {
		fix := fmt.Sprintf("run `docker login %s` (mce reads the docker CLI's config.json and credential helpers)", host)
		if ecrHost.MatchString(host) {
			fix = "give mce AWS credentials that may call ecr:GetAuthorizationToken (AWS_PROFILE, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)"
		}
		if ctx.Err() != nil {
			return fmt.Sprintf("image %q must be pulled, but the credentials for registry %s could not be resolved in time", ref, host), fix, cerr
		}
		return fmt.Sprintf("image %q must be pulled, but the credentials for registry %s could not be resolved: %s", ref, host, firstLine(cerr.Error(), 300)), fix, cerr
	}
	return "", "", nil
}

// GPUFix says what to do about a GPU request this host cannot meet.
func GPUFix(err error) string {
	switch {
	case errors.Is(err, gpu.ErrNoCDISpec):
		return "write NVIDIA's CDI spec with nvidia-container-toolkit (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`), or register its runtime with the Docker engine (`nvidia-ctk runtime configure --runtime=docker`, then restart the engine)"
	case errors.Is(err, gpu.ErrNoRuntime):
		return "install nvidia-container-toolkit, then register its runtime with the Docker engine (`nvidia-ctk runtime configure --runtime=docker`, then restart the engine) or, on Docker 25 or later with CDI on, write its CDI spec (`nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml`)"
	case errors.Is(err, gpu.ErrTooMany), errors.Is(err, gpu.ErrUnknownDevice):
		return "ask for the GPUs this host has"
	default:
		return "ask for no GPUs, or run mce on a host with NVIDIA GPUs and their driver"
	}
}

// modelDataProblem says what is wrong with one container's model data.
func modelDataProblem(ctx context.Context, variant string, c ContainerSpec, err error, timeout time.Duration) Problem {
	p := Problem{Check: CheckModelData, Variant: variant, Container: c.Hostname, What: err.Error(), Err: err}
	s3 := strings.HasPrefix(c.ModelDataURL, "s3://")
	switch {
	case ctx.Err() != nil && s3:
		p.What = fmt.Sprintf("model data %q: S3 did not answer within %s", c.ModelDataURL, timeout)
		p.Fix = "check that the S3 endpoint is reachable from this machine (--s3-endpoint for an S3-compatible store)"
	case errors.Is(err, artifact.ErrOutsideModelRoots):
		p.Fix = "put the data in the folder of an -f endpoint file, or start mce with " + artifact.ModelRootFlag + " naming its folder"
	case errors.Is(err, artifact.ErrNotFound) && s3 && c.MultiModel:
		p.Fix = "check the bucket's name in ModelDataUrl"
	case errors.Is(err, artifact.ErrNotFound) && s3:
		p.Fix = "upload the model archive there, or correct ModelDataUrl"
	case errors.Is(err, artifact.ErrNotFound) && artifact.ExampleBuild(c.ModelDataURL) != "":
		p.Fix = "run `" + artifact.ExampleBuild(c.ModelDataURL) + "` in mce's repository"
	case errors.Is(err, artifact.ErrNotFound):
		p.Fix = "create it, or correct ModelDataUrl"
	case s3:
		p.Fix = "check that the bucket exists and that mce's AWS credentials may read it (s3:GetObject, s3:ListBucket)"
	}
	return p
}

// credentialsProblem turns the credential chain's failure into one
// sentence of what was tried and one of what to set.
func credentialsProblem() (what, fix string) {
	return "no AWS credentials were found (environment, ~/.aws files, container and web-identity credentials, EC2 instance role)",
		"set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE; for an S3-compatible store also --s3-endpoint"
}
