package artifact

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestExtractProgress: an extraction reports its bytes and files to the
// context's logger, ending with a "took" line; the quiet period keeps quick
// work silent.
func TestExtractProgress(t *testing.T) {
	archive := buildTar(t, true, file("a.bin", strings.Repeat("a", 300<<10)), file("b/c.txt", "hello"), dir("d"))
	run := func(quiet, every time.Duration) []map[string]any {
		t.Helper()
		var out bytes.Buffer
		log := zerolog.New(&out).With().Str("container", "english").Logger()
		ctx := WithProgress(log.WithContext(context.Background()), ProgressOptions{Quiet: quiet, Every: every})
		ctx = withSource(ctx, "file://m.tar.gz")
		if err := Extract(ctx, bytes.NewReader(archive), t.TempDir(), Limits{}); err != nil {
			t.Fatal(err)
		}
		var lines []map[string]any
		for l := range strings.SplitSeq(strings.TrimSpace(out.String()), "\n") {
			if l == "" {
				continue
			}
			var m map[string]any
			if err := json.Unmarshal([]byte(l), &m); err != nil {
				t.Fatal(err)
			}
			lines = append(lines, m)
		}
		return lines
	}
	if lines := run(time.Hour, time.Hour); len(lines) != 0 {
		t.Errorf("a quick extraction logged %v", lines)
	}
	lines := run(-1, -1)
	if len(lines) < 3 {
		t.Fatalf("lines = %v; want one per step and a last one", lines)
	}
	last := lines[len(lines)-1]
	took, _ := last["took_ms"].(float64)
	msg, _ := last["message"].(string)
	if last["event"] != "extract" || last["source"] != "file://m.tar.gz" || last["container"] != "english" ||
		last["bytes"] != float64(300<<10+5) || last["files"] != float64(2) || took <= 0 ||
		!strings.HasPrefix(msg, "extracted file://m.tar.gz: ") || !strings.Contains(msg, "2 files") {
		t.Errorf("last line = %v", last)
	}
	if first := lines[0]; first["elapsed_ms"] == nil || !strings.HasPrefix(first["message"].(string), "extracting ") {
		t.Errorf("first line = %v", first)
	}
}

// TestStageProgress: copying a model folder reports as "stage".
func TestStageProgress(t *testing.T) {
	src := t.TempDir()
	os.WriteFile(filepath.Join(src, "model.bin"), []byte("weights"), 0o644)
	var out bytes.Buffer
	log := zerolog.New(&out)
	root, err := os.OpenRoot(src)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if err := stage(withSource(WithProgress(log.WithContext(context.Background()), ProgressOptions{Quiet: -1}), "file://models/x"), root, t.TempDir(), Limits{}); err != nil {
		t.Fatal(err)
	}
	if s := out.String(); !strings.Contains(s, `"event":"stage"`) || !strings.Contains(s, `"files":1`) || !strings.Contains(s, "copied the model folder file://models/x") {
		t.Errorf("log = %s", s)
	}
}
