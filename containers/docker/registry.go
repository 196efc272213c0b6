package docker

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/ecr"
	"github.com/distribution/reference"
	"github.com/moby/moby/api/types/registry"
)

// PullPolicy says when mce asks the engine to pull an image.
type PullPolicy string

const (
	PullNever     PullPolicy = "never"      // use only images already present
	PullIfMissing PullPolicy = "if-missing" // pull images that are not present
	PullAlways    PullPolicy = "always"     // pull every image at each launch
)

// ParsePullPolicy accepts never, if-missing and always, and the boolean
// spellings of the old --pull flag (true = if-missing, false = never); empty
// is never.
func ParsePullPolicy(s string) (PullPolicy, error) {
	switch strings.ToLower(s) {
	case "never", "false", "":
		return PullNever, nil
	case "if-missing", "missing", "true":
		return PullIfMissing, nil
	case "always":
		return PullAlways, nil
	}
	return "", fmt.Errorf("pull policy %q: want never, if-missing or always", s)
}

// RegistryOptions say where pull credentials come from.
type RegistryOptions struct {
	// DockerConfigDir holds config.json; default $DOCKER_CONFIG, else
	// ~/.docker, as the docker CLI reads it.
	DockerConfigDir string
	// HelperTimeout bounds one docker-credential-* run; default 10 s.
	HelperTimeout time.Duration
	// ECREndpoint overrides the URL of ECR's API (GetAuthorizationToken);
	// empty: the region's usual endpoint.
	ECREndpoint string
	// AWSConfig loads the AWS configuration for ECR; nil: the SDK's default
	// chain (environment, shared files, SSO, IMDS), region from the reference.
	AWSConfig func(ctx context.Context, region string) (aws.Config, error)
	// HostAddrs maps a registry host to the address the engine dials
	// instead (host:port); the pulled image is tagged with the original
	// reference. For tests; credentials are still those of the original host.
	HostAddrs map[string]string
}

var ecrHost = regexp.MustCompile(`^(\d{12})\.dkr\.ecr(?:-fips)?\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$`)

// registryHost returns the registry host of an image reference as the
// engine reads it (github.com/distribution/reference, the parser of the
// Docker engine and CLI), so credentials go only to the registry the engine
// pulls from: "Evilhost/img" names the registry Evilhost (an upper-case
// first component is a host), "localhost/x" the registry localhost, and
// "ubuntu", "library/ubuntu" and "index.docker.io/library/ubuntu" Docker Hub
// ("docker.io", which configKeys spells as the docker CLI keys it). A
// reference the engine would refuse is an error.
func registryHost(ref string) (string, error) {
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return "", fmt.Errorf("image reference %q: %w", ref, err)
	}
	return reference.Domain(named), nil
}

// credentials resolves the registry credentials for host, as the docker CLI
// does, with ECR hosts getting a token from GetAuthorizationToken. A nil
// config with a nil error means anonymous. source names where they came
// from for messages.
type credentials struct {
	auth   *registry.AuthConfig
	source string
}

type ecrToken struct {
	auth    registry.AuthConfig
	expires time.Time
}

// authResolver resolves and caches (ECR tokens only) registry credentials.
type authResolver struct {
	opts RegistryOptions
	mu   sync.Mutex
	ecr  map[string]ecrToken // by host
}

func newAuthResolver(opts RegistryOptions) *authResolver {
	if opts.HelperTimeout <= 0 {
		opts.HelperTimeout = 10 * time.Second
	}
	return &authResolver{opts: opts, ecr: map[string]ecrToken{}}
}

func (r *authResolver) resolve(ctx context.Context, host string) (credentials, error) {
	if m := ecrHost.FindStringSubmatch(host); m != nil {
		return r.ecrAuth(ctx, host, m[2])
	}
	return r.dockerConfigAuth(ctx, host)
}

