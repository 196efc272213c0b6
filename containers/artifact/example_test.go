package artifact_test

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/mce-run/mce/containers/artifact"
)

// archive builds a small tar archive in memory.
func archive(files map[string]string, order ...string) *bytes.Reader {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, name := range order {
		body := files[name]
		_ = tw.WriteHeader(&tar.Header{Name: name, Mode: 0o600, Size: int64(len(body)), Typeflag: tar.TypeReg})
		_, _ = tw.Write([]byte(body))
	}
	_ = tw.Close()
	return bytes.NewReader(buf.Bytes())
}

func ExampleExtract() {
	dest, _ := os.MkdirTemp("", "model-")
	defer os.RemoveAll(dest)

	r := archive(map[string]string{"model/1/model.onnx": "weights", "model/config.pbtxt": "name: \"m\""},
		"model/config.pbtxt", "model/1/model.onnx")
	if err := artifact.Extract(context.Background(), r, dest, artifact.Limits{}); err != nil {
		fmt.Println(err)
		return
	}
	fi, _ := os.Stat(filepath.Join(dest, "model/1/model.onnx"))
	fmt.Println(fi.Mode()) // 0600 in the archive, readable by every user once extracted
	// Output: -rw-r--r--
}

func ExampleExtract_unsafe() {
	dest, _ := os.MkdirTemp("", "model-")
	defer os.RemoveAll(dest)

	r := archive(map[string]string{"../../etc/cron.d/x": "* * * * * root true"}, "../../etc/cron.d/x")
	err := artifact.Extract(context.Background(), r, dest, artifact.Limits{})
	var ue *artifact.UnsafeEntryError
	fmt.Println(errors.Is(err, artifact.ErrUnsafeArchive), errors.As(err, &ue) && ue.Name == "../../etc/cron.d/x")
	fmt.Println(err)
	// Output:
	// true true
	// unsafe archive entry "../../etc/cron.d/x": ".." path components are not allowed
}

func ExampleFetcher_Prepare() {
	base, _ := os.MkdirTemp("", "endpoint-")
	defer os.RemoveAll(base)
	_ = os.MkdirAll(filepath.Join(base, "models", "en"), 0o755)

	// file:// data comes only from model roots: the endpoint file's folder.
	f, err := artifact.NewFetcher(artifact.Options{ModelRoots: []string{base}})
	if err != nil {
		fmt.Println(err)
		return
	}
	// A folder relative to the endpoint file's folder is staged: copied
	// into a new folder under the work directory.
	work := filepath.Join(base, "work")
	dir, err := f.Prepare(context.Background(), "file://models/en", base, work)
	fmt.Println(filepath.Dir(dir) == work, err)

	_, err = f.Prepare(context.Background(), "file://models/missing.tar.gz", base, work)
	fmt.Println(errors.Is(err, artifact.ErrNotFound))

	_, err = f.Prepare(context.Background(), "file://../../etc", base, work)
	fmt.Println(errors.Is(err, artifact.ErrOutsideModelRoots))
	// Output:
	// true <nil>
	// true
	// true
}
