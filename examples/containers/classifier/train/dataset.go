package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
)

// Limits on a data set file (outside input).
const (
	maxDatasetBytes = 16 << 20
	maxLineBytes    = 64 << 10
)

// errBadDataset marks an unusable data set file.
var errBadDataset = errors.New("bad data set")

// example is one labelled document.
type example struct {
	Label, Text string
}

// parseExamples reads a data set: one example per line as label<TAB>text; blank lines and lines starting
// with '#' are skipped. Labels must be non-empty and without spaces; texts must be non-empty.
func parseExamples(r io.Reader) ([]example, error) {
	sc := bufio.NewScanner(io.LimitReader(r, maxDatasetBytes))
	sc.Buffer(make([]byte, 0, 4096), maxLineBytes)
	var out []example
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSuffix(sc.Text(), "\r")
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		label, text, ok := strings.Cut(line, "\t")
		label, text = strings.TrimSpace(label), strings.TrimSpace(text)
		if !ok || label == "" || text == "" || strings.ContainsAny(label, " \t") {
			return nil, fmt.Errorf("%w: line %d: want label<TAB>text, got %q", errBadDataset, n, line)
		}
		out = append(out, example{Label: label, Text: text})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("%w: %w", errBadDataset, err)
	}
	return out, nil
}

// loadExamples reads the data set file at path.
func loadExamples(path string) ([]example, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ex, err := parseExamples(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(ex) == 0 {
		return nil, fmt.Errorf("%s: %w: no examples", path, errBadDataset)
	}
	return ex, nil
}
