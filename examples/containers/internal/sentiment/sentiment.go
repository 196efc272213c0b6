package sentiment

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// File names inside the model directory.
const (
	LexiconFile = "lexicon.tsv"
	MetaFile    = "meta.json"
)

// Program is the sentiment container.
func Program() smserve.Program {
	return smserve.Program{Name: "sentiment", Load: Load}
}

// Load reads meta.json and lexicon.tsv from cfg.ModelDir.
func Load(ctx context.Context, cfg smserve.Config) (smserve.Loaded, error) {
	if err := ctx.Err(); err != nil {
		return smserve.Loaded{}, err
	}
	a, err := LoadAnalyzer(cfg.ModelDir)
	if err != nil {
		return smserve.Loaded{}, err
	}
	h, err := NewHandler(a, cfg.DefaultAccept)
	if err != nil {
		return smserve.Loaded{}, err
	}
	return smserve.Loaded{
		Invocations: h,
		Summary:     fmt.Sprintf("language %s, %d lexicon words, %d negators", a.lang, a.lex.Len(), len(a.negators)),
	}, nil
}

// LoadAnalyzer reads an analyzer from a model directory.
func LoadAnalyzer(dir string) (*Analyzer, error) {
	mf, err := os.Open(filepath.Join(dir, MetaFile))
	if err != nil {
		return nil, err
	}
	defer mf.Close()
	meta, err := ParseMeta(mf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", mf.Name(), err)
	}
	lf, err := os.Open(filepath.Join(dir, LexiconFile))
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	lex, err := ParseLexicon(lf)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", lf.Name(), err)
	}
	return NewAnalyzer(meta, lex)
}