type dockerConfigFile struct {
	Auths map[string]struct {
		Auth          string `json:"auth"`
		Username      string `json:"username"`
		Password      string `json:"password"`
		IdentityToken string `json:"identitytoken"`
	} `json:"auths"`
	CredHelpers map[string]string `json:"credHelpers"`
	CredsStore  string            `json:"credsStore"`
}

func (r *authResolver) configPath() string {
	dir := r.opts.DockerConfigDir
	if dir == "" {
		dir = os.Getenv("DOCKER_CONFIG")
	}
	if dir == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return ""
		}
		dir = filepath.Join(home, ".docker")
	}
	return filepath.Join(dir, "config.json")
}

// keys are the names config.json may use for host.
func configKeys(host string) []string {
	if host == "docker.io" {
		return []string{"https://index.docker.io/v1/", "index.docker.io", "docker.io", "registry-1.docker.io"}
	}
	return []string{host, "https://" + host, "http://" + host, "https://" + host + "/v1/", "https://" + host + "/v2/"}
}

func (r *authResolver) dockerConfigAuth(ctx context.Context, host string) (credentials, error) {
	path := r.configPath()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) || path == "" {
		return credentials{source: "no docker config at " + path}, nil
	}
	if err != nil {
		return credentials{}, fmt.Errorf("docker config: %w", err)
	}
	var cf dockerConfigFile
	if err := json.Unmarshal(b, &cf); err != nil {
		return credentials{}, fmt.Errorf("docker config %s: %w", path, err)
	}
	keys := configKeys(host)
	for _, k := range keys {
		if h := cf.CredHelpers[k]; h != "" {
			return r.helper(ctx, h, keys[0])
		}
	}
	if cf.CredsStore != "" {
		c, err := r.helper(ctx, cf.CredsStore, keys[0])
		if errors.Is(err, exec.ErrNotFound) {
			// A store named in config.json but not installed (a config
			// copied from Docker Desktop): its auths still count.
			err = nil
		}
		if err != nil || c.auth != nil {
			return c, err
		}
	}
	for _, k := range keys {
		a, ok := cf.Auths[k]
		if !ok {
			continue
		}
		ac := registry.AuthConfig{Username: a.Username, Password: a.Password, IdentityToken: a.IdentityToken, ServerAddress: host}
		if a.Auth != "" {
			raw, err := base64.StdEncoding.DecodeString(a.Auth)
			if err != nil {
				return credentials{}, fmt.Errorf("docker config %s: auths[%q].auth is not base64", path, k)
			}
			u, p, ok := strings.Cut(string(raw), ":")
			if !ok {
				return credentials{}, fmt.Errorf("docker config %s: auths[%q].auth is not user:password", path, k)
			}
			ac.Username, ac.Password = u, p
		}
		return credentials{auth: &ac, source: path}, nil
	}
	return credentials{source: "none for " + host + " in " + path}, nil
}

// helper runs docker-credential-NAME get with the server on stdin. A helper
// that knows no credentials for the server means anonymous.
func (r *authResolver) helper(ctx context.Context, name, server string) (credentials, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.HelperTimeout)
	defer cancel()
	prog := "docker-credential-" + name
	cmd := exec.CommandContext(ctx, prog, "get")
	cmd.Stdin = strings.NewReader(server)
	// Helpers print their errors on stdout (docker-credential-helpers'
	// protocol); stderr is not shown, as it may hold anything.
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.WaitDelay = time.Second // a helper's child holding stdout open
	err := cmd.Run()
	if err != nil {
		msg := strings.TrimSpace(out.String())
		if strings.Contains(msg, "credentials not found") {
			return credentials{source: prog + ": none for " + server}, nil
		}
		if errors.Is(err, exec.ErrNotFound) {
			return credentials{source: prog + " is not installed"}, fmt.Errorf("credential helper %s named in docker config is not installed: %w", prog, err)
		}
		if ctx.Err() != nil {
			return credentials{}, fmt.Errorf("credential helper %s did not answer within %s", prog, r.opts.HelperTimeout)
		}
		return credentials{}, fmt.Errorf("credential helper %s failed (%v): %s", prog, err, firstLine(msg, 200))
	}
	var v struct{ Username, Secret string }
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		return credentials{}, fmt.Errorf("credential helper %s: its answer is not JSON", prog)
	}
	ac := registry.AuthConfig{ServerAddress: server}
	if v.Username == "<token>" {
		ac.IdentityToken = v.Secret
	} else {
		ac.Username, ac.Password = v.Username, v.Secret
	}
	return credentials{auth: &ac, source: prog}, nil
}

