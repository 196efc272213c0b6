package modelserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
)

// ManifestFormat identifies manifest.json.
const ManifestFormat = "mce-mme-models/1"

// GeneratedInput and GeneratedOutput are the tensor names of generated models.
const (
	GeneratedInput  = "INPUT0"
	GeneratedOutput = "OUTPUT0"
)

// ArtifactName is the file name (and TargetModel) of generated model i.
func ArtifactName(i int) string { return fmt.Sprintf("model-%03d.tar.gz", i) }

// GenerateSpec returns generated model i: a seeded FP32 network 4 → hidden (6…12, every fifth model with a
// second hidden layer of 4…6) → 3 with ReLU hidden layers and a softmax output. memoryBytes > 0 is written
// as its memory_bytes. The same i always gives the same network.
func GenerateSpec(i int, memoryBytes int64) *Spec {
	rng := rand.New(rand.NewPCG(uint64(i), 0x6d63652d6d6d65)) // "mce-mme"
	widths := []int{4, 6 + rng.IntN(7)}
	if i%5 == 0 {
		widths = append(widths, 4+rng.IntN(3))
	}
	widths = append(widths, 3)
	s := &Spec{
		Format:      Format,
		Description: fmt.Sprintf("generated model %d (scripts/mme-models.sh)", i),
		Inputs:      []TensorSpec{{Name: GeneratedInput, Datatype: FP32, Shape: []int64{-1, 4}}},
		Outputs:     []TensorSpec{{Name: GeneratedOutput, Datatype: FP32, Shape: []int64{-1, 3}}},
	}
	for l := 1; l < len(widths); l++ {
		ls := LayerSpec{Activation: ActReLU, Bias: make([]float64, widths[l])}
		if l == len(widths)-1 {
			ls.Activation = ActSoftmax
		}
		scale := 2 / math.Sqrt(float64(widths[l-1]))
		for j := range widths[l] {
			row := make([]float64, widths[l-1])
			for k := range row {
				row[k] = round4((rng.Float64()*2 - 1) * scale)
			}
			ls.Weights = append(ls.Weights, row)
			ls.Bias[j] = round4(rng.Float64() - 0.5)
		}
		s.Layers = append(s.Layers, ls)
	}
	if memoryBytes > 0 {
		s.MemoryBytes = &memoryBytes
	}
	return s
}

// GenerateInput returns a deterministic test request for generated model i: two rows of four values.
func GenerateInput(i int) InferRequest {
	rng := rand.New(rand.NewPCG(uint64(i), 0x696e707574)) // "input"
	data := make([][]float64, 2)
	for r := range data {
		data[r] = make([]float64, 4)
		for k := range data[r] {
			data[r][k] = math.Round((rng.Float64()*4-2)*100) / 100
		}
	}
	raw, _ := json.Marshal(data)
	return InferRequest{Inputs: []InferInput{{Name: GeneratedInput, Shape: []int64{2, 4}, Datatype: FP32, Data: raw}}}
}

func round4(v float64) float64 { return math.Round(v*1e4) / 1e4 }

// GeneratedConfig is the config.pbtxt of generated model name.
func GeneratedConfig(name string, s *Spec) string {
	return fmt.Sprintf(`# Triton-style model configuration, read by mce-example/modelserver (see model.json).
name: %q
backend: %q
max_batch_size: 0
input [ { name: %q, data_type: TYPE_FP32, dims: [ -1, %d ] } ]
output [ { name: %q, data_type: TYPE_FP32, dims: [ -1, %d ] } ]
`, name, Backend, s.Inputs[0].Name, s.Inputs[0].Shape[1], s.Outputs[0].Name, s.Outputs[0].Shape[1])
}

// Manifest describes generated artifacts.
type Manifest struct {
	Format string `json:"format"`
	Count  int    `json:"count"`
	// MemoryBytesPerModel is each model's memory_bytes (0: the bytes of its weights).
	MemoryBytesPerModel int64           `json:"memory_bytes_per_model"`
	Models              []ManifestModel `json:"models"`
}

