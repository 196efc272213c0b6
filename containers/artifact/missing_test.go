package artifact

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMissingFileMessages (issue 33): file:// data that does not exist is
// reported missing — inside the roots, and at a path the operator's files
// named (Options.NamedData) — with the command that builds it when it is
// where one of mce's example models lives; only what lies outside the
// roots is "outside the model roots", whether it exists or not, so that an
// API caller learns nothing of the files there. Once named data exists,
// its folder is a root, as it would have been at start. No message shows a
// host path the URL did not hold.
func TestMissingFileMessages(t *testing.T) {
	top := t.TempDir() // a checkout: examples/go-ab-test is the -f file's folder, a root
	root := filepath.Join(top, "examples", "go-ab-test")
	outside := t.TempDir()
	for _, d := range []string{root, filepath.Join(root, "build", "models"), filepath.Join(outside, "models")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	archive := buildTar(t, true, file("lexicon.tsv", "good\t1\n"))
	if err := os.WriteFile(filepath.Join(outside, "models", "exists.tar.gz"), archive, 0o644); err != nil {
		t.Fatal(err)
	}
	named := filepath.Join(top, "build", "models", "sentiment-en.tar.gz")
	namedDir := filepath.Join(top, "build", "mme-models")
	f, err := NewFetcher(Options{ModelRoots: []string{root}, NamedData: []string{named, namedDir}})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const (
		missing = `not found: no such file or folder`
		outRoot = `is outside the model roots; mce reads file:// model data only from the folders of its -f endpoint files and from folders named with --model-root`
	)
	for _, c := range []struct {
		name, url string
		multi     bool
		want      error
		msg       string
	}{
		{"named archive, missing", "file://../../build/models/sentiment-en.tar.gz", false, ErrNotFound,
			missing + " (one of mce's example models, which `make models` builds)"},
		{"named folder, missing", "file://../../build/mme-models/", true, ErrNotFound,
			missing + " (one of mce's example models, which `scripts/mme-models.sh` builds)"},
		{"under a named folder, missing", "file://../../build/mme-models/model-001.tar.gz", false, ErrNotFound, missing},
		{"inside the root, missing", "file://notes/none.tar.gz", false, ErrNotFound, missing},
		{"inside the root, an example's place", "file://build/models/framework/digits-network.tar.gz", false, ErrNotFound,
			missing + " (one of mce's example models, which `make framework-models` builds)"},
		{"outside, existing", "file://" + outside + "/models/exists.tar.gz", false, ErrOutsideModelRoots, outRoot},
		{"outside, missing", "file://" + outside + "/models/none.tar.gz", false, ErrOutsideModelRoots, outRoot},
		{"beside named data, unnamed", "file://../../build/models/sentiment-de.tar.gz", false, ErrOutsideModelRoots, outRoot},
		{"outside, an example's place", "file://" + outside + "/build/models/sentiment-en.tar.gz", false, ErrOutsideModelRoots, outRoot},
	} {
		t.Run(c.name, func(t *testing.T) {
			errs := map[string]error{"Check": f.Check(ctx, c.url, root, c.multi)}
			if !c.multi {
				_, errs["Prepare"] = f.Prepare(ctx, c.url, root, t.TempDir())
			}
			for what, err := range errs {
				if !errors.Is(err, c.want) || !strings.Contains(err.Error(), `model data "`+c.url+`"`) || !strings.Contains(err.Error(), c.msg) {
					t.Errorf("%s: %v; want %v with %q", what, err, c.want, c.msg)
				}
				for _, p := range []string{top, outside} {
					if !strings.Contains(c.url, p) && strings.Contains(err.Error(), p) {
						t.Errorf("%s: %q names the host path %s", what, err, p)
					}
				}
			}
			// CreateModel's early check refuses only what lies outside.
			if err := f.CheckModelDataURL(c.url, root); (err != nil) != errors.Is(c.want, ErrOutsideModelRoots) {
				t.Errorf("CheckModelDataURL: %v", err)
			}
		})
	}
	// The two outside URLs answer alike: nothing tells whether a file is there.
	a := f.Check(ctx, "file://"+outside+"/models/exists.tar.gz", root, false).Error()
	b := f.Check(ctx, "file://"+outside+"/models/none.tar.gz", root, false).Error()
	if strings.Replace(a, "exists", "none", 1) != b {
		t.Errorf("an existing and a missing file outside the roots answer differently:\n%s\n%s", a, b)
	}

	// Built after the start (make models): served, its folder now a root.
	if err := os.MkdirAll(filepath.Dir(named), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(named, archive, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := f.Prepare(ctx, "file://../../build/models/sentiment-en.tar.gz", root, t.TempDir()); err != nil {
		t.Fatalf("the named archive once built: %v", err)
	}
	if err := f.Check(ctx, "file://../../build/models/sentiment-de.tar.gz", root, false); !errors.Is(err, ErrNotFound) {
		t.Errorf("beside the named archive, now inside its folder's root: %v, want ErrNotFound", err)
	}
	// A named folder that appears as a link to a system folder never becomes a root.
	if err := os.Symlink("/etc", namedDir); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(ctx, "file://../../build/mme-models/", root, true); !errors.Is(err, ErrOutsideModelRoots) {
		t.Errorf("a named folder linked to /etc: %v, want ErrOutsideModelRoots", err)
	}
	if _, err := f.Prepare(ctx, "file://../../build/mme-models/passwd", root, t.TempDir()); !errors.Is(err, ErrOutsideModelRoots) {
		t.Errorf("a file through a named folder linked to /etc: %v, want ErrOutsideModelRoots", err)
	}
}

func TestExampleBuild(t *testing.T) {
	for url, want := range map[string]string{
		"file://../../build/models/sentiment-en.tar.gz":           "make models",
		"file://../build/models/featurizer.tar.gz":                "make models",
		"file://../../build/models/framework/cancer-v1.tar.gz":    "make framework-models",
		"file://../../build/models/mme-torch/":                    "make framework-models",
		"file://../../build/mme-models/":                          "scripts/mme-models.sh",
		"file:///home/me/mce/build/mme-models/model-001.tar.gz":   "scripts/mme-models.sh",
		"file://models/sentiment-en.tar.gz":                       "",
		"file:///srv/build/modelsx/a.tar.gz":                      "",
		"s3://bucket/build/models/sentiment-en.tar.gz":            "",
		"file://../../rebuild/models/sentiment-en.tar.gz":         "",
		"file://../../build/models/framework/../sentiment.tar.gz": "make models",
	} {
		if got := ExampleBuild(url); got != want {
			t.Errorf("ExampleBuild(%q) = %q, want %q", url, got, want)
		}
	}
}
