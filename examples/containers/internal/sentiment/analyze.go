package sentiment

import (
	"fmt"
	"math"
	"strings"
	"unicode"
)

// Scoring constants; the package comment explains them.
const (
	NegationWindow = 3
	NegationFactor = -0.75
	normAlpha      = 15
	neutralBand    = 0.05
)

// Labels.
const (
	Positive = "POSITIVE"
	Negative = "NEGATIVE"
	Neutral  = "NEUTRAL"
)

// Result is the analysis of one text.
type Result struct {
	Language string  `json:"language"`
	Label    string  `json:"label"`
	Score    float64 `json:"score"`
}

// Analyzer scores texts in one language. It is immutable and safe for concurrent use.
type Analyzer struct {
	lang     string
	lex      *Lexicon
	negators map[string]bool
}

// NewAnalyzer combines a meta.json and a lexicon. A negator that is also a lexicon word is an error
// wrapping ErrBadModel.
func NewAnalyzer(meta Meta, lex *Lexicon) (*Analyzer, error) {
	a := &Analyzer{lang: meta.Language, lex: lex, negators: make(map[string]bool, len(meta.Negators))}
	for _, n := range meta.Negators {
		if _, ok := lex.Score(n); ok {
			return nil, fmt.Errorf("%w: negator %q is also a lexicon word", ErrBadModel, n)
		}
		a.negators[n] = true
	}
	return a, nil
}

// Language returns the model's language.
func (a *Analyzer) Language() string { return a.lang }

// Analyze scores text.
func (a *Analyzer) Analyze(text string) Result {
	var sum float64
	for _, c := range clauses(text) {
		sum += a.clauseSum(c)
	}
	score := sum / math.Sqrt(sum*sum+normAlpha)
	score = math.Round(score*1e4) / 1e4
	label := Neutral
	switch {
	case score >= neutralBand:
		label = Positive
	case score <= -neutralBand:
		label = Negative
	}
	return Result{Language: a.lang, Label: label, Score: score}
}

func (a *Analyzer) isNegator(w string) bool {
	return a.negators[w] || strings.HasSuffix(w, "n't")
}

// clauseSum adds the scores of one clause's words, negated ones times NegationFactor.
func (a *Analyzer) clauseSum(words []string) float64 {
	var negated []bool // allocated only when a clause has a negator
	for i, w := range words {
		if !a.isNegator(w) {
			continue
		}
		if negated == nil {
			negated = make([]bool, len(words))
		}
		if j := a.target(words, i); j >= 0 {
			negated[j] = !negated[j]
		}
	}
	var sum float64
	for i, w := range words {
		s, ok := a.lex.Score(w)
		if !ok {
			continue
		}
		if negated != nil && negated[i] {
			s *= NegationFactor
		}
		sum += s
	}
	return sum
}

// target returns the index of the lexicon word the negator at i flips, or -1: the first one after it
// within NegationWindow words, else the nearest one before it within the window; another negator stops
// the search in that direction.
func (a *Analyzer) target(words []string, i int) int {
	for _, dir := range []int{1, -1} {
		for j := i + dir; j >= 0 && j < len(words) && abs(j-i) <= NegationWindow; j += dir {
			if a.isNegator(words[j]) {
				break
			}
			if _, ok := a.lex.Score(words[j]); ok {
				return j
			}
		}
	}
	return -1
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// clauses splits text into clauses of lower-cased words (see the package comment).
func clauses(text string) [][]string {
	var out [][]string
	var cur []string
	var word strings.Builder
	flush := func() {
		if word.Len() > 0 {
			w := strings.TrimRight(word.String(), "'")
			if w != "" {
				cur = append(cur, w)
			}
			word.Reset()
		}
	}
	for _, r := range text {
		switch {
		case r != unicode.ReplacementChar && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			word.WriteRune(unicode.ToLower(r))
		case isApostrophe(r) && word.Len() > 0 && !strings.HasSuffix(word.String(), "'"):
			word.WriteByte('\'')
		case strings.ContainsRune(".,;:!?()[]…\n\r", r):
			flush()
			if len(cur) > 0 {
				out = append(out, cur)
				cur = nil
			}
		default:
			flush()
		}
	}
	flush()
	if len(cur) > 0 {
		out = append(out, cur)
	}
	return out
}

func isApostrophe(r rune) bool { return r == '\'' || r == '’' || r == 'ʼ' }
