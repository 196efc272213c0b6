package containers_test

import (
	"bytes"
	"context"
	"net/http/httptest"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/artifact"
)

// TestS3PrefixFolderStaged: an uncompressed model folder under an s3://
// prefix (ModelDataSource S3Prefix, CompressionType None) reaches the
// container at /opt/ml/model, read-only, file by file.
func TestS3PrefixFolderStaged(t *testing.T) {
	mem := s3mem.New()
	srv := httptest.NewServer(gofakes3.New(mem).Server())
	t.Cleanup(srv.Close)
	if err := mem.CreateBucket("models"); err != nil {
		t.Fatal(err)
	}
	for key, body := range map[string]string{"llm/tag": "s3-folder-v1", "llm/weights/w.bin": "0123", "llm-other/x": "not under llm/"} {
		if _, err := mem.PutObject("models", key, nil, bytes.NewReader([]byte(body)), int64(len(body)), nil); err != nil {
			t.Fatal(err)
		}
	}
	e := newEnvWith(t, artifact.Options{S3: artifact.S3Options{Endpoint: srv.URL, Region: "us-east-1", UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider("AKIDTEST", "secret", "")}})
	s := probeSpec(e.probe, 1, nil)
	s.Variants[0].Containers[0].ModelDataURL = "s3://models/llm/"
	d, err := e.deploy(t, s)
	if err != nil {
		t.Fatal(err)
	}
	c := d.Containers()[0]
	if pi := info(t, c); pi.ModelTag == nil || *pi.ModelTag != "s3-folder-v1" || len(pi.ModelFiles) != 2 {
		t.Errorf("model tag %v, files %v; want s3-folder-v1 and 2 files", pi.ModelTag, pi.ModelFiles)
	}
	res, err := e.cli.ContainerInspect(context.Background(), c.ID(), client.ContainerInspectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range res.Container.Mounts {
		if m.Destination == "/opt/ml/model" && m.RW {
			t.Error("/opt/ml/model is mounted read-write")
		}
	}
}
