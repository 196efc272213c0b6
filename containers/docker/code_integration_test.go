package docker_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers"
	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/testenv"
)

// sourceDir is a sourcedir.tar.gz as the SageMaker Python SDK uploads it for
// a framework model's entry_point and source_dir (files at the top level).
func sourceDir(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for name, body := range files {
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: 0o644, Size: int64(len(body)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(body)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestSubmitDirectoryFromS3: SAGEMAKER_SUBMIT_DIRECTORY=s3://…/sourcedir.tar.gz
// is fetched by mce, mounted read-only at /opt/ml/code, and the container
// sees the variable pointing there; an archive that is not there fails the
// deployment naming the variable and the URL.
func TestSubmitDirectoryFromS3(t *testing.T) {
	s3 := testenv.S3Server(t)
	s3.Bucket(t, "code")
	s3.Put(t, "code", "job/source/sourcedir.tar.gz", sourceDir(t, map[string]string{"inference.py": "def model_fn(d):\n    return d\n"}))
	e := newEnvWith(t, artifact.Options{S3: artifact.S3Options{Endpoint: s3.Endpoint, Region: s3.Region, UsePathStyle: true,
		Credentials: s3.Credentials()}})

	env := map[string]string{containers.SubmitDirEnv: "s3://code/job/source/sourcedir.tar.gz", "SAGEMAKER_PROGRAM": "inference.py"}
	d, err := e.deploy(t, probeSpec(e.probe, 1, env))
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	if got := info(t, c).Env[containers.SubmitDirEnv]; got != containers.CodeDir {
		t.Errorf("%s in the container = %q, want %q", containers.SubmitDirEnv, got, containers.CodeDir)
	}
	res, err := e.cli.ContainerInspect(context.Background(), c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mounted := false
	for _, m := range res.Container.Mounts {
		if m.Destination != containers.CodeDir {
			continue
		}
		mounted = true
		if m.RW {
			t.Errorf("%s is mounted read-write", containers.CodeDir)
		}
		if b, err := os.ReadFile(filepath.Join(m.Source, "inference.py")); err != nil || !strings.Contains(string(b), "model_fn") {
			t.Errorf("inference.py in the code folder: %q, %v", b, err)
		}
	}
	if !mounted {
		t.Errorf("nothing is mounted at %s", containers.CodeDir)
	}

	env = map[string]string{containers.SubmitDirEnv: "s3://code/job/missing/sourcedir.tar.gz"}
	missing := probeSpec(e.probe, 1, env)
	missing.Name = "ep-missing-code"
	_, err = e.deploy(t, missing)
	if !errors.Is(err, artifact.ErrNotFound) || !strings.Contains(err.Error(), containers.SubmitDirEnv) ||
		!strings.Contains(err.Error(), "s3://code/job/missing/sourcedir.tar.gz") {
		t.Errorf("deploy with a missing code archive: %v; want not found, naming %s and the URL", err, containers.SubmitDirEnv)
	}
}
