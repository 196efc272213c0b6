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
