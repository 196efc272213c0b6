package authz

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestReloadKeepsOldPolicyOnError(t *testing.T) {
	ctx := context.Background()
	a := authzWithDocs(t, allowWhen(""))
	in := invoke(nil)
	mustAllow := func(want bool) {
		t.Helper()
		d, err := a.Authorize(ctx, in)
		if err != nil || d.Allowed != want {
			t.Fatalf("got %+v, %v; want allowed=%v", d, err, want)
		}
	}
	mustAllow(true)

	doc := filepath.Join(filepath.Dir(a.cfg.PoliciesFile), "doc0.json")
	// A bad new policy: Reload fails, names the file, the old one stays.
	if err := os.WriteFile(doc, []byte(`{"Statement": {"Effect": "Allow", "Action": "*", "Resource": "*", "Condition": {"Bogus": {"a:b": "c"}}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	err := a.Reload(ctx)
	if err == nil || !strings.Contains(err.Error(), "doc0.json:1") || !strings.Contains(err.Error(), `unknown condition operator "Bogus"`) {
		t.Fatalf("Reload: %v", err)
	}
	mustAllow(true)

	// A good new policy replaces it.
	if err := os.WriteFile(doc, []byte(`{"Statement": {"Effect": "Deny", "Action": "*", "Resource": "*"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	mustAllow(false)
}

func TestWatch(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := authzWithDocs(t, allowWhen(""))
	done := make(chan struct{})
	go func() { defer close(done); a.watch(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	doc := filepath.Join(filepath.Dir(a.cfg.PoliciesFile), "doc0.json")
	future := time.Now().Add(time.Hour) // a new mtime even on coarse clocks
	if err := os.WriteFile(doc, []byte(`{"Statement": {"Effect": "Deny", "Action": "*", "Resource": "*"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(doc, future, future); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		d, err := a.Authorize(ctx, invoke(nil))
		if err == nil && !d.Allowed && d.ExplicitDeny {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("Watch did not reload the changed policy")
}

// TestConcurrentReload decides from several goroutines while the policies
// are reloaded (run with -race).
func TestConcurrentReload(t *testing.T) {
	ctx := context.Background()
	a := authzWithDocs(t, allowWhen(`{"StringLike": {"sagemaker:TargetModel": "a/*"}}`))
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 4; g++ {
		go func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				in := invoke(map[string]string{KeyTargetModel: "a/" + strings.Repeat("x", i%7)})
				if d, err := a.Authorize(ctx, in); err != nil || !d.Allowed {
					errs <- fmt.Errorf("decision %+v, %v", d, err)
					return
				}
			}
		}()
	}
	for i := 0; i < 5; i++ {
		if err := a.Reload(ctx); err != nil {
			t.Fatal(err)
		}
	}
	close(done)
	for g := 0; g < 4; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// TestReloadNeverDisables: whatever happens to the files while mce runs, a
// reload keeps enforcing the previous policies unless the new files still
// configure some; an unsigned CreateModel stays refused throughout.
func TestReloadNeverDisables(t *testing.T) {
	const creds = `Credentials:
  - AccessKeyId: AKIAOPS00000EXAMPLE
    SecretAccessKey: ops-secret
    Arn: arn:aws:iam::123456789012:user/ops
    Policies: [all]
`
	const pols = `Policies:
  all: {Version: "2012-10-17", Statement: [{Effect: Allow, Action: "sagemaker:*", Resource: "*"}]}
`
	write := func(t *testing.T, path, data string) {
		t.Helper()
		os.RemoveAll(path)
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	unreadable := func(t *testing.T, path string) { // a directory where the file was: open works, read fails (even as root)
		t.Helper()
		os.RemoveAll(path)
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		name   string
		change func(t *testing.T, credPath, polPath string)
	}{
		{"credentials emptied", func(t *testing.T, c, _ string) { write(t, c, "") }},
		{"credentials only a comment", func(t *testing.T, c, _ string) { write(t, c, "# nothing yet\n") }},
		{"both emptied", func(t *testing.T, c, p string) { write(t, c, ""); write(t, p, "") }},
		{"policies emptied", func(t *testing.T, _, p string) { write(t, p, "\n\n") }},
		{"credentials removed", func(t *testing.T, c, _ string) { os.Remove(c) }},
		{"credentials unreadable", func(t *testing.T, c, _ string) { unreadable(t, c) }},
		{"both unreadable", func(t *testing.T, c, p string) { unreadable(t, c); unreadable(t, p) }},
		{"credentials invalid", func(t *testing.T, c, _ string) { write(t, c, "Credentials: [\n") }},
		{"no principals", func(t *testing.T, c, _ string) { write(t, c, "Credentials: []\n") }},
		{"no policy any more", func(t *testing.T, c, p string) {
			write(t, c, strings.Replace(creds, "Policies: [all]", "Policies: []", 1))
			write(t, p, "Policies: {}\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			credPath, polPath := filepath.Join(dir, "creds.yaml"), filepath.Join(dir, "policies.yaml")
			write(t, credPath, creds)
			write(t, polPath, pols)
			a, err := Load(ctx, Config{CredentialsFile: credPath, PoliciesFile: polPath})
			if err != nil {
				t.Fatal(err)
			}
			anon := Input{Principal: Principal{Anonymous: true}, Action: "sagemaker:CreateModel", Resource: "*", Time: testNow}
			ops := Input{Principal: PrincipalFromARN("arn:aws:iam::123456789012:user/ops"), Action: "sagemaker:CreateModel", Resource: "*", Time: testNow}
			check := func(when string) {
				t.Helper()
				if !a.Enabled() {
					t.Fatalf("%s: authorization is off", when)
				}
				if d, err := a.Authorize(ctx, anon); err != nil || d.Allowed {
					t.Fatalf("%s: unsigned CreateModel: %+v, %v", when, d, err)
				}
				if d, err := a.Authorize(ctx, ops); err != nil || !d.Allowed {
					t.Fatalf("%s: ops CreateModel: %+v, %v", when, d, err)
				}
				if _, ok := a.LookupAccessKey("AKIAOPS00000EXAMPLE"); !ok {
					t.Fatalf("%s: the access key is gone", when)
				}
			}
			check("before")
			tc.change(t, credPath, polPath)
			if err := a.Reload(ctx); err == nil {
				t.Fatal("Reload succeeded")
			}
			check("after Reload")

			// Watch sees the same change and refuses it too.
			wctx, cancel := context.WithCancel(ctx)
			done := make(chan struct{})
			go func() { defer close(done); a.watch(wctx, 5*time.Millisecond) }()
			time.Sleep(50 * time.Millisecond)
			cancel()
			<-done
			check("after Watch")

			// Good files again: the reload goes through.
			write(t, credPath, creds)
			write(t, polPath, strings.Replace(pols, "Allow", "Deny", 1))
			if err := a.Reload(ctx); err != nil {
				t.Fatalf("Reload of good files: %v", err)
			}
			if d, _ := a.Authorize(ctx, ops); d.Allowed {
				t.Fatal("the new policies are not in force")
			}
		})
	}
}

// TestReloadMayEnable: a host started without policies may get them by a
// reload (tightening needs no restart).
func TestReloadMayEnable(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	pf := filepath.Join(dir, "policies.yaml")
	if err := os.WriteFile(pf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(ctx, Config{PoliciesFile: pf})
	if err != nil {
		t.Fatal(err)
	}
	if a.Enabled() {
		t.Fatal("enabled with an empty file")
	}
	if err := os.WriteFile(pf, []byte("Policies:\n  d: {Statement: [{Effect: Deny, Action: \"*\", Resource: \"*\"}]}\nAttach: {anonymous: [d]}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := a.Reload(ctx); err != nil {
		t.Fatal(err)
	}
	if !a.Enabled() {
		t.Fatal("not enabled after the reload")
	}
}
