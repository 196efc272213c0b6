package docker_test

import (
	"context"
	"testing"

	"github.com/moby/moby/client"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/internal/testenv"
)

// TestS3PrefixFolderStaged: an uncompressed model folder under an s3://
// prefix (ModelDataSource S3Prefix, CompressionType None) reaches the
// container at /opt/ml/model, read-only, file by file.
func TestS3PrefixFolderStaged(t *testing.T) {
	s3 := testenv.S3Server(t)
	s3.Bucket(t, "models")
	for key, body := range map[string]string{"llm/tag": "s3-folder-v1", "llm/weights/w.bin": "0123", "llm-other/x": "not under llm/"} {
		s3.Put(t, "models", key, []byte(body))
	}
	e := newEnvWith(t, artifact.Options{S3: artifact.S3Options{Endpoint: s3.Endpoint, Region: s3.Region, UsePathStyle: true,
		Credentials: s3.Credentials()}})
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
