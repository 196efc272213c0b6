package docsnippets

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

const mceAddr = "127.0.0.1:8080" // the address the READMEs use, mce's default

func TestParse(t *testing.T) {
	doc := "# t\n\n```sh\necho a\n```\n\n<!-- snippet: skip needs a GPU -->\n\n```bash\nnvidia-smi\n```\n" +
		"```yaml\nx: 1\n```\n<!-- snippet: serve -->\n```sh\nbin/mce serve\n```\n````python\nprint(1)\n```\n````\n"
	bs, err := Parse(strings.NewReader(doc))
	if err != nil {
		t.Fatal(err)
	}
	want := []Block{
		{Line: 3, Lang: "sh", Text: "echo a\n"},
		{Line: 9, Lang: "bash", Text: "nvidia-smi\n", Directive: "skip", Reason: "needs a GPU"},
		{Line: 16, Lang: "sh", Text: "bin/mce serve\n", Directive: "serve"},
		{Line: 19, Lang: "python", Text: "print(1)\n```\n"},
	}
	if len(bs) != len(want) {
		t.Fatalf("got %d blocks: %+v", len(bs), bs)
	}
	for i := range want {
		if bs[i] != want[i] {
			t.Errorf("block %d = %+v, want %+v", i, bs[i], want[i])
		}
	}
	for _, bad := range []string{"<!-- snippet: skip -->\n```sh\nx\n```\n", "<!-- snippet: maybe -->\n```sh\nx\n```\n", "```sh\nx\n", "<!-- snippet: serve -->\ntext\n"} {
		if _, err := Parse(strings.NewReader(bad)); err == nil {
			t.Errorf("Parse(%q) accepted it", bad)
		}
	}
}

// readmes lists the documents whose snippets run, relative to the repository
// root: the READMEs, and the reference documents of docs/ that the README
// points to.
func readmes(t *testing.T, root string) []string {
	var files []string
	files = append(files, "README.md", "bench/README.md", "compose/README.md")
	docs, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(docs) == 0 {
		t.Fatal("no docs/*.md: the glob is broken")
	}
	for _, p := range docs { // sorted by Glob
		rel, _ := filepath.Rel(root, p)
		files = append(files, rel)
	}
	err = filepath.WalkDir(filepath.Join(root, "examples"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() == "README.md" {
			rel, _ := filepath.Rel(root, p)
			files = append(files, rel)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// selected keeps the files that MCE_SNIPPETS names: comma-separated paths
// from the repository root, or path.Match patterns ("docs/*.md"). Unset, every
// file; a filter that names none of them fails, rather than running nothing.
func selected(t *testing.T, files []string) []string {
	filter := strings.TrimSpace(os.Getenv("MCE_SNIPPETS"))
	if filter == "" {
		return files
	}
	var out []string
	for _, f := range files {
		for _, pat := range strings.Split(filter, ",") {
			if ok, err := path.Match(strings.TrimSpace(pat), filepath.ToSlash(f)); err != nil {
				t.Fatalf("MCE_SNIPPETS: %v", err)
			} else if ok {
				out = append(out, f)
				break
			}
		}
	}
	if len(out) == 0 {
		t.Fatalf("MCE_SNIPPETS=%q names none of %v", filter, files)
	}
	return out
}

func TestSelected(t *testing.T) {
	files := []string{"README.md", "docs/async.md", "docs/logs.md", "examples/go-mme/README.md"}
	for filter, want := range map[string]string{
		"":                     "README.md docs/async.md docs/logs.md examples/go-mme/README.md",
		"docs/async.md":        "docs/async.md",
		"README.md, docs/*.md": "README.md docs/async.md docs/logs.md",
		"examples/*/README.md": "examples/go-mme/README.md",
	} {
		t.Setenv("MCE_SNIPPETS", filter)
		if got := strings.Join(selected(t, files), " "); got != want {
			t.Errorf("MCE_SNIPPETS=%q selected %q, want %q", filter, got, want)
		}
	}
}

// TestEveryExampleHasAREADME: each folder under examples/ explains itself.
func TestEveryExampleHasAREADME(t *testing.T) {
	root := repoRoot(t)
	ents, err := os.ReadDir(filepath.Join(root, "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(root, "examples", e.Name(), "README.md")); err != nil {
				t.Errorf("examples/%s has no README.md", e.Name())
			}
		}
	}
}

func repoRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// skipOrFail skips, or fails under CI, where the test cannot run a README.
func skipOrFail(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") != "" {
		t.Fatalf(format, args...)
	}
	t.Skipf("SKIPPED (would fail under CI): "+format, args...)
}

// userEnv is the environment of a reader who has not configured AWS: no
// credentials, profile or region of the caller's leak into the snippets. Nor
// does mce's state of earlier runs: stateHome is the README's own
// XDG_STATE_HOME, so `mce serve` starts from an empty default state folder as
// on a new machine (endpoints kept there would otherwise come back).
func userEnv(stateHome string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "AWS_") || strings.HasPrefix(kv, "MCE_") {
			continue
		}
		env = append(env, kv)
	}
	return append(env, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_EC2_METADATA_DISABLED=true",
		"XDG_STATE_HOME="+stateHome)
}

