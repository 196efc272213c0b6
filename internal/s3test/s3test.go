// Package s3test runs a real S3-compatible server for tests: versitygw
// (github.com/versity/versitygw, Apache-2.0) with its POSIX backend in a
// temporary folder, on a free loopback port, with random root credentials.
//
// It depends on nothing else in mce, so the tests of packages that
// internal/testenv imports (containers/artifact, containers/mme) can use it
// without an import cycle; other tests use testenv.S3Server.
//
// scripts/deps.sh installs the binary (make test runs it). Tests fail when CI
// is set and the binary is missing; elsewhere they skip, saying how to get it.
package s3test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// Version is the versitygw release scripts/deps.sh installs and tests expect.
const Version = "v1.8.0"

// Server is one running versitygw.
type Server struct {
	Endpoint  string // http://127.0.0.1:<port>
	AccessKey string
	SecretKey string
	Region    string
	Dir       string // the POSIX backend's root: one folder per bucket
}

// Binary returns the versitygw executable tests use: $MCE_VERSITYGW, else the
// one scripts/deps.sh installs (${MCE_CACHE:-/var/cache/mce}/bin, or
// ${XDG_CACHE_HOME:-~/.cache}/mce/bin when that is not writable), else versitygw on PATH or in $GOPATH/bin.
func Binary() (string, error) {
	var candidates []string
	if p := os.Getenv("MCE_VERSITYGW"); p != "" {
		candidates = append(candidates, p)
	}
	cache := os.Getenv("MCE_CACHE")
	if cache == "" {
		cache = "/var/cache/mce"
	}
	candidates = append(candidates, filepath.Join(cache, "bin", "versitygw"))
	if d, err := os.UserCacheDir(); err == nil { // $XDG_CACHE_HOME or ~/.cache
		candidates = append(candidates, filepath.Join(d, "mce", "bin", "versitygw"))
	}
	if p, err := exec.LookPath("versitygw"); err == nil {
		candidates = append(candidates, p)
	}
	gopath := os.Getenv("GOPATH")
	if gopath == "" {
		if home, err := os.UserHomeDir(); err == nil {
			gopath = filepath.Join(home, "go")
		}
	}
	if gopath != "" {
		candidates = append(candidates, filepath.Join(strings.Split(gopath, string(os.PathListSeparator))[0], "bin", "versitygw"))
	}
	for _, c := range candidates {
		if st, err := os.Stat(c); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return c, nil
		}
	}
	return "", fmt.Errorf("versitygw not found (looked at %s); install it with scripts/deps.sh or "+
		"go install github.com/versity/versitygw/cmd/versitygw@%s", strings.Join(candidates, ", "), Version)
}

// Start runs versitygw for the test and stops it (and removes its data) at
// cleanup. It fails the test when CI is set and versitygw is missing, and
// skips otherwise.
func Start(tb testing.TB) *Server {
	tb.Helper()
	return StartInRegion(tb, "us-east-1")
}

// StartInRegion is Start with the region the server expects in signatures.
func StartInRegion(tb testing.TB, region string) *Server {
	tb.Helper()
	bin, err := Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatalf("CI is set but %v", err)
		}
		tb.Skipf("SKIPPING real-S3 test: %v; CI never skips this", err)
	}
	var lastErr error
	for range 3 { // a free port can be taken between finding it and versitygw binding it
		s, err := start(tb, bin, region)
		if err == nil {
			return s
		}
		lastErr = err
	}
	tb.Fatalf("starting versitygw: %v", lastErr)
	return nil
}

func start(tb testing.TB, bin, region string) (*Server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "versitygw-")
	if err != nil {
		return nil, err
	}
	s := &Server{
		Endpoint:  "http://127.0.0.1:" + strconv.Itoa(port),
		AccessKey: "AK" + randHex(9),
		SecretKey: randHex(20),
		Region:    region,
		Dir:       dir,
	}
	cmd := exec.Command(bin, "--port", "127.0.0.1:"+strconv.Itoa(port), "--region", s.Region, "posix", dir)
	// Only the root keys reach it: nothing else from the test's environment
	// (AWS_*, the developer's settings) configures the server.
	cmd.Env = []string{"ROOT_ACCESS_KEY=" + s.AccessKey, "ROOT_SECRET_KEY=" + s.SecretKey, "HOME=" + dir}
	out := &tailBuffer{max: 64 << 10}
	cmd.Stdout, cmd.Stderr = out, out
	setPdeathsig(cmd)
	started, exited := make(chan error, 1), make(chan error, 1)
	go func() {
		// The kernel sends Pdeathsig when the thread that started the child
		// exits, not the process: this goroutine keeps its thread until the
		// child is gone, so no thread exit of the runtime's kills it early.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		exited <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	stop := func() {
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(5 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		os.RemoveAll(dir)
	}
	if err := waitReady(s.Endpoint, exited); err != nil {
		stop()
		return nil, fmt.Errorf("%w; versitygw said:\n%s", err, out.String())
	}
	tb.Cleanup(stop)
	return s, nil
}

// waitReady polls until the server answers HTTP (an anonymous request gets
// an S3 error document, which is enough to know it listens and parses).
func waitReady(endpoint string, exited <-chan error) error {
	hc := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		select {
		case err := <-exited:
			return fmt.Errorf("versitygw exited before answering: %v", err)
		default:
		}
		if resp, err := hc.Get(endpoint + "/"); err == nil {
			resp.Body.Close()
			if resp.StatusCode < 500 {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return errors.New("versitygw did not answer within 30s")
}

// Client returns an aws-sdk-go-v2 S3 client for the server: static root
// credentials, path-style addressing, no AWS configuration read from the
// environment or files.
func (s *Server) Client(tb testing.TB) *s3.Client {
	tb.Helper()
	return s3.New(s3.Options{
		Region:       s.Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, ""),
	})
}

// Credentials is a static provider of the root keys.
func (s *Server) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(s.AccessKey, s.SecretKey, "")
}

// Bucket creates a bucket.
func (s *Server) Bucket(tb testing.TB, name string) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client(tb).CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		tb.Fatalf("creating bucket %s: %v", name, err)
	}
}

// Put stores data at bucket/key.
func (s *Server) Put(tb testing.TB, bucket, key string, data []byte) {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := s.Client(tb).PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data))),
	}); err != nil {
		tb.Fatalf("putting s3://%s/%s: %v", bucket, key, err)
	}
}

// Get reads bucket/key.
func (s *Server) Get(tb testing.TB, bucket, key string) []byte {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := s.Client(tb).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		tb.Fatalf("getting s3://%s/%s: %v", bucket, key, err)
	}
	defer out.Body.Close()
	var b bytes.Buffer
	if _, err := b.ReadFrom(out.Body); err != nil {
		tb.Fatalf("reading s3://%s/%s: %v", bucket, key, err)
	}
	return b.Bytes()
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// tailBuffer keeps the last max bytes written, for diagnostics.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
	max int
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