// ManifestModel is one generated artifact with a test request and the answer modelserver gives when the
// model is loaded under its TargetModel name.
type ManifestModel struct {
	TargetModel string         `json:"target_model"`
	SHA256      string         `json:"sha256"`
	Bytes       int            `json:"bytes"`
	MemoryBytes int64          `json:"memory_bytes"`
	Layers      []int          `json:"layers"`
	Request     InferRequest   `json:"request"`
	Response    *InferResponse `json:"response"`
}

// GenerateArtifact builds generated model i: the .tar.gz bytes (config.pbtxt and model.json at the archive
// root, mtime 0, owner 0:0, mode 0644) and its manifest entry.
func GenerateArtifact(i int, memoryBytes int64) ([]byte, ManifestModel, error) {
	name := ArtifactName(i)
	s := GenerateSpec(i, memoryBytes)
	mj, err := json.Marshal(s)
	if err != nil {
		return nil, ManifestModel{}, err
	}
	mj = append(mj, '\n')
	cfg := GeneratedConfig(fmt.Sprintf("model-%03d", i), s)
	m, err := Compile(s)
	if err != nil {
		return nil, ManifestModel{}, fmt.Errorf("%s: %w", name, err)
	}
	if _, err := ParseConfig([]byte(cfg)); err != nil {
		return nil, ManifestModel{}, fmt.Errorf("%s: %w", name, err)
	}
	req := GenerateInput(i)
	body, err := json.Marshal(req)
	if err != nil {
		return nil, ManifestModel{}, err
	}
	batch, err := m.DecodeRequest(name, body)
	if err != nil {
		return nil, ManifestModel{}, fmt.Errorf("%s: %w", name, err)
	}
	resp, err := m.Run(name, batch)
	if err != nil {
		return nil, ManifestModel{}, fmt.Errorf("%s: %w", name, err)
	}

	var buf bytes.Buffer
	gz, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		return nil, ManifestModel{}, err
	}
	tw := tar.NewWriter(gz)
	for _, f := range []struct {
		name string
		data []byte
	}{{ConfigFile, []byte(cfg)}, {ModelFile, mj}} {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: f.name, Mode: 0o644, Size: int64(len(f.data)),
			ModTime: time.Unix(0, 0), Format: tar.FormatUSTAR}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, ManifestModel{}, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, ManifestModel{}, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, ManifestModel{}, err
	}
	if err := gz.Close(); err != nil {
		return nil, ManifestModel{}, err
	}
	sum := sha256.Sum256(buf.Bytes())
	return buf.Bytes(), ManifestModel{
		TargetModel: name, SHA256: hex.EncodeToString(sum[:]), Bytes: buf.Len(), MemoryBytes: m.Footprint,
		Layers: m.Widths(), Request: req, Response: resp,
	}, nil
}

// WriteArtifacts writes n generated artifacts and manifest.json into dir, replacing files atomically and
// leaving unchanged ones untouched.
func WriteArtifacts(dir string, n int, memoryBytes int64) (*Manifest, error) {
	if n < 1 || n > 100000 {
		return nil, fmt.Errorf("count %d is outside 1…100000", n)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	man := &Manifest{Format: ManifestFormat, Count: n, MemoryBytesPerModel: max(memoryBytes, 0)}
	for i := range n {
		b, mm, err := GenerateArtifact(i, memoryBytes)
		if err != nil {
			return nil, err
		}
		if err := writeIfChanged(filepath.Join(dir, mm.TargetModel), b); err != nil {
			return nil, err
		}
		man.Models = append(man.Models, mm)
	}
	b, err := json.MarshalIndent(man, "", " ")
	if err != nil {
		return nil, err
	}
	if err := writeIfChanged(filepath.Join(dir, "manifest.json"), append(b, '\n')); err != nil {
		return nil, err
	}
	return man, nil
}

func writeIfChanged(name string, b []byte) error {
	if old, err := os.ReadFile(name); err == nil && bytes.Equal(old, b) {
		return nil
	}
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}
