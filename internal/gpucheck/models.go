package gpucheck

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

//go:embed assets/inference.py
var inferencePy []byte

//go:embed assets/serve.py
var servePy []byte

// modelName is the TargetModel of the i-th generated model.
func modelName(i int) string { return fmt.Sprintf("model-%03d.tar.gz", i) }

// writeModels writes n model archives into dir: code/inference.py and a
// model.json naming the weights' size in bytes and the device.
func writeModels(dir string, n int, size int64, device string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for i := range n {
		cfg, _ := json.Marshal(map[string]any{"bytes": size, "seed": i, "device": device})
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for _, f := range []struct {
			name string
			body []byte
		}{{"model.json", cfg}, {"code/inference.py", inferencePy}} {
			hdr := &tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.body)), ModTime: time.Unix(0, 0), Typeflag: tar.TypeReg}
			if err := tw.WriteHeader(hdr); err != nil {
				return err
			}
			if _, err := tw.Write(f.body); err != nil {
				return err
			}
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, modelName(i)), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	return nil
}
