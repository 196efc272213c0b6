package featurizer

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/examples/containers/internal/textfeat"
)

// VocabFile is the vocabulary's file name inside the model directory.
const VocabFile = "vocab.txt"

// Media types.
const (
	TypeText = "text/plain"
	TypeJSON = "application/json"
	TypeCSV  = "text/csv"
)

// Limits per request, on top of smserve.MaxBodyBytes.
const (
	// MaxDocuments caps the documents in one request.
	MaxDocuments = 10000
	// MaxCells caps documents × vocabulary size, i.e. the numbers in one response.
	MaxCells = 4 << 20
)

// Program is the featurizer container.
func Program() smserve.Program {
	return smserve.Program{Name: "featurizer", Load: Load}
}

// Load reads vocab.txt from cfg.ModelDir.
func Load(ctx context.Context, cfg smserve.Config) (smserve.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return smserve.Loaded{}, err
	}
	vocab, err := textfeat.LoadVocabulary(filepath.Join(cfg.ModelDir, VocabFile))
	if err != nil {
		return smserve.Loaded{}, err
	}
	h, err := NewHandler(vocab, cfg.DefaultAccept)
	if err != nil {
		return smserve.Loaded{}, err
	}
	return smserve.Loaded{Invocations: h, Summary: fmt.Sprintf("%d tokens", vocab.Len())}, nil
}
