// Package kubetest runs a real single-node Kubernetes cluster for tests:
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler and the kubelet
// (built from Go modules by scripts/kube/build.sh, cached per machine) with a
// private containerd from Debian, all inside a private network and mount
// namespace that scripts/kube/cluster.sh creates and removes. The host reaches
// the namespace over a veth pair at Cluster.Addr; pod IPs are reachable only
// from inside it (Cluster.Command, Cluster.Exec).
//
// The tests are opt-in: without MCE_KUBE_TEST set, Start skips the test. With
// MCE_KUBE_TEST=1, a missing prerequisite (root, the Debian packages
// containerd, containernetworking-plugins, iproute2, util-linux, or the cached
// binaries) fails it.
//
// It depends on nothing else in mce.
package kubetest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// EnvVar opts in to the Kubernetes tests.
const EnvVar = "MCE_KUBE_TEST"

// Cluster is one running cluster. Its fields are set by Start and read-only.
type Cluster struct {
	Dir            string // everything the cluster writes: logs/, kubeconfig, pki/, ...
	Kubeconfig     string // a kubeconfig with the admin token (namespace default)
	Server         string // https://<Addr>:6443
	Token          string // bearer token with full rights (authorization is AlwaysAllow)
	CAFile         string // the apiserver's CA bundle (PEM)
	Addr           string // the node's address inside the namespace, reachable from the host
	Netns          string // the network namespace's name (ip netns)
	NetnsPath      string // /run/netns/<Netns>
	HolderPID      int    // the process holding the namespaces (nsenter --target)
	ContainerdSock string // the private containerd's socket
	Node           string // the node's name

	script string
}

