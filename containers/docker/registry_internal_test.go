package docker

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestRegistryHost(t *testing.T) {
	// The host the engine pulls from (github.com/distribution/reference) is
	// the host whose credentials go with the pull.
	for _, tc := range []struct{ ref, want string }{
		{"ubuntu:24.04", "docker.io"},
		{"library/ubuntu", "docker.io"},
		{"docker.io/library/ubuntu:24.04", "docker.io"},
		{"index.docker.io/library/ubuntu", "docker.io"},
		{"mce-example/probe:latest", "docker.io"},
		{"localhost/x", "localhost"},
		{"localhost:5000/x:1", "localhost:5000"},
		{"127.0.0.1:5000/a/b:c", "127.0.0.1:5000"},
		{"[::1]:5000/a:b", "[::1]:5000"},
		{"ghcr.io/o/i@sha256:" + strings.Repeat("a", 64), "ghcr.io"},
		{"ghcr.io/o/i:1@sha256:" + strings.Repeat("b", 64), "ghcr.io"},
		{"123456789012.dkr.ecr.eu-west-1.amazonaws.com/x:1", "123456789012.dkr.ecr.eu-west-1.amazonaws.com"},
		// An upper-case first component is a host to the engine, not a
		// Docker Hub user: Docker Hub's credentials must not go there.
		{"Evilhost/img:1", "Evilhost"},
		{"EVIL/img", "EVIL"},
		{"Registry.Example.com/team/img", "Registry.Example.com"},
		{"myhost:80/img", "myhost:80"},
		{"evilhost/img:1", "docker.io"},
	} {
		got, err := registryHost(tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("registryHost(%q) = %q, %v; want %q", tc.ref, got, err, tc.want)
		}
	}
	// What the engine refuses is refused, not guessed at.
	for _, ref := range []string{"", "Evilhost/Img:1", "UPPER", "a//b", "img@sha256:short", "img:tag:tag", "-lead/x"} {
		if got, err := registryHost(ref); err == nil {
			t.Errorf("registryHost(%q) = %q, want an error", ref, got)
		}
	}
	for host, region := range map[string]string{
		"123456789012.dkr.ecr.us-east-1.amazonaws.com":          "us-east-1",
		"123456789012.dkr.ecr.cn-north-1.amazonaws.com.cn":      "cn-north-1",
		"123456789012.dkr.ecr-fips.us-gov-west-1.amazonaws.com": "us-gov-west-1",
		"public.ecr.aws": "",
		"123456789012.dkr.ecr.us-east-1.amazonaws.com.evil.io": "",
	} {
		m := ecrHost.FindStringSubmatch(host)
		if (m == nil) != (region == "") || (m != nil && m[2] != region) {
			t.Errorf("ecrHost(%q) = %v, want region %q", host, m, region)
		}
	}
}

// TestDockerConfigSources: credsStore for any registry, docker.io's CLI key,
// identity tokens, and a helper's failure reported without its raw stderr.
func TestDockerConfigSources(t *testing.T) {
	bin := t.TempDir()
	helper := `#!/bin/sh
read server
case "$server" in
  https://index.docker.io/v1/) echo '{"Username":"hubuser","Secret":"hubpass"}';;
  tok.example) echo '{"Username":"<token>","Secret":"idtoken"}';;
  broken.example) echo 'secret internal detail' >&2; echo 'helper exploded'; exit 3;;
  slow.example) sleep 5;;
  *) echo 'credentials not found in native keychain'; exit 1;;
esac
`
	if err := os.WriteFile(filepath.Join(bin, "docker-credential-mcestore"), []byte(helper), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{
		"credsStore": "mcestore",
		"auths":      map[string]any{"plain.example": map[string]string{"identitytoken": "tok2"}},
	})
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600)
	r := newAuthResolver(RegistryOptions{DockerConfigDir: dir, HelperTimeout: 500 * time.Millisecond})
	ctx := context.Background()

	c, err := r.resolve(ctx, "docker.io")
	if err != nil || c.auth == nil || c.auth.Username != "hubuser" || c.auth.Password != "hubpass" {
		t.Errorf("docker.io: %+v, %v", c.auth, err)
	}
	c, err = r.resolve(ctx, "tok.example")
	if err != nil || c.auth == nil || c.auth.IdentityToken != "idtoken" || c.auth.Username != "" {
		t.Errorf("identity token from helper: %+v, %v", c.auth, err)
	}
	c, err = r.resolve(ctx, "plain.example") // the store has none: auths
	if err != nil || c.auth == nil || c.auth.IdentityToken != "tok2" {
		t.Errorf("auths identitytoken: %+v, %v", c.auth, err)
	}
	c, err = r.resolve(ctx, "none.example")
	if err != nil || c.auth != nil {
		t.Errorf("unknown registry: %+v, %v; want anonymous", c.auth, err)
	}
	_, err = r.resolve(ctx, "broken.example")
	if err == nil || !strings.Contains(err.Error(), "docker-credential-mcestore failed") || strings.Contains(err.Error(), "secret internal detail") {
		t.Errorf("broken helper: %v", err)
	}
	start := time.Now()
	_, err = r.resolve(ctx, "slow.example")
	if err == nil || !strings.Contains(err.Error(), "did not answer within 500ms") || time.Since(start) > 3*time.Second {
		t.Errorf("slow helper: %v after %s", err, time.Since(start))
	}

	// A credsStore that is not installed does not hide auths.
	cfg, _ = json.Marshal(map[string]any{
		"credsStore": "not-installed-mce",
		"auths":      map[string]any{"plain.example": map[string]string{"username": "u", "password": "p"}},
	})
	os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600)
	c, err = r.resolve(ctx, "plain.example")
	if err != nil || c.auth == nil || c.auth.Username != "u" {
		t.Errorf("auths behind a missing credsStore: %+v, %v", c.auth, err)
	}
}

// TestDockerHubCredentialsStayWithDockerHub: a reference the engine pulls
// from another registry gets none of Docker Hub's credentials.
func TestDockerHubCredentialsStayWithDockerHub(t *testing.T) {
	dir := t.TempDir()
	hub := base64.StdEncoding.EncodeToString([]byte("hubuser:hubpass"))
	cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{
		"https://index.docker.io/v1/": map[string]string{"auth": hub},
	}})
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	r := newAuthResolver(RegistryOptions{DockerConfigDir: dir})
	for _, tc := range []struct {
		ref     string
		withHub bool
	}{
		{"img:1", true},
		{"docker.io/library/img:1", true},
		{"someuser/img:1", true},
		{"Evilhost/img:1", false},
		{"Evilhost:443/img:1", false},
		{"localhost/img:1", false},
		{"evil.example/img@sha256:" + strings.Repeat("c", 64), false},
	} {
		host, err := registryHost(tc.ref)
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		c, err := r.resolve(context.Background(), host)
		if err != nil {
			t.Fatalf("%s: %v", tc.ref, err)
		}
		if got := c.auth != nil && c.auth.Username == "hubuser"; got != tc.withHub {
			t.Errorf("%s (registry %s): Docker Hub's credentials sent = %v, want %v", tc.ref, host, got, tc.withHub)
		}
	}
}