func command(ctx context.Context, root, stateHome string, b Block) *exec.Cmd {
	var cmd *exec.Cmd
	if b.Lang == "python" {
		cmd = exec.CommandContext(ctx, "python3", "-c", b.Text)
	} else {
		cmd = exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", b.Text)
	}
	cmd.Dir = root
	cmd.Env = userEnv(stateHome)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	return cmd
}

// waitInService waits until mce on mceAddr lists endpoints, none of them
// still being created, or until failed is closed or ctx ends. It waits on
// that condition alone, however long a loaded machine takes, within ctx's
// guard against a hang; when it gives up, the error says what was still
// pending: mce's last listing, or that mce never answered.
func waitInService(ctx context.Context, failed <-chan struct{}) error {
	last := "mce never answered GET /mce/endpoints"
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+mceAddr+"/mce/endpoints", nil)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			b, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
			resp.Body.Close()
			s := string(b)
			if resp.StatusCode == 200 && strings.Contains(s, `"InService"`) && !strings.Contains(s, `Creating"`) &&
				!strings.Contains(s, `Updating"`) && !strings.Contains(s, `"RollingBack"`) { // Updating, SystemUpdating
				return nil
			}
			last = fmt.Sprintf("mce's last listing (HTTP %d): %s", resp.StatusCode, s)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w; still pending: %s", ctx.Err(), last)
		case <-failed:
			return fmt.Errorf("the serving command exited; %s", last)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// snippetFileGuard bounds one document's snippets: a guard against a hang,
// not a measure of speed. A document whose endpoints take 3.5 minutes to
// come up alone took more than 5 on a machine shared with other builds;
// the waits inside wait on their conditions, and this only stops one that
// never ends.
const snippetFileGuard = 12 * time.Minute

// TestREADMESnippets runs every README's and docs/ document's snippets as
// written; MCE_SNIPPETS picks some of the files (see selected).
func TestREADMESnippets(t *testing.T) {
	if testing.Short() {
		t.Skip("runs mce and containers")
	}
	root := repoRoot(t)
	for _, file := range selected(t, readmes(t, root)) {
		t.Run(strings.ReplaceAll(file, "/", "_"), func(t *testing.T) {
			f, err := os.Open(filepath.Join(root, file))
			if err != nil {
				t.Fatal(err)
			}
			blocks, err := Parse(f)
			f.Close()
			if err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			stateHome := t.TempDir()
			runnable := 0
			for _, b := range blocks {
				if b.Directive != "skip" {
					runnable++
				}
				if b.Directive == "serve" {
					if _, err := os.Stat(filepath.Join(root, "bin/mce")); err != nil {
						skipOrFail(t, "%s needs bin/mce: run make build", file)
					}
					if l, err := net.Listen("tcp", mceAddr); err != nil {
						skipOrFail(t, "%s starts mce on %s, which is taken: %v", file, mceAddr, err)
					} else {
						l.Close()
					}
				}
			}
			if runnable == 0 {
				t.Skipf("%s: no runnable snippets", file)
			}
			ctx, cancel := context.WithTimeout(context.Background(), snippetFileGuard)
			defer cancel()
			type server struct {
				pid    int
				exited chan struct{}
			}
			var servers []server
			defer func() {
				// SIGINT, as a reader's Ctrl-C: mce removes its containers.
				for _, s := range servers {
					syscall.Kill(-s.pid, syscall.SIGINT)
					select {
					case <-s.exited:
					case <-time.After(30 * time.Second):
						syscall.Kill(-s.pid, syscall.SIGKILL)
						<-s.exited
					}
				}
			}()
			for _, b := range blocks {
				switch b.Directive {
				case "skip":
					t.Logf("%s:%d: skipped: %s", file, b.Line, b.Reason)
					continue
				case "serve":
					cmd := command(context.Background(), root, stateHome, b)
					var out strings.Builder
					cmd.Stdout, cmd.Stderr = &out, &out
					if err := cmd.Start(); err != nil {
						t.Fatalf("%s:%d: %v", file, b.Line, err)
					}
					// A block that starts mce in the background (docker-compose up -d)
					// exits 0 at once: then only mce's answer is waited for.
					exited, failed := make(chan struct{}), make(chan struct{})
					go func() {
						if cmd.Wait() != nil {
							close(failed)
						}
						close(exited)
					}()
					servers = append(servers, server{cmd.Process.Pid, exited})
					if err := waitInService(ctx, failed); err != nil {
						t.Fatalf("%s:%d: mce never had every endpoint InService: %v\n--- snippet\n%s--- its output\n%s", file, b.Line, err, b.Text, out.String())
					}
					continue
				}
				out, err := command(ctx, root, stateHome, b).CombinedOutput()
				if err != nil {
					t.Fatalf("%s:%d: %v\n--- snippet\n%s--- output\n%s", file, b.Line, err, b.Text, out)
				}
				t.Logf("%s:%d: ok", file, b.Line)
			}
		})
	}
}
