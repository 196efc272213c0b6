package classifier

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/mce-run/mce/examples/containers/internal/logreg"
	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// ModelFile is the model's file name inside the model directory.
const ModelFile = "model.json"

// Media types.
const (
	TypeCSV  = "text/csv"
	TypeJSON = "application/json"
)

// MaxRows caps the instances in one request.
const MaxRows = 10000

// Program is the classifier container.
func Program() smserve.Program {
	return smserve.Program{Name: "classifier", Load: Load}
}

// Load reads model.json from cfg.ModelDir.
func Load(ctx context.Context, cfg smserve.Config) (smserve.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return smserve.Loaded{}, err
	}
	m, err := logreg.Load(filepath.Join(cfg.ModelDir, ModelFile))
	if err != nil {
		return smserve.Loaded{}, err
	}
	h, err := NewHandler(m, cfg.DefaultAccept)
	if err != nil {
		return smserve.Loaded{}, err
	}
	return smserve.Loaded{
		Invocations: h,
		Summary:     fmt.Sprintf("%d features, labels %s", m.Features(), strings.Join(m.Labels, ", ")),
	}, nil
}
