package textfeat

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// Limits on a vocabulary file (outside input).
const (
	MaxVocabBytes  = 8 << 20
	MaxVocabTokens = 1 << 18
)

// ErrBadVocabulary marks an invalid vocabulary.
var ErrBadVocabulary = errors.New("bad vocabulary")

// Vocabulary maps tokens to feature indexes. It is immutable after construction and safe for concurrent use.
type Vocabulary struct {
	tokens []string
	index  map[string]int
}

// NewVocabulary returns the vocabulary whose i-th feature counts tokens[i]. Each token must be exactly one
// Tokenize token (lower-case letters/digits) and appear once; errors wrap ErrBadVocabulary.
func NewVocabulary(tokens []string) (*Vocabulary, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens", ErrBadVocabulary)
	}
	if len(tokens) > MaxVocabTokens {
		return nil, fmt.Errorf("%w: %d tokens, more than %d", ErrBadVocabulary, len(tokens), MaxVocabTokens)
	}
	v := &Vocabulary{tokens: slices.Clone(tokens), index: make(map[string]int, len(tokens))}
	for i, tok := range tokens {
		if got := Tokenize(tok); len(got) != 1 || got[0] != tok {
			return nil, fmt.Errorf("%w: token %d %q is not a single lower-case token", ErrBadVocabulary, i+1, tok)
		}
		if j, dup := v.index[tok]; dup {
			return nil, fmt.Errorf("%w: token %q appears at %d and %d", ErrBadVocabulary, tok, j+1, i+1)
		}
		v.index[tok] = i
	}
	return v, nil
}

// ParseVocabulary reads a vocabulary file: one token per line (LF or CRLF), in feature order; blank lines
// are ignored. At most MaxVocabBytes are read.
func ParseVocabulary(r io.Reader) (*Vocabulary, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxVocabBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read vocabulary: %w", err)
	}
	if len(data) > MaxVocabBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrBadVocabulary, MaxVocabBytes)
	}
	var tokens []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxVocabBytes)
	for sc.Scan() {
		if line := strings.TrimSuffix(sc.Text(), "\r"); line != "" {
			tokens = append(tokens, line)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadVocabulary, err)
	}
	return NewVocabulary(tokens)
}

// LoadVocabulary reads the vocabulary file at path.
func LoadVocabulary(path string) (*Vocabulary, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	v, err := ParseVocabulary(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return v, nil
}

// BuildVocabulary returns the vocabulary of all tokens occurring at least minCount times in docs, sorted
// by byte order (so the result does not depend on document order).
func BuildVocabulary(docs []string, minCount int) (*Vocabulary, error) {
	counts := make(map[string]int)
	for _, d := range docs {
		for _, tok := range Tokenize(d) {
			counts[tok]++
		}
	}
	var tokens []string
	for tok, n := range counts {
		if n >= minCount {
			tokens = append(tokens, tok)
		}
	}
	slices.Sort(tokens)
	return NewVocabulary(tokens)
}

// Len returns the number of features.
func (v *Vocabulary) Len() int { return len(v.tokens) }

// Tokens returns the tokens in feature order.
func (v *Vocabulary) Tokens() []string { return slices.Clone(v.tokens) }

// WriteTo writes the vocabulary in the format ParseVocabulary reads.
func (v *Vocabulary) WriteTo(w io.Writer) (int64, error) {
	var b strings.Builder
	for _, t := range v.tokens {
		b.WriteString(t)
		b.WriteByte('\n')
	}
	n, err := io.WriteString(w, b.String())
	return int64(n), err
}
