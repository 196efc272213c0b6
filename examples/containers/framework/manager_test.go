package framework

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
)

// tarGz packs the folder src into a model.tar.gz at dst.
func tarGz(t *testing.T, src, dst string) {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == src {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err == nil {
		err = tw.Close()
	}
	if err == nil {
		err = zw.Close()
	}
	if err == nil {
		err = os.WriteFile(dst, buf.Bytes(), 0o644)
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestWithMCEManager drives the PyTorch image's multi-model mode with mce's own multi-model
// manager (containers/mme), as an endpoint does: model.tar.gz artifacts under a file:// prefix,
// downloaded into the cache folder mounted at /opt/ml/models, loaded on first use, and the least
// recently used model unloaded when the container answers 507 under MCE_MODEL_MEMORY_MB.
func TestWithMCEManager(t *testing.T) {
	t.Parallel()
	s := newSuite(t)
	work := tempDir(t)
	gen, store, cacheDir := filepath.Join(work, "gen"), filepath.Join(work, "store"), filepath.Join(work, "cache")
	weights := map[string][][]float64{"m1": {{1, 0}}, "m2": {{0, 1}}, "m3": {{1, 1}}}
	var specs []spec
	for name, w := range weights {
		specs = append(specs, spec{"dir": name, "kind": "torch", "weight": w, "bias": []float64{0}, "pad_mb": 35})
	}
	s.generate(t, pytorchImage, gen, specs...)
	s.withCode(t, filepath.Join(gen, "m1"), "mme_a") // one model with its own code, the others the defaults
	if err := os.MkdirAll(store, 0o755); err != nil {
		t.Fatal(err)
	}
	for name := range weights {
		tarGz(t, filepath.Join(gen, name), filepath.Join(store, name+".tar.gz"))
	}

	fetcher, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{store}})
	if err != nil {
		t.Fatal(err)
	}
	cache, err := mme.NewCache(mme.CacheOptions{Dir: cacheDir, Prefix: "file://" + store + "/", Fetcher: fetcher, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cache.Close)
	// 80 MiB hold two 35 MiB models, not three.
	c := s.start(t, pytorchImage, []string{"SAGEMAKER_MULTI_MODEL=true", "MCE_MODEL_MEMORY_MB=80"},
		[]string{cacheDir + ":/opt/ml/models:ro"})
	c.waitReady(t, 90*time.Second)
	mgr, err := mme.NewManager(mme.ManagerOptions{Store: cache, BaseURL: func() string { return c.base }, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mgr.Close)

	invoke := func(target string) []byte {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		for attempt := 0; ; attempt++ {
			lease, err := mgr.Acquire(ctx, target)
			if err != nil {
				t.Fatalf("Acquire(%s): %v\n%s", target, err, c.logs(t))
			}
			r := c.do(t, http.MethodPost, "/models/"+lease.ModelID()+"/invoke", []byte("[[2, 3]]"),
				"Content-Type: application/json", mme.TargetModelHeader+": "+target)
			if r.status == http.StatusInsufficientStorage && attempt < 3 {
				err = lease.OutOfMemory(ctx)
				lease.Release()
				if err != nil {
					t.Fatalf("OutOfMemory(%s): %v", target, err)
				}
				continue
			}
			lease.Release()
			if r.status != 200 {
				t.Fatalf("invoke %s: %d %q", target, r.status, r.body)
			}
			return r.body
		}
	}
	want := map[string]string{"m1": `{"model": "a", "outputs": [[4.0]]}`, "m2": "[[3.0]]", "m3": "[[5.0]]"}
	for _, name := range []string{"m1", "m2", "m3", "m1", "m2", "m3", "m3"} {
		if got := string(invoke(name + ".tar.gz")); got != want[name] {
			t.Fatalf("%s: %s, want %s", name, got, want[name])
		}
	}
	var list struct {
		Models []json.RawMessage `json:"models"`
	}
	if r := c.do(t, http.MethodGet, "/models", nil); json.Unmarshal(r.body, &list) != nil || len(list.Models) != 2 {
		t.Fatalf("GET /models after the round: %q, want two models loaded", r.body)
	}
	// The engine's log of the container may lag its answers: wait for the
	// count, not for the first unload line.
	var logs string
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		logs = c.logs(t)
		if strings.Count(logs, "unloaded model") >= 4 || time.Now().After(deadline) {
			break
		}
	}
	if n := strings.Count(logs, "unloaded model"); n < 4 {
		t.Fatalf("%d unloads, want at least 4 (every load after the second evicts one):\n%s", n, logs)
	}
}