// Start brings a cluster up in a new temporary folder (/tmp/mce-kube-*) and
// registers its complete teardown, and the folder's removal, with t.Cleanup.
// It skips the test unless MCE_KUBE_TEST is set.
func Start(t testing.TB) *Cluster {
	t.Helper()
	if os.Getenv(EnvVar) == "" {
		t.Skipf("Kubernetes tests are opt-in: set %s=1 (needs root, containerd, containernetworking-plugins and scripts/kube/build.sh's binaries)", EnvVar)
	}
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Fatal("kubetest: the cluster needs root (network and mount namespaces)")
	}
	for _, p := range []string{"containerd", "ctr", "nsenter", "unshare", "ip", "curl", "openssl", "docker", "python3"} {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("kubetest: %s not found; scripts/deps.sh installs the Debian packages", p)
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		t.Fatal("kubetest: /usr/lib/cni/bridge not found; install Debian's containernetworking-plugins (scripts/deps.sh)")
	}
	bin, err := Binaries(root)
	if err != nil {
		t.Fatal(err)
	}

	// Not t.TempDir: its name grows with the test's, and containerd's sockets
	// under it must stay within a unix socket path's 108 bytes.
	dir, err := os.MkdirTemp("", "mce-kube-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{Dir: dir, script: filepath.Join(root, "scripts", "kube", "cluster.sh")}
	t.Cleanup(func() {
		if t.Failed() {
			c.dumpLogs(t)
		}
		if err := c.Down(); err != nil {
			t.Error(err)
			return // keep the folder: down needs it to try again
		}
		if err := os.RemoveAll(dir); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	up := exec.CommandContext(ctx, c.script, "up", dir)
	up.Env = append(os.Environ(), "MCE_KUBE_BIN="+bin)
	// The components keep running after the script; only the script's own
	// output is waited for (it writes theirs to files).
	if out, err := up.CombinedOutput(); err != nil {
		t.Fatalf("kubetest: cluster.sh up: %v\n%s", err, out)
	} else {
		t.Logf("%s", bytes.TrimSpace(out))
	}
	if err := c.load(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}

// Down stops the cluster and removes everything it made outside Dir
// (processes, mounts, namespaces, the veth pair). It is safe to call again;
// Start's cleanup calls it too.
func (c *Cluster) Down() error {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var err error
	for range 2 {
		var out []byte
		if out, err = exec.CommandContext(ctx, c.script, "down", c.Dir).CombinedOutput(); err == nil {
			return nil
		}
		err = fmt.Errorf("kubetest: cluster.sh down: %w\n%s", err, out)
		// down is safe to run again; once (in CI, under another cluster's
		// teardown) the script itself was ended by a SIGTERM it did not send.
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ProcessState.Exited() || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// Binaries returns the folder holding the cached Kubernetes and etcd binaries
// of the pinned versions (scripts/kube/build.sh check), or an error saying
// how to build them.
func Binaries(root string) (string, error) {
	out, err := exec.Command(filepath.Join(root, "scripts", "kube", "build.sh"), "check").Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: the Kubernetes binaries are not built: run scripts/kube/build.sh (once per machine, 10-15 minutes): %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (c *Cluster) load(ctx context.Context) error {
	out, err := exec.CommandContext(ctx, c.script, "env", c.Dir).Output()
	if err != nil {
		return fmt.Errorf("kubetest: cluster.sh env: %w", err)
	}
	env := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), "="); ok {
			env[k] = v
		}
	}
	token, err := os.ReadFile(env["MCE_KUBE_TOKEN_FILE"])
	if err != nil {
		return fmt.Errorf("kubetest: %w", err)
	}
	pid, err := strconv.Atoi(env["MCE_KUBE_HOLDER_PID"])
	if err != nil {
		return fmt.Errorf("kubetest: holder pid %q: %w", env["MCE_KUBE_HOLDER_PID"], err)
	}
	c.Kubeconfig = env["KUBECONFIG"]
	c.Server = env["MCE_KUBE_SERVER"]
	c.Token = strings.TrimSpace(string(token))
	c.CAFile = env["MCE_KUBE_CA"]
	c.Addr = env["MCE_KUBE_ADDR"]
	c.Netns = env["MCE_KUBE_NETNS"]
	c.NetnsPath = env["MCE_KUBE_NETNS_PATH"]
	c.HolderPID = pid
	c.ContainerdSock = env["MCE_KUBE_CONTAINERD_SOCK"]
	c.Node = env["MCE_KUBE_NODE"]
	for k, v := range env {
		if v == "" {
			return fmt.Errorf("kubetest: cluster.sh env: %s is empty", k)
		}
	}
	return nil
}

// Command returns a command that runs inside the cluster's network namespace,
// where pod IPs are reachable (the host's file system stays visible). Long-
// running processes (mce itself) are started this way.
func (c *Cluster) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "nsenter", append([]string{"--net=" + c.NetnsPath, "--", name}, args...)...)
}

// Exec runs a command inside the cluster's network namespace, with a minute's
// limit, and returns its combined output.
func (c *Cluster) Exec(args ...string) ([]byte, error) {
	if len(args) == 0 {
		return nil, errors.New("kubetest: Exec needs a command")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Command(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return out, fmt.Errorf("kubetest: %s: %w: %s", strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return out, nil
}

// LoadImage copies an image from the local Docker engine into the cluster's
// containerd (docker save | ctr images import), so pods with
// imagePullPolicy IfNotPresent or Never run it without a registry.
func (c *Cluster) LoadImage(t testing.TB, ref string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	save := exec.CommandContext(ctx, "docker", "save", ref)
	imp := exec.CommandContext(ctx, "nsenter", "--target", strconv.Itoa(c.HolderPID), "--mount", "--net", "--",
		"ctr", "-a", c.ContainerdSock, "-n", "k8s.io", "images", "import", "-")
	pipe, err := save.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var saveErr, impOut bytes.Buffer
	save.Stderr = &saveErr
	imp.Stdin = pipe
	imp.Stdout = &impOut
	imp.Stderr = &impOut
	if err := save.Start(); err != nil {
		t.Fatalf("kubetest: docker save %s: %v", ref, err)
	}
	ierr := imp.Run()
	serr := save.Wait()
	if serr != nil {
		t.Fatalf("kubetest: docker save %s: %v: %s", ref, serr, bytes.TrimSpace(saveErr.Bytes()))
	}
	if ierr != nil {
		t.Fatalf("kubetest: ctr images import %s: %v: %s", ref, ierr, bytes.TrimSpace(impOut.Bytes()))
	}
}

// HTTPClient returns a client that trusts the apiserver's certificate and
// sends the admin token, for tests that talk to the API without client-go.
func (c *Cluster) HTTPClient() (*http.Client, error) {
	pem, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("kubetest: no certificate in %s", c.CAFile)
	}
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return &http.Client{Timeout: 30 * time.Second, Transport: bearer{token: c.Token, next: tr}}, nil
}

type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// dumpLogs writes the end of each component's log to the test log.
func (c *Cluster) dumpLogs(t testing.TB) {
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	for _, f := range logs {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
		if len(lines) > 30 {
			lines = lines[len(lines)-30:]
		}
		t.Logf("--- %s (last %d lines)\n%s", filepath.Base(f), len(lines), strings.Join(lines, "\n"))
	}
}

// repoRoot finds the repository from the test's working folder (its package).
func repoRoot() (string, error) {
	d, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(d, "scripts", "kube", "cluster.sh")); err == nil {
			return d, nil
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "", errors.New("kubetest: scripts/kube/cluster.sh not found above the working folder")
		}
		d = parent
	}
}
