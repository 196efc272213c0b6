package modelserver

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// extract unpacks a generated artifact into dir, checking that its files sit at the archive root.
func extract(t *testing.T, b []byte, dir string) []string {
	t.Helper()
	gz, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if filepath.Base(hdr.Name) != hdr.Name || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o644 || hdr.ModTime.Unix() != 0 {
			t.Fatalf("entry %q type %c mode %o mtime %v", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.ModTime)
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, hdr.Name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
	}
	return names
}

// TestGeneratedModelsThroughMME loads generated artifacts the way SageMaker does (extracted under
// /opt/ml/models/<hash>/model, named by the Target-Model header) and checks the manifest's answers.
func TestGeneratedModelsThroughMME(t *testing.T) {
	h := newMME(t, Settings{MemoryBytes: 3 * (10 << 20), WorkspaceBytes: DefaultWorkspaceBytes})
	hashes := map[int]string{0: "a0", 5: "b5", 42: "c42", 199: "d199"}
	loaded := 0
	for i, hash := range hashes {
		b, mm, err := GenerateArtifact(i, 10<<20)
		if err != nil {
			t.Fatal(err)
		}
		if names := extract(t, b, filepath.Join(h.root, "opt/ml/models", hash, "model")); len(names) != 2 ||
			names[0] != ConfigFile || names[1] != ModelFile {
			t.Fatalf("archive files %v", names)
		}
		if mm.TargetModel != ArtifactName(i) || mm.MemoryBytes != 10<<20 || mm.Bytes != len(b) {
			t.Errorf("manifest entry %+v", mm)
		}
		r := h.load(hash, "/opt/ml/models/"+hash+"/model", TargetModelHeader, mm.TargetModel)
		if loaded == 3 { // the fourth 10 MiB model does not fit in 30 MiB
			expect(t, "fourth", r, 507, "out of memory")
			continue
		}
		expect(t, "load", r, 200, "")
		loaded++
		body, _ := json.Marshal(mm.Request)
		got := h.do("POST", "/models/"+hash+"/invoke", string(body), TargetModelHeader, mm.TargetModel)
		want, _ := json.Marshal(mm.Response)
		if got.status != 200 || got.body != string(want)+"\n" {
			t.Fatalf("model %d: %d %s\nwant %s", i, got.status, got.body, want)
		}
	}
}

func TestGeneratedModelsDiffer(t *testing.T) {
	seen := map[string]int{}
	for i := range 20 {
		_, mm, err := GenerateArtifact(i, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := json.Marshal(mm.Response.Outputs)
		if j, ok := seen[string(out)]; ok {
			t.Errorf("models %d and %d answer alike", i, j)
		}
		seen[string(out)] = i
		if mm.MemoryBytes >= 10<<20 || mm.MemoryBytes != int64(4*paramsOf(mm.Layers)) {
			t.Errorf("model %d: memory %d for layers %v", i, mm.MemoryBytes, mm.Layers)
		}
	}
}

func paramsOf(widths []int) int {
	n := 0
	for i := 1; i < len(widths); i++ {
		n += widths[i-1]*widths[i] + widths[i]
	}
	return n
}

func TestWriteArtifactsDeterministic(t *testing.T) {
	d1, d2 := t.TempDir(), t.TempDir()
	m1, err := WriteArtifacts(d1, 3, 10<<20)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := WriteArtifacts(d2, 3, 10<<20); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model-000.tar.gz", "model-001.tar.gz", "model-002.tar.gz", "manifest.json"} {
		a, err1 := os.ReadFile(filepath.Join(d1, name))
		b, err2 := os.ReadFile(filepath.Join(d2, name))
		if err1 != nil || err2 != nil || !bytes.Equal(a, b) {
			t.Errorf("%s differs between runs (%v %v)", name, err1, err2)
		}
	}
	var back Manifest
	b, _ := os.ReadFile(filepath.Join(d1, "manifest.json"))
	if err := json.Unmarshal(b, &back); err != nil || back.Count != 3 || back.Format != ManifestFormat || len(back.Models) != 3 ||
		back.Models[2].SHA256 != m1.Models[2].SHA256 {
		t.Errorf("manifest %+v %v", back, err)
	}
	if _, err := WriteArtifacts(d1, 0, 0); err == nil {
		t.Error("count 0 accepted")
	}
}
