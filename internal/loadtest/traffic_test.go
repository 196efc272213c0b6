package loadtest

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// chiSquare returns the statistic of counts against the shares expected.
func chiSquare(counts []int, n int, expected func(i int) float64) float64 {
	var x2 float64
	for i := 1; i < len(counts); i++ {
		e := float64(n) * expected(i)
		d := float64(counts[i]) - e
		x2 += d * d / e
	}
	return x2
}

// chiCritical is the chi-square value with df degrees of freedom that a
// true distribution exceeds with probability 0.001 (Wilson–Hilferty).
func chiCritical(df int) float64 {
	const z = 3.090 // the normal's 0.999 quantile
	k := float64(df)
	return k * math.Pow(1-2/(9*k)+z*math.Sqrt(2/(9*k)), 3)
}

func drawModels(t Traffic, n int, seed uint64) []int {
	c := NewChooser(t, seed, 1)
	counts := make([]int, t.Models+1)
	for range n {
		i := c.Index()
		if i < 1 || i > t.Models {
			panic("model index out of range")
		}
		counts[i]++
	}
	return counts
}

// TestShapesFrequencies: each shape's draws pass a chi-square test against
// its expected shares (seeded, so the test is deterministic), and fail one
// against another shape's shares (so the test can fail).
func TestShapesFrequencies(t *testing.T) {
	const n = 200000
	shapes := map[string]Traffic{
		"uniform": {Models: 200, Shape: ShapeUniform, ModelPattern: "m{i}"},
		"top-k":   {Models: 200, Shape: ShapeTopK, TopK: 10, Share: 0.9, ModelPattern: "m{i}"},
		"hot":     {Models: 200, Shape: ShapeHot, Share: 0.5, ModelPattern: "m{i}"},
	}
	crit := chiCritical(199)
	for name, tr := range shapes {
		counts := drawModels(tr, n, 42)
		if x2 := chiSquare(counts, n, tr.Expected); x2 > crit {
			t.Errorf("%s: chi-square %.1f above %.1f", name, x2, crit)
		}
		var sum float64
		for i := 1; i <= tr.Models; i++ {
			sum += tr.Expected(i)
		}
		if math.Abs(sum-1) > 1e-9 {
			t.Errorf("%s: expected shares sum to %v", name, sum)
		}
	}
	counts := drawModels(shapes["uniform"], n, 42)
	if x2 := chiSquare(counts, n, shapes["top-k"].Expected); x2 < crit {
		t.Errorf("uniform draws pass as top-k: chi-square %.1f", x2)
	}
	top := drawModels(shapes["top-k"], n, 7)
	var first int
	for i := 1; i <= 10; i++ {
		first += top[i]
	}
	if share := float64(first) / n; math.Abs(share-0.9) > 0.005 {
		t.Errorf("top-10 share %.4f, want 0.9", share)
	}
	if got := NewChooser(shapes["hot"], 1, 1).Name(42); got != "m42" {
		t.Errorf("name %q", got)
	}
	if ModelName("model-{i}.tar.gz", 7) != "model-7.tar.gz" || ModelName("model-{i:03}.tar.gz", 7) != "model-007.tar.gz" || ModelName("m{i:02}-{i}", 123) != "m123-123" {
		t.Error("ModelName")
	}
	zero := 0
	mme := NewChooser(Traffic{Models: 200, ModelPattern: "model-{i:03}.tar.gz", FirstModel: &zero}, 1, 1)
	if mme.Name(1) != "model-000.tar.gz" || mme.Name(200) != "model-199.tar.gz" || mme.Name(0) != "" {
		t.Errorf("first_model 0: %q %q", mme.Name(1), mme.Name(200))
	}
	if NewChooser(Traffic{}, 1, 1).Index() != 0 {
		t.Error("no models should pick 0")
	}
}

func TestReadPayloads(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.json"), []byte(`{"b":2}`), 0o644)
	os.WriteFile(filepath.Join(dir, "a.json"), []byte(`{"a":1}`), 0o644)
	os.WriteFile(filepath.Join(dir, ".hidden"), []byte("x"), 0o644)
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	os.Symlink("/etc/passwd", filepath.Join(dir, "link.json"))
	p, err := ReadPayloads(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(p.Names, ",") != "a.json,b.json" || string(p.Bodies[0]) != `{"a":1}` {
		t.Errorf("names %v", p.Names)
	}
	if ct, err := p.InferContentType(); err != nil || ct != "application/json" {
		t.Errorf("content type %q %v", ct, err)
	}
	os.WriteFile(filepath.Join(dir, "c.csv"), []byte("1,2"), 0o644)
	p, _ = ReadPayloads(dir, nil)
	if _, err := p.InferContentType(); err == nil {
		t.Error("mixed types: no error")
	}
	p, err = ReadPayloads("-", strings.NewReader("hello"))
	if err != nil || string(p.Bodies[0]) != "hello" {
		t.Errorf("stdin: %v %q", err, p.Bodies)
	}
	p, err = ReadPayloads("", nil)
	if err != nil || p.Bodies[0] == nil || len(p.Bodies[0]) != 0 {
		t.Errorf("empty: %v %#v", err, p.Bodies)
	}
	big := filepath.Join(t.TempDir(), "big.bin")
	os.WriteFile(big, make([]byte, MaxPayloadBytes+1), 0o644)
	if _, err := ReadPayloads(big, nil); err == nil || !strings.Contains(err.Error(), "6 MiB") {
		t.Errorf("big: %v", err)
	}
	if _, err := ReadPayloads(t.TempDir(), nil); err == nil {
		t.Error("empty folder: no error")
	}
	if _, err := ReadPayloads(filepath.Join(dir, "missing"), nil); err == nil {
		t.Error("missing: no error")
	}
}
