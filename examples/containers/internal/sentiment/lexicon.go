package sentiment

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// Limits on a lexicon file (outside input).
const (
	MaxLexiconBytes   = 4 << 20
	MaxLexiconEntries = 100000
	// MaxWordScore bounds the absolute score of one lexicon word.
	MaxWordScore = 5
)

// ErrBadModel marks an invalid lexicon or meta.json.
var ErrBadModel = errors.New("bad sentiment model")

// Lexicon maps words to sentiment scores. It is immutable and safe for concurrent use.
type Lexicon struct {
	scores map[string]float64
}

// Len returns the number of words.
func (l *Lexicon) Len() int { return len(l.scores) }

// Score returns the word's score and whether the lexicon has it.
func (l *Lexicon) Score(word string) (float64, bool) {
	s, ok := l.scores[word]
	return s, ok
}

// ParseLexicon reads lexicon.tsv: one "word<TAB>score" per line; blank lines and lines starting with '#'
// are skipped. A word must be one lower-case word as Words produces it, appear once, and have a finite
// score within ±MaxWordScore. At most MaxLexiconBytes are read. Errors wrap ErrBadModel.
func ParseLexicon(r io.Reader) (*Lexicon, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxLexiconBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read lexicon: %w", err)
	}
	if len(data) > MaxLexiconBytes {
		return nil, fmt.Errorf("%w: lexicon larger than %d bytes", ErrBadModel, MaxLexiconBytes)
	}
	lex := &Lexicon{scores: make(map[string]float64)}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 4096), MaxLexiconBytes)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, num, ok := strings.Cut(line, "\t")
		if !ok {
			return nil, fmt.Errorf("%w: lexicon line %d: want word<TAB>score, got %q", ErrBadModel, n, line)
		}
		if !isSingleWord(word) {
			return nil, fmt.Errorf("%w: lexicon line %d: %q is not one lower-case word", ErrBadModel, n, word)
		}
		s, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
		if err != nil || math.IsNaN(s) || math.Abs(s) > MaxWordScore {
			return nil, fmt.Errorf("%w: lexicon line %d: score %q is not a number within ±%d", ErrBadModel, n, num, MaxWordScore)
		}
		if _, dup := lex.scores[word]; dup {
			return nil, fmt.Errorf("%w: lexicon line %d: %q appears twice", ErrBadModel, n, word)
		}
		if len(lex.scores) == MaxLexiconEntries {
			return nil, fmt.Errorf("%w: more than %d lexicon entries", ErrBadModel, MaxLexiconEntries)
		}
		lex.scores[word] = s
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadModel, err)
	}
	if len(lex.scores) == 0 {
		return nil, fmt.Errorf("%w: empty lexicon", ErrBadModel)
	}
	return lex, nil
}

// isSingleWord reports whether w is exactly one word of Words' output.
func isSingleWord(w string) bool {
	c := clauses(w)
	return len(c) == 1 && len(c[0]) == 1 && c[0][0] == w
}
