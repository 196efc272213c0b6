package s3test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
)

// TestServer: a bucket and an object round-trip through the real server with
// the root keys; wrong keys are refused (the server checks signatures); the
// objects live in the POSIX folder; cleanup stops the process.
func TestServer(t *testing.T) {
	var s *Server
	t.Run("up", func(t *testing.T) {
		s = Start(t)
		s.Bucket(t, "models")
		want := []byte("weights \x00\x01 and more")
		s.Put(t, "models", "dir/m.tar.gz", want)
		if got := s.Get(t, "models", "dir/m.tar.gz"); !bytes.Equal(got, want) {
			t.Errorf("Get = %q, want %q", got, want)
		}
		if b, err := os.ReadFile(s.Dir + "/models/dir/m.tar.gz"); err != nil || !bytes.Equal(b, want) {
			t.Errorf("POSIX backend file: %q, %v", b, err)
		}
		bad := s3.New(s3.Options{Region: s.Region, BaseEndpoint: aws.String(s.Endpoint), UsePathStyle: true,
			Credentials: credentials.NewStaticCredentialsProvider(s.AccessKey, "wrong", "")})
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err := bad.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("models"), Key: aws.String("dir/m.tar.gz")})
		var ae smithy.APIError
		if !errors.As(err, &ae) || ae.ErrorCode() != "SignatureDoesNotMatch" {
			t.Errorf("GetObject with a wrong secret: %v, want SignatureDoesNotMatch", err)
		}
	})
	if s == nil {
		return
	}
	// The subtest's cleanup has run: the port is closed and the folder gone.
	if _, err := os.Stat(s.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("backend folder %s after cleanup: %v", s.Dir, err)
	}
	c, err := net.DialTimeout("tcp", strings.TrimPrefix(s.Endpoint, "http://"), 5*time.Second)
	if err == nil {
		c.Close()
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Errorf("connecting after cleanup: %v, want connection refused", err)
	}
}

// TestServerDiesWithTestBinary: a test binary that dies without running its
// cleanups (a panic, a timeout) takes versitygw with it: a child copy of
// this test starts a server, prints its endpoint and exits at once.
func TestServerDiesWithTestBinary(t *testing.T) {
	if os.Getenv("S3TEST_HELPER") == "1" {
		s := Start(t)
		fmt.Println("DIR", s.Dir)
		fmt.Println("ENDPOINT", s.Endpoint)
		os.Exit(0) // no cleanup runs
	}
	if _, err := Binary(); err != nil {
		t.Skip(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestServerDiesWithTestBinary$")
	cmd.Env = append(os.Environ(), "S3TEST_HELPER=1")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helper: %v\n%s", err, out)
	}
	var dir, endpoint string
	if _, err := fmt.Sscanf(string(out), "DIR %s\nENDPOINT %s\n", &dir, &endpoint); err != nil {
		t.Fatalf("helper printed %q: %v", out, err)
	}
	if strings.HasPrefix(filepath.Base(dir), "versitygw-") {
		t.Cleanup(func() { os.RemoveAll(dir) }) // the helper had no cleanup to remove it
	}
	addr := strings.TrimPrefix(endpoint, "http://")
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			break // gone
		}
		c.Close()
		if time.Now().After(deadline) {
			t.Fatalf("versitygw on %s still answers 5 s after its test binary exited", addr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
