package loadtest

import (
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Traffic shapes.
const (
	ShapeUniform = "uniform"
	ShapeTopK    = "top-k"
	ShapeHot     = "hot"
)

// Chooser picks the TargetModel of each request. It is not safe for
// concurrent use: each user (and the rate dispatcher) has its own, seeded
// from the plan's seed.
type Chooser struct {
	t   Traffic
	rng *rand.Rand
}

// NewChooser returns a chooser over a validated Traffic.
func NewChooser(t Traffic, seed1, seed2 uint64) *Chooser {
	return &Chooser{t: t, rng: rand.New(rand.NewPCG(seed1, seed2))}
}

// Index returns the number (1 to Models) of the next request's model, or 0
// when the traffic names no models.
func (c *Chooser) Index() int {
	n := c.t.Models
	if n <= 0 {
		return 0
	}
	switch c.t.Shape {
	case ShapeTopK:
		k := c.t.TopK
		if k >= n || c.rng.Float64() < c.t.Share {
			return 1 + c.rng.IntN(k)
		}
		return k + 1 + c.rng.IntN(n-k)
	case ShapeHot:
		if c.rng.Float64() < c.t.Share {
			return 1
		}
		return 2 + c.rng.IntN(n-1)
	default:
		return 1 + c.rng.IntN(n)
	}
}

// Name returns the name of the model of rank i (1 to Models; "" for 0).
func (c *Chooser) Name(i int) string {
	if i <= 0 {
		return ""
	}
	first := 1
	if c.t.FirstModel != nil {
		first = *c.t.FirstModel
	}
	return ModelName(c.t.ModelPattern, first+i-1)
}

// modelNumberRE finds {i} and {i:0N} in a model name pattern.
var modelNumberRE = regexp.MustCompile(`\{i(?::0([1-9]))?\}`)

// ModelName fills pattern's {i} with n, and {i:0N} with n zero-padded to N
// digits.
func ModelName(pattern string, n int) string {
	return modelNumberRE.ReplaceAllStringFunc(pattern, func(m string) string {
		sub := modelNumberRE.FindStringSubmatch(m)
		if sub[1] == "" {
			return strconv.Itoa(n)
		}
		w, _ := strconv.Atoi(sub[1])
		return fmt.Sprintf("%0*d", w, n)
	})
}

// Expected returns the share of requests model i (1 to Models) should get.
func (t Traffic) Expected(i int) float64 {
	n := t.Models
	switch t.Shape {
	case ShapeTopK:
		if t.TopK >= n {
			return 1 / float64(n)
		}
		if i <= t.TopK {
			return t.Share / float64(t.TopK)
		}
		return (1 - t.Share) / float64(n-t.TopK)
	case ShapeHot:
		if i == 1 {
			return t.Share
		}
		return (1 - t.Share) / float64(n-1)
	default:
		return 1 / float64(n)
	}
}

// MaxPayloadBytes is the largest sample a load test sends: SageMaker's limit
// on an InvokeEndpoint body (6 MB), rounded up to MiB as mce does.
const MaxPayloadBytes = 6 << 20

// maxSamples bounds a folder of samples.
const maxSamples = 10000

// Payloads holds the request bodies; requests cycle through them in a
// random order (per user) when there are several.
type Payloads struct {
	Bodies [][]byte
	Names  []string
}

// ReadPayloads reads the body samples from path: a file, a folder (every
// regular file in it, sorted by name, not recursing), or "-" for r (standard
// input). An empty path is one empty body.
func ReadPayloads(path string, stdin io.Reader) (*Payloads, error) {
	switch path {
	case "":
		return &Payloads{Bodies: [][]byte{{}}, Names: []string{"(empty)"}}, nil
	case "-":
		b, err := readLimited(stdin, "standard input")
		if err != nil {
			return nil, err
		}
		return &Payloads{Bodies: [][]byte{b}, Names: []string{"(stdin)"}}, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		if !fi.Mode().IsRegular() {
			return nil, fmt.Errorf("%s is not a regular file or a folder", path)
		}
		b, err := readFile(path)
		if err != nil {
			return nil, err
		}
		return &Payloads{Bodies: [][]byte{b}, Names: []string{filepath.Base(path)}}, nil
	}
	entries, err := os.ReadDir(path)
	if err != nil {
		return nil, err
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].Name() < entries[j].Name() })
	p := &Payloads{}
	var total int64
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue // links, folders and hidden files are not samples
		}
		if len(p.Bodies) == maxSamples {
			return nil, fmt.Errorf("%s holds more than %d samples", path, maxSamples)
		}
		b, err := readFile(filepath.Join(path, e.Name()))
		if err != nil {
			return nil, err
		}
		total += int64(len(b))
		if total > 1<<30 {
			return nil, fmt.Errorf("the samples in %s are over 1 GiB together", path)
		}
		p.Bodies = append(p.Bodies, b)
		p.Names = append(p.Names, e.Name())
	}
	if len(p.Bodies) == 0 {
		return nil, fmt.Errorf("%s holds no sample files", path)
	}
	return p, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readLimited(f, path)
}

func readLimited(r io.Reader, name string) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r, MaxPayloadBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	if len(b) > MaxPayloadBytes {
		return nil, fmt.Errorf("%s is over SageMaker's 6 MiB limit on a request body", name)
	}
	return b, nil
}

// ContentTypeOf returns the content type SageMaker containers expect for a
// file extension, or "".
func ContentTypeOf(ext string) string {
	switch strings.ToLower(ext) {
	case ".json":
		return "application/json"
	case ".jsonl":
		return "application/jsonlines"
	case ".csv":
		return "text/csv"
	case ".txt":
		return "text/plain"
	case ".npy":
		return "application/x-npy"
	case ".npz":
		return "application/x-npz"
	case ".parquet":
		return "application/x-parquet"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".pb":
		return "application/x-protobuf"
	}
	return ""
}

// InferContentType returns the content type of the samples from their
// extensions when they all agree, or an error that asks for --content-type.
func (p *Payloads) InferContentType() (string, error) {
	ct := ""
	for _, n := range p.Names {
		c := ContentTypeOf(filepath.Ext(n))
		if c == "" {
			return "", fmt.Errorf("cannot tell the content type of %s: pass --content-type", n)
		}
		if ct != "" && c != ct {
			return "", errors.New("the samples have different content types: pass --content-type")
		}
		ct = c
	}
	return ct, nil
}
