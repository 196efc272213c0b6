package sentiment

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
)

// maxMetaBytes caps meta.json (outside input).
const maxMetaBytes = 64 << 10

// Meta is meta.json: which language the artifact is for and its negation words.
type Meta struct {
	// Language is reported in every answer, e.g. "en". Required: 2–16 characters of a–z, A–Z, 0–9, '-'.
	Language string `json:"language"`
	// Negators are the words that flip the sentiment of a nearby word (see the package comment). Each must
	// be one lower-case word and not in the lexicon.
	Negators []string `json:"negators,omitempty"`
}

// ParseMeta reads and checks meta.json (unknown fields are errors). Errors wrap ErrBadModel.
func ParseMeta(r io.Reader) (Meta, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxMetaBytes+1))
	if err != nil {
		return Meta{}, fmt.Errorf("read meta.json: %w", err)
	}
	if len(data) > maxMetaBytes {
		return Meta{}, fmt.Errorf("%w: meta.json larger than %d bytes", ErrBadModel, maxMetaBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Meta
	if err := dec.Decode(&m); err != nil {
		return Meta{}, fmt.Errorf("%w: meta.json: %w", ErrBadModel, err)
	}
	if dec.More() {
		return Meta{}, fmt.Errorf("%w: meta.json: data after the object", ErrBadModel)
	}
	if !validLanguage(m.Language) {
		return Meta{}, fmt.Errorf("%w: meta.json: language %q must be 2-16 letters, digits or '-'", ErrBadModel, m.Language)
	}
	for _, n := range m.Negators {
		if !isSingleWord(n) {
			return Meta{}, fmt.Errorf("%w: meta.json: negator %q is not one lower-case word", ErrBadModel, n)
		}
	}
	return m, nil
}

func validLanguage(s string) bool {
	if len(s) < 2 || len(s) > 16 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}
