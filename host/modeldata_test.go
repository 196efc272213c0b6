package host

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sagemaker"
	smtypes "github.com/aws/aws-sdk-go-v2/service/sagemaker/types"

	"github.com/mce-run/mce/containers/artifact"
)

// TestCreateModelConfinesFileData reproduces issue 9, class 3 through the
// API: a caller's CreateModel naming host folders outside the model roots is
// a ValidationException naming --model-root and no host path, before
// anything is stored; data inside a root is accepted.
func TestCreateModelConfinesFileData(t *testing.T) {
	root := t.TempDir()
	if err := os.MkdirAll(filepath.Join(root, "models", "en"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/var/run", filepath.Join(root, "run")); err != nil {
		t.Fatal(err)
	}
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{root}})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, Config{ModelData: f, BaseDir: root})
	sm := h.sm()
	ctx := context.Background()
	create := func(name, url string, multi bool) error {
		c := &smtypes.ContainerDefinition{Image: aws.String("img"), ModelDataUrl: aws.String(url)}
		if multi {
			c.Mode = smtypes.ContainerModeMultiModel
		}
		_, err := sm.CreateModel(ctx, &sagemaker.CreateModelInput{ModelName: aws.String(name), PrimaryContainer: c})
		return err
	}
	for i, url := range []string{"file:///var/run", "file:///", "file://../../etc", "file://run", "file:///etc/"} {
		err := create("bad"+string(rune('a'+i)), url, i == 4)
		if err == nil {
			t.Errorf("CreateModel(%q) succeeded", url)
			continue
		}
		code, msg := apiCode(t, err)
		if code != "ValidationException" || !strings.Contains(msg, "--model-root") {
			t.Errorf("CreateModel(%q) = %s %q, want a ValidationException naming --model-root", url, code, msg)
		}
		if strings.Contains(msg, root) {
			t.Errorf("message %q names the host folder %s", msg, root)
		}
	}
	if err := create("good", "file://models/en", false); err != nil {
		t.Errorf("CreateModel inside the root: %v", err)
	}
}