func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		s = s[:n] + "…"
	}
	return s
}

func (r *authResolver) ecrAuth(ctx context.Context, host, region string) (credentials, error) {
	r.mu.Lock()
	t, ok := r.ecr[host]
	r.mu.Unlock()
	if ok && time.Until(t.expires) > 5*time.Minute {
		a := t.auth
		return credentials{auth: &a, source: "ECR token (cached)"}, nil
	}
	load := r.opts.AWSConfig
	if load == nil {
		load = func(ctx context.Context, region string) (aws.Config, error) {
			return awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRegion(region))
		}
	}
	cfg, err := load(ctx, region)
	if err != nil {
		return credentials{}, fmt.Errorf("ECR registry %s: loading AWS configuration: %w", host, err)
	}
	who := "AWS credentials from the default chain (AWS_PROFILE, AWS_ACCESS_KEY_ID, ~/.aws, SSO, instance role)"
	if cfg.Credentials != nil {
		c, err := cfg.Credentials.Retrieve(ctx)
		if err != nil {
			return credentials{}, fmt.Errorf("ECR registry %s: no AWS credentials found (set AWS_PROFILE or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, or run `aws sso login`): %s", host, firstLine(err.Error(), 300))
		}
		id := c.AccessKeyID
		if len(id) > 8 {
			id = id[:4] + "…" + id[len(id)-4:]
		}
		who = fmt.Sprintf("AWS access key %s from %s", id, c.Source)
	}
	var ecrOpts []func(*ecr.Options)
	if r.opts.ECREndpoint != "" {
		ecrOpts = append(ecrOpts, func(o *ecr.Options) { o.BaseEndpoint = aws.String(r.opts.ECREndpoint) })
	}
	out, err := ecr.NewFromConfig(cfg, ecrOpts...).GetAuthorizationToken(ctx, &ecr.GetAuthorizationTokenInput{})
	if err != nil {
		return credentials{source: who}, fmt.Errorf("ECR registry %s: GetAuthorizationToken with %s failed: %s", host, who, firstLine(err.Error(), 300))
	}
	if len(out.AuthorizationData) == 0 || out.AuthorizationData[0].AuthorizationToken == nil {
		return credentials{}, fmt.Errorf("ECR registry %s: GetAuthorizationToken returned no token", host)
	}
	d := out.AuthorizationData[0]
	raw, err := base64.StdEncoding.DecodeString(*d.AuthorizationToken)
	u, p, ok := strings.Cut(string(raw), ":")
	if err != nil || !ok {
		return credentials{}, fmt.Errorf("ECR registry %s: the authorization token is not base64 user:password", host)
	}
	tok := ecrToken{auth: registry.AuthConfig{Username: u, Password: p, ServerAddress: host}, expires: time.Now().Add(12 * time.Hour)}
	if d.ExpiresAt != nil {
		tok.expires = *d.ExpiresAt
	}
	r.mu.Lock()
	r.ecr[host] = tok
	r.mu.Unlock()
	a := tok.auth
	return credentials{auth: &a, source: "ECR token for " + who}, nil
}

// encodeAuth is the X-Registry-Auth header value the engine expects.
func encodeAuth(a *registry.AuthConfig) (string, error) {
	if a == nil {
		return "", nil
	}
	b, err := json.Marshal(a)
	if err != nil {
		return "", err
	}
	return base64.URLEncoding.EncodeToString(b), nil
}
