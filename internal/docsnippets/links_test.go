package docsnippets

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// markdownFiles lists every .md file of the repository, relative to its
// root, leaving out build outputs and hidden folders.
func markdownFiles(t *testing.T, root string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if p != root && (strings.HasPrefix(name, ".") || name == "build" || name == "bin" || name == "node_modules" || name == "__pycache__") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".md") {
			rel, _ := filepath.Rel(root, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

var (
	linkRE        = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`) // [text](target) and ![alt](target)
	inlineCodeRE  = regexp.MustCompile("`+[^`]*`+")
	headingRE     = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	headingLinkRE = regexp.MustCompile(`\]\([^)]*\)`)
)

// prose returns the lines of a Markdown document outside fenced code blocks,
// with inline code spans emptied of their text (a link's text may be code, its
// target never is), keyed by line number from 1.
func prose(doc string) map[int]string {
	out := map[int]string{}
	fence := ""
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			f := trimmed[:3]
			for len(f) < len(trimmed) && trimmed[len(f)] == f[0] {
				f += f[:1]
			}
			fence = f
			continue
		}
		out[i+1] = inlineCodeRE.ReplaceAllString(line, "`x`")
	}
	return out
}

// anchors returns the anchors GitHub gives a document's headings: lower case,
// punctuation dropped, spaces as hyphens, a repeated one numbered -1, -2, ….
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	fence := ""
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if fence != "" {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				fence = ""
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			fence = trimmed[:3]
			for len(fence) < len(trimmed) && trimmed[len(fence)] == fence[0] {
				fence += fence[:1]
			}
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		text := headingLinkRE.ReplaceAllString(m[1], "]") // a link in a heading: its text only
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' || r == '-':
				b.WriteRune(r)
			case r == ' ':
				b.WriteRune('-')
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			out[slug+"-"+strconv.Itoa(n)] = true
		} else {
			out[slug] = true
		}
		seen[slug]++
	}
	return out
}

func TestAnchors(t *testing.T) {
	doc := "# mce — SageMaker endpoints\n## Framework containers: your SageMaker `inference.py`, unchanged\n" +
		"```sh\n# not a heading\n```\n## With a real S3 server\n## Limits\n## Limits\n## See [the README](../README.md)\n"
	got := anchors(doc)
	for _, want := range []string{"mce--sagemaker-endpoints", "framework-containers-your-sagemaker-inferencepy-unchanged",
		"with-a-real-s3-server", "limits", "limits-1", "see-the-readme"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Error("a comment in a code block became an anchor")
	}
}

// TestRelativeLinks: every relative link of every Markdown file points to a
// file or folder of the repository, and a link's #anchor to a heading of the
// Markdown file it names, so that moving a section (or a file) cannot leave a
// reader at a dead end.
func TestRelativeLinks(t *testing.T) {
	root := repoRoot(t)
	files := markdownFiles(t, root)
	if len(files) < 20 {
		t.Fatalf("found only %d Markdown files: the walk is broken", len(files))
	}
	cache := map[string]map[string]bool{}
	anchorsOf := func(rel string) map[string]bool {
		if a, ok := cache[rel]; ok {
			return a
		}
		b, err := os.ReadFile(filepath.Join(root, rel))
		if err != nil {
			t.Fatal(err)
		}
		cache[rel] = anchors(string(b))
		return cache[rel]
	}
	links := 0
	for _, file := range files {
		b, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range prose(string(b)) {
			for _, m := range linkRE.FindAllStringSubmatch(line, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				links++
				path, anchor, _ := strings.Cut(target, "#")
				rel := file
				if path != "" {
					if strings.HasPrefix(path, "/") {
						t.Errorf("%s:%d: link %q is absolute: GitHub resolves it against the site, not the repository", file, n, target)
						continue
					}
					rel = filepath.ToSlash(filepath.Join(filepath.Dir(file), path))
					if rel == ".." || strings.HasPrefix(rel, "../") {
						t.Errorf("%s:%d: link %q leaves the repository", file, n, target)
						continue
					}
					if _, err := os.Stat(filepath.Join(root, rel)); err != nil {
						t.Errorf("%s:%d: link %q: %s does not exist", file, n, target, rel)
						continue
					}
				}
				if anchor != "" && strings.HasSuffix(rel, ".md") && !anchorsOf(rel)[anchor] {
					t.Errorf("%s:%d: link %q: %s has no heading with anchor #%s", file, n, target, rel, anchor)
				}
			}
		}
	}
	if links < 50 {
		t.Fatalf("found only %d relative links: the parsing is broken", links)
	}
	t.Logf("%d relative links in %d Markdown files", links, len(files))
}
