package wire

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// FuzzValidName checks the hand-written name matcher against the regular
// expression of the service model it replaces, and EntityNamePattern against
// NamePattern with at most 63 letters and digits.
func FuzzValidName(f *testing.F) {
	re := regexp.MustCompile(`^[a-zA-Z0-9](-*[a-zA-Z0-9])*$`)
	entity := regexp.MustCompile("^" + EntityNamePattern + "$")
	if NamePattern+"$" != re.String() {
		f.Fatalf("NamePattern %q is not the service model's ModelName pattern %q", NamePattern, re)
	}
	for _, s := range []string{"", "a", "-", "a-", "-a", "a--b", "ab-c9", "a_b", "é", "A1-b2--C3",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a-", 31) + "a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := ValidName(s), re.MatchString(s); got != want {
			t.Fatalf("ValidName(%q) = %v, the regexp says %v", s, got, want)
		}
		// {0,62} counts letters and digits, not dashes: the length limit of
		// 63 is a separate rule of the service model.
		if got, want := entity.MatchString(s), ValidName(s) && len(s)-strings.Count(s, "-") <= 63; got != want {
			t.Fatalf("EntityNamePattern on %q = %v, want ValidName with at most 63 letters and digits: %v", s, got, want)
		}
	})
}

func TestSharedPatterns(t *testing.T) {
	s3 := regexp.MustCompile(S3URIPattern)
	for s, want := range map[string]bool{
		"s3://bucket/key/model.tar.gz": true, "s3://bucket": true, "https://bucket.s3.amazonaws.com/k": true,
		"file:///models/m.tar.gz": false, "s3:///key": false, "S3://bucket/key": false, "x s3://b/k": false,
	} {
		if got := s3.MatchString(s); got != want {
			t.Errorf("S3URIPattern on %q = %v, want %v", s, got, want)
		}
	}
	env := regexp.MustCompile("^" + EnvironmentKeyPattern + "$")
	for s, want := range map[string]bool{
		"SAGEMAKER_PROGRAM": true, "_x": true, "a1": true, "": false, "1A": false, "A-B": false, "A B": false, "É": false,
	} {
		if got := env.MatchString(s); got != want {
			t.Errorf("EnvironmentKeyPattern on %q = %v, want %v", s, got, want)
		}
	}
}

// TestHeaderNamesAreDeclaredOnce fails when a Go file of mce outside this
// package spells a SageMaker header name (X-Amzn-…) as a string literal of
// its own: the name belongs here, once. Tests are left out (they check the
// wire contract on their own), as is text that merely mentions a header.
func TestHeaderNamesAreDeclaredOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Fatalf("the repository root is not two folders up: %v", err)
	}
	self := filepath.Join(root, "internal", "wire")
	header := regexp.MustCompile(`(?i)^x-amzn-[a-z0-9-]+$`)
	var files int
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case ".git", "build", "node_modules", "testdata":
				return filepath.SkipDir
			}
			if path != root {
				if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
					return filepath.SkipDir // another module
				}
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || filepath.Dir(path) == self {
			return nil
		}
		files++
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
				if v, err := strconv.Unquote(lit.Value); err == nil && header.MatchString(v) {
					t.Errorf("%s declares the header name %q: use the constant of package wire", path, v)
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("only %d Go files were read: the walk missed the repository", files)
	}
}

func TestS3KeyRefused(t *testing.T) {
	for url, refused := range map[string]bool{
		"s3://b/k": false, "s3://b/folder/": false, "s3://b/": false, "s3://b": false, "s3://b/a.b/c..d/.e": false,
		"file://../x": false, "https://h/../x": false,
		"s3://b/../x": true, "s3://b/x/..": true, "s3://b/x/../": true, "s3://b/./x": true, "s3://b/x/.": true,
		"s3://b//x": true, "s3://b/x//y": true, "s3://b/x//": true,
	} {
		if got := S3KeyRefused(url) != ""; got != refused {
			t.Errorf("S3KeyRefused(%q) = %q, want refused %v", url, S3KeyRefused(url), refused)
		}
	}
}
