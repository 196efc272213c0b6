package authz

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A credentials file whose first half is valid YAML on its own: alice may
// do everything. The second half adds the Deny that keeps her off the
// victim endpoint.
const (
	halfCreds = `Credentials:
  - AccessKeyId: AKIAALICE0000EXAMPLE
    SecretAccessKey: alice-secret
    Arn: arn:aws:iam::123456789012:user/alice
    Policies:
      - Statement:
          - {Effect: Allow, Action: "*", Resource: "*"}
`
	restCreds = `          - {Effect: Deny, Action: "*", Resource: "arn:aws:sagemaker:us-east-1:123456789012:endpoint/victim"}
`
)

var victimInput = Input{Principal: Principal{ARN: "arn:aws:iam::123456789012:user/alice", AccessKeyID: "AKIAALICE0000EXAMPLE"},
	Action: ActionInvokeEndpoint, Resource: EndpointARN(testRegion, testAccount, "victim")}

func victimAllowed(t *testing.T, a *Authorizer) bool {
	t.Helper()
	d, err := a.Authorize(context.Background(), victimInput)
	if err != nil {
		t.Fatal(err)
	}
	return d.Allowed
}

// loadCreds writes content as the credentials file and loads it.
func loadCreds(t *testing.T, content string, settle time.Duration) (*Authorizer, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "creds.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := Load(context.Background(), Config{CredentialsFile: path, ReloadSettle: settle})
	if err != nil {
		t.Fatal(err)
	}
	if victimAllowed(t, a) != !strings.Contains(content, "victim") {
		t.Fatal("the loaded policies do not say what the file says")
	}
	return a, path
}

// writeInHalves rewrites path in place the way an editor or a slow copy
// does: truncate, the first half, a pause, the rest. started is closed once
// the first half is on disk.
func writeInHalves(t *testing.T, path string, pause time.Duration, started chan<- struct{}) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		t.Error(err)
		close(started)
		return
	}
	defer f.Close()
	f.WriteString(halfCreds)
	close(started)
	time.Sleep(pause)
	f.WriteString(restCreds)
}

// TestReloadWaitsForCompleteFile: a reload (SIGHUP) that reads a file
// while it is being written applied the valid first half — without the
// Deny — until the next change. It must apply only the complete file.
func TestReloadWaitsForCompleteFile(t *testing.T) {
	a, path := loadCreds(t, halfCreds+restCreds, 300*time.Millisecond)
	started := make(chan struct{})
	done := make(chan struct{})
	go func() { defer close(done); writeInHalves(t, path, 100*time.Millisecond, started) }()
	<-started
	if err := a.Reload(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	if victimAllowed(t, a) {
		t.Fatal("the reload applied the half-written file: the Deny is gone")
	}
}

// TestWatchNeverAppliesHalfFile: the file watcher must not put the first
// half in force, even for a moment.
func TestWatchNeverAppliesHalfFile(t *testing.T) {
	a, path := loadCreds(t, halfCreds+restCreds, 300*time.Millisecond)
	ctx, cancel := context.WithCancel(context.Background())
	watching := make(chan struct{})
	go func() { defer close(watching); a.watch(ctx, 10*time.Millisecond) }()
	defer func() { cancel(); <-watching }()

	future := time.Now().Add(time.Hour) // a new mtime even on coarse clocks
	started := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		writeInHalves(t, path, 150*time.Millisecond, started)
		os.Chtimes(path, future, future)
	}()
	<-started
	deadline := time.Now().Add(time.Second)
	for time.Now().Before(deadline) {
		if victimAllowed(t, a) {
			t.Fatal("the watcher applied the half-written file: the Deny was gone")
		}
		time.Sleep(2 * time.Millisecond)
	}
	<-done
}

// TestReloadRefusesFIFO: a FIFO at the credentials path hung the reloader
// for good (opening it waits for a writer), and every later reload queued
// behind it. It is refused at once with an error naming it; the old
// policies stay and the next reload of a regular file works.
func TestReloadRefusesFIFO(t *testing.T) {
	a, path := loadCreds(t, halfCreds+restCreds, 10*time.Millisecond)
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	t.Cleanup(func() { // release a reader the old code left blocked in open
		if f, err := os.OpenFile(path, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			f.Close()
		}
	})
	reload := func() error {
		errc := make(chan error, 1)
		go func() { errc <- a.Reload(context.Background()) }()
		select {
		case err := <-errc:
			return err
		case <-time.After(3 * time.Second):
			t.Fatal("Reload of a FIFO did not return")
			return nil
		}
	}
	for range 2 { // a second reload is not stuck behind the first
		if err := reload(); err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), path) {
			t.Fatalf("Reload of a FIFO: %v; want an error naming it as not a regular file", err)
		}
	}
	if victimAllowed(t, a) {
		t.Fatal("the old policies did not stay")
	}
	errc := make(chan error, 1)
	go func() {
		_, err := Load(context.Background(), Config{CredentialsFile: path})
		errc <- err
	}()
	select {
	case err := <-errc:
		if err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("Load of a FIFO: %v", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("Load of a FIFO did not return")
	}
	os.Remove(path)
	if err := os.WriteFile(path, []byte(halfCreds), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := reload(); err != nil {
		t.Fatal(err)
	}
	if !victimAllowed(t, a) {
		t.Fatal("the regular file was not applied after the FIFO")
	}
}
