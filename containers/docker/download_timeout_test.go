package docker

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	awscreds "github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
)

// TestDownloadTimeoutBoundsModelData: a variant's
// ModelDataDownloadTimeoutInSeconds ends a download from an S3 store that
// never answers, with a LaunchError that names the setting, and leaves no
// model folder behind; without the setting, the caller's own deadline is
// what ends it and the reason does not blame the setting.
func TestDownloadTimeoutBoundsModelData(t *testing.T) {
	stall := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select { // a store that accepts the call and never answers
		case <-stall:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(stall)
	f, err := artifact.NewFetcher(artifact.Options{S3: artifact.S3Options{Endpoint: srv.URL, Region: "us-east-1", UsePathStyle: true,
		Credentials: awscreds.NewStaticCredentialsProvider("AKID", "SECRET", "")}})
	if err != nil {
		t.Fatal(err)
	}
	newDeployment := func() *Deployment {
		rt := &Runtime{log: zerolog.Nop(), fetcher: f, budget: artifact.NewBudget(0)}
		return &Deployment{rt: rt, endpoint: "ep", gen: 1, workDir: t.TempDir(), models: map[modelKey]string{}, codes: map[modelKey]string{}}
	}
	spec := func(timeout time.Duration) EndpointSpec {
		return EndpointSpec{Name: "ep", Variants: []VariantSpec{{Name: "v1", Copies: 1, DownloadTimeout: timeout,
			Containers: []ContainerSpec{{Hostname: "c", Image: "img", ModelDataURL: "s3://bucket/model.tar.gz"}}}}}
	}

	d := newDeployment()
	start := time.Now()
	err = d.prepareArtifacts(context.Background(), spec(300*time.Millisecond))
	var le *LaunchError
	if !errors.As(err, &le) || !strings.Contains(le.Reason, "within ModelDataDownloadTimeoutInSeconds") {
		t.Fatalf("err = %v, want a LaunchError naming ModelDataDownloadTimeoutInSeconds", err)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("the bounded download took %v", took)
	}
	if dir := d.modelDir("v1", "c"); dir != "" {
		t.Errorf("a model folder %q was recorded for a failed download", dir)
	}

	// No setting: the caller's deadline ends it, and the reason says nothing of the setting.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = newDeployment().prepareArtifacts(ctx, spec(0))
	if !errors.As(err, &le) || strings.Contains(le.Reason, "ModelDataDownloadTimeoutInSeconds") {
		t.Fatalf("err = %v, want a LaunchError that does not blame the setting", err)
	}
}
