package docker_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/moby/moby/api/types/registry"
	"github.com/moby/moby/client"
	"github.com/rs/zerolog"
	"golang.org/x/crypto/bcrypt"

	"github.com/mce-run/mce/containers/docker"
	"github.com/mce-run/mce/internal/testenv"
)

const registryBin = "/usr/bin/docker-registry"

// localRegistry runs Debian's docker-registry on 127.0.0.1 with htpasswd
// auth for the given users and returns its host:port.
func localRegistry(t *testing.T, users map[string]string) string {
	t.Helper()
	if _, err := os.Stat(registryBin); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("CI is set but %s is missing (scripts/deps.sh installs docker-registry)", registryBin)
		}
		t.Skipf("SKIPPING registry test: %s is missing (apt-get install docker-registry, or scripts/deps.sh); CI never skips this", registryBin)
	}
	dir := t.TempDir()
	var htpasswd strings.Builder
	for u, p := range users {
		h, err := bcrypt.GenerateFromPassword([]byte(p), bcrypt.MinCost)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&htpasswd, "%s:%s\n", u, h)
	}
	if err := os.WriteFile(filepath.Join(dir, "htpasswd"), []byte(htpasswd.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	cfg := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
http:
  addr: %s
auth:
  htpasswd:
    realm: mce-test
    path: %s
`, filepath.Join(dir, "data"), addr, filepath.Join(dir, "htpasswd"))
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var out testenv.SyncBuffer
	cmd := exec.Command(registryBin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get("http://" + addr + "/v2/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusUnauthorized {
				return addr
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("registry on %s did not answer: %v\n%s", addr, err, out.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func authHeader(t *testing.T, user, pass, server string) string {
	b, err := json.Marshal(registry.AuthConfig{Username: user, Password: pass, ServerAddress: server})
	if err != nil {
		t.Fatal(err)
	}
	return base64.URLEncoding.EncodeToString(b)
}

// pushUnique imports a one-layer image of 2 MiB of random bytes as ref,
// pushes it with the given credentials and removes it locally, so that a
// pull must download its layer again.
func pushUnique(t *testing.T, cli *client.Client, ref, user, pass, server string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	blob := make([]byte, 2<<20)
	rand.Read(blob)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	tw.WriteHeader(&tar.Header{Name: "blob", Mode: 0o644, Size: int64(len(blob)), Typeflag: tar.TypeReg})
	tw.Write(blob)
	tw.Close()
	res, err := cli.ImageImport(ctx, client.ImageImportSource{Source: &buf, SourceName: "-"}, ref, client.ImageImportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, res)
	res.Close()
	push, err := cli.ImagePush(ctx, ref, client.ImagePushOptions{RegistryAuth: authHeader(t, user, pass, server)})
	if err != nil {
		t.Fatal(err)
	}
	for m, err := range push.JSONMessages(ctx) {
		if err != nil {
			t.Fatal(err)
		}
		if m.Error != nil {
			t.Fatalf("push %s: %s", ref, m.Error.Message)
		}
	}
	removeImage(t, cli, ref)
}

func removeImage(t *testing.T, cli *client.Client, ref string) {
	t.Helper()
	if _, err := cli.ImageRemove(context.Background(), ref, client.ImageRemoveOptions{Force: true, PruneChildren: true}); err != nil {
		t.Fatalf("remove %s: %v", ref, err)
	}
}

func pullRuntime(t *testing.T, cli *client.Client, logs io.Writer, reg docker.RegistryOptions) *docker.Runtime {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rt, err := docker.New(ctx, docker.Options{
		Client: cli, Instance: testenv.Instance(t), StateDir: t.TempDir(),
		Logger: zerolog.New(logs), PullPolicy: docker.PullIfMissing, Registry: reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

func writeDockerConfig(t *testing.T, v any) string {
	t.Helper()
	dir := t.TempDir()
	b, _ := json.Marshal(v)
	if err := os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestPullFromPrivateRegistry pulls from a real registry with htpasswd auth:
// with the credentials in a docker config.json (auths), with a credential
// helper, and without any (a clear error naming docker login).
func TestPullFromPrivateRegistry(t *testing.T) {
	cli := testenv.Docker(t)
	reg := localRegistry(t, map[string]string{"mce": "s3cret"})
	ref := reg + "/mce-test/blob:" + testenv.Instance(t)
	pushUnique(t, cli, ref, "mce", "s3cret", reg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	t.Run("no credentials", func(t *testing.T) {
		rt := pullRuntime(t, cli, io.Discard, docker.RegistryOptions{DockerConfigDir: t.TempDir()})
		err := rt.Pull(ctx, ref)
		if !errors.Is(err, docker.ErrUnauthorized) || !strings.Contains(err.Error(), "docker login "+reg) {
			t.Fatalf("err = %v, want unauthorized naming `docker login %s`", err, reg)
		}
		t.Log(err)
	})

	t.Run("config.json auths, 15 callers, one pull with progress", func(t *testing.T) {
		dir := writeDockerConfig(t, map[string]any{"auths": map[string]any{
			reg: map[string]string{"auth": base64.StdEncoding.EncodeToString([]byte("mce:s3cret"))}}})
		var logs testenv.SyncBuffer
		rt := pullRuntime(t, cli, &logs, docker.RegistryOptions{DockerConfigDir: dir})
		var wg sync.WaitGroup
		errs := make([]error, 15)
		for i := range errs {
			wg.Go(func() { errs[i] = rt.Pull(ctx, ref) })
		}
		wg.Wait()
		defer removeImage(t, cli, ref)
		for _, err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			t.Fatalf("pulled image not present: %v", err)
		}
		if n := strings.Count(logs.String(), `"message":"pulling image"`); n != 1 {
			t.Errorf("%d pulls started for 15 callers, want 1:\n%s", n, logs.String())
		}
		var done struct {
			Layers     int   `json:"layers"`
			LayersDone int   `json:"layers_done"`
			Bytes      int64 `json:"downloaded_bytes"`
			Message    string
		}
		for line := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(line, `"message":"pulled image"`) {
				json.Unmarshal([]byte(line), &done)
			}
		}
		if done.Layers != 1 || done.LayersDone != 1 || done.Bytes < 1<<20 {
			t.Errorf("final progress %+v, want 1 of 1 layers and over 1 MiB:\n%s", done, logs.String())
		}
		t.Log(logs.String())
	})

	t.Run("credential helper", func(t *testing.T) {
		bin := t.TempDir()
		helper := "#!/bin/sh\nread server\nif [ \"$server\" = \"" + reg + "\" ]; then echo '{\"ServerURL\":\"'$server'\",\"Username\":\"mce\",\"Secret\":\"s3cret\"}'; else echo 'credentials not found in native keychain'; exit 1; fi\n"
		if err := os.WriteFile(filepath.Join(bin, "docker-credential-mcetest"), []byte(helper), 0o755); err != nil {
			t.Fatal(err)
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		dir := writeDockerConfig(t, map[string]any{"credHelpers": map[string]string{reg: "mcetest"}})
		rt := pullRuntime(t, cli, io.Discard, docker.RegistryOptions{DockerConfigDir: dir})
		if err := rt.Pull(ctx, ref); err != nil {
			t.Fatal(err)
		}
		removeImage(t, cli, ref)
	})

	t.Run("deploy pulls a missing image", func(t *testing.T) {
		e := newEnv(t)
		probe := reg + "/mce-test/probe:" + e.instance
		if _, err := cli.ImageTag(ctx, client.ImageTagOptions{Source: e.probe, Target: probe}); err != nil {
			t.Fatal(err)
		}
		pushProbe := func() {
			push, err := cli.ImagePush(ctx, probe, client.ImagePushOptions{RegistryAuth: authHeader(t, "mce", "s3cret", reg)})
			if err != nil {
				t.Fatal(err)
			}
			if err := push.Wait(ctx); err != nil {
				t.Fatal(err)
			}
		}
		pushProbe()
		if _, err := cli.ImageRemove(ctx, probe, client.ImageRemoveOptions{}); err != nil { // the tag only
			t.Fatal(err)
		}
		dir := writeDockerConfig(t, map[string]any{"auths": map[string]any{
			reg: map[string]string{"username": "mce", "password": "s3cret"}}})
		e.rt.Close()
		rt, err := docker.New(ctx, docker.Options{
			Client: cli, Instance: e.instance, StateDir: e.state, Logger: zerolog.New(e.logs),
			StopGrace: 2 * time.Second, PullPolicy: docker.PullIfMissing,
			Registry: docker.RegistryOptions{DockerConfigDir: dir},
		})
		if err != nil {
			t.Fatal(err)
		}
		e.rt = rt
		defer cli.ImageRemove(context.Background(), probe, client.ImageRemoveOptions{})
		d, err := e.deploy(t, probeSpec(probe, 3, nil))
		if err != nil {
			t.Fatal(err)
		}
		if n := len(d.Containers()); n != 3 {
			t.Fatalf("%d containers, want 3", n)
		}
		if n := strings.Count(e.logs.String(), `"message":"pulling image"`); n != 1 {
			t.Errorf("%d pulls for 3 containers of one image, want 1", n)
		}
	})

	t.Run("wrong password", func(t *testing.T) {
		dir := writeDockerConfig(t, map[string]any{"auths": map[string]any{
			reg: map[string]string{"username": "mce", "password": "wrong"}}})
		rt := pullRuntime(t, cli, io.Discard, docker.RegistryOptions{DockerConfigDir: dir})
		err := rt.Pull(ctx, ref)
		if !errors.Is(err, docker.ErrUnauthorized) || !strings.Contains(err.Error(), "were refused") {
			t.Fatalf("err = %v, want the credentials refused", err)
		}
	})

	t.Run("not found", func(t *testing.T) {
		dir := writeDockerConfig(t, map[string]any{"auths": map[string]any{
			reg: map[string]string{"username": "mce", "password": "s3cret"}}})
		rt := pullRuntime(t, cli, io.Discard, docker.RegistryOptions{DockerConfigDir: dir})
		missing := reg + "/mce-test/nothing-here:v1"
		err := rt.Pull(ctx, missing)
		if !errors.Is(err, docker.ErrNotFound) || !strings.Contains(err.Error(), missing) {
			t.Fatalf("err = %v, want not found naming %s", err, missing)
		}
	})
}

// TestPullFromECR takes the ECR path: a reference on an ECR host gets its
// credentials from GetAuthorizationToken (a local stand-in of ECR's API),
// cached for the next pull; the registry is the real one on 127.0.0.1.
func TestPullFromECR(t *testing.T) {
	cli := testenv.Docker(t)
	const ecrPass = "ecr-token-password"
	reg := localRegistry(t, map[string]string{"AWS": ecrPass})
	const host = "123456789012.dkr.ecr.us-west-2.amazonaws.com"
	tag := testenv.Instance(t)
	pushUnique(t, cli, reg+"/mce-test/blob:"+tag, "AWS", ecrPass, reg)

	var calls atomic.Int32
	var gotKey atomic.Value
	ecrAPI := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AmazonEC2ContainerRegistry_V20150921.GetAuthorizationToken" {
			http.Error(w, "unexpected call", http.StatusBadRequest)
			return
		}
		calls.Add(1)
		gotKey.Store(r.Header.Get("Authorization"))
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		fmt.Fprintf(w, `{"authorizationData":[{"authorizationToken":%q,"expiresAt":%d,"proxyEndpoint":"https://%s"}]}`,
			base64.StdEncoding.EncodeToString([]byte("AWS:"+ecrPass)), time.Now().Add(12*time.Hour).Unix(), host)
	}))
	defer ecrAPI.Close()

	var logs testenv.SyncBuffer
	rt := pullRuntime(t, cli, &logs, docker.RegistryOptions{
		DockerConfigDir: t.TempDir(),
		ECREndpoint:     ecrAPI.URL,
		AWSConfig: func(ctx context.Context, region string) (aws.Config, error) {
			if region != "us-west-2" {
				t.Errorf("region %q, want us-west-2 from the reference", region)
			}
			return aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider("AKIATESTKEY12345", "secret", "")}, nil
		},
		HostAddrs: map[string]string{host: reg},
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	ref := host + "/mce-test/blob:" + tag
	for i := range 2 {
		if err := rt.Pull(ctx, ref); err != nil {
			t.Fatalf("pull %d: %v", i+1, err)
		}
		if _, err := cli.ImageInspect(ctx, ref); err != nil {
			t.Fatalf("pulled image not tagged %s: %v", ref, err)
		}
		removeImage(t, cli, ref)
		removeImage(t, cli, reg+"/mce-test/blob:"+tag)
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("GetAuthorizationToken called %d times, want 1 (the token is cached until it expires)", n)
	}
	if k, _ := gotKey.Load().(string); !strings.Contains(k, "AKIATESTKEY12345") {
		t.Errorf("GetAuthorizationToken not signed with the caller's key: %q", k)
	}

	t.Run("no AWS credentials", func(t *testing.T) {
		rt := pullRuntime(t, cli, io.Discard, docker.RegistryOptions{
			ECREndpoint: ecrAPI.URL,
			AWSConfig: func(ctx context.Context, region string) (aws.Config, error) {
				return aws.Config{Region: region, Credentials: aws.AnonymousCredentials{}}, nil
			},
		})
		err := rt.Pull(ctx, ref)
		if err == nil || !strings.Contains(err.Error(), host) || !strings.Contains(err.Error(), "AWS") {
			t.Fatalf("err = %v, want one naming the ECR registry and AWS credentials", err)
		}
		t.Log(err)
	})
}

func TestParsePullPolicy(t *testing.T) {
	for in, want := range map[string]docker.PullPolicy{
		"never": docker.PullNever, "false": docker.PullNever, "": docker.PullNever,
		"if-missing": docker.PullIfMissing, "true": docker.PullIfMissing,
		"always": docker.PullAlways, "Always": docker.PullAlways,
	} {
		if got, err := docker.ParsePullPolicy(in); err != nil || got != want {
			t.Errorf("ParsePullPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := docker.ParsePullPolicy("sometimes"); err == nil || !strings.Contains(err.Error(), "never, if-missing or always") {
		t.Errorf("ParsePullPolicy(sometimes): err = %v", err)
	}
}
