package check

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/mce-run/mce/containers/artifact"
)

// modelData is the fetched, extracted model data of one run, in a work
// folder of its own.
type modelData struct {
	work   string // removed afterwards
	dir    string // single-model: mounted at /opt/ml/model
	models string // multi-model: mounted at /opt/ml/models, holding <hash>/model
	hash   string // multi-model: the model_name of the load request
	target string // multi-model: its X-Amzn-SageMaker-Target-Model
}

func (m *modelData) bind() string {
	if m.models != "" {
		return m.models + ":/opt/ml/models:ro"
	}
	return m.dir + ":/opt/ml/model:ro"
}

func (m *modelData) remove() { os.RemoveAll(m.work) }

// modelURL turns what the user wrote into a model data URL and, for a
// local path, the folder it may come from (containers/artifact confines
// file:// data to model roots; for a check, the file's own folder).
func modelURL(s string) (u, root string, err error) {
	switch {
	case strings.HasPrefix(s, "s3://"):
		return s, "", nil
	case strings.Contains(s, "://") && !strings.HasPrefix(s, "file://"):
		return "", "", fmt.Errorf("model data %q: use s3://bucket/key, file:///path or a path", s)
	}
	p, err := filepath.Abs(strings.TrimPrefix(s, "file://"))
	if err != nil {
		return "", "", err
	}
	return "file://" + p, filepath.Dir(p), nil
}

// prepareModel fetches and extracts the model data. A multi-model artifact
// lands at <work>/models/<hash>/model, as SageMaker lays it out
// (https://docs.aws.amazon.com/sagemaker/latest/dg/mms-container-apis.html), its hash taken from the URL; the Target-Model name is the
// artifact's file name.
func (c *Checker) prepareModel(ctx context.Context, multi bool) (*modelData, error) {
	u, root, err := modelURL(c.opts.ModelData)
	if err != nil {
		return nil, err
	}
	var roots []string
	if root != "" {
		roots = []string{root}
	}
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: roots})
	if err != nil {
		return nil, fmt.Errorf("model data %q: %w", c.opts.ModelData, err)
	}
	work, err := os.MkdirTemp(c.opts.WorkDir, "mce-check-")
	if err != nil {
		return nil, err
	}
	m := &modelData{work: work}
	if !multi {
		if m.dir, err = f.Prepare(ctx, u, "", work); err != nil {
			m.remove()
			return nil, err
		}
		return m, nil
	}
	sum := sha256.Sum256([]byte(u))
	m.hash = hex.EncodeToString(sum[:16])
	m.target = path.Base(u)
	m.models = filepath.Join(work, "models")
	holder := filepath.Join(m.models, m.hash)
	if err := os.MkdirAll(holder, 0o755); err == nil {
		err = os.Chmod(m.models, 0o755)
	}
	if err != nil {
		m.remove()
		return nil, err
	}
	dir, err := f.PrepareArchive(ctx, u, "", holder)
	if err == nil {
		err = os.Rename(dir, filepath.Join(holder, "model"))
	}
	if err != nil {
		m.remove()
		return nil, err
	}
	return m, nil
}
