package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// helpCommandRE finds the command lines of help texts: "mce …" indented, or
// after a label such as "Start with:  " (prose starts at the margin).
var helpCommandRE = regexp.MustCompile(`(?m)^(?:[ \t]+|[A-Z][^:\n]*:[ \t]{2,})(mce\s.*)$`)

// helpExamples returns every example command line of the command tree's
// Long and Example texts, continuation lines joined, by command path.
func helpExamples(root *cobra.Command) map[string][]string {
	out := map[string][]string{}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		text := strings.ReplaceAll(c.Long+"\n"+c.Example, "\\\n", " ")
		for _, m := range helpCommandRE.FindAllStringSubmatch(text, -1) {
			out[c.CommandPath()] = append(out[c.CommandPath()], strings.TrimSpace(m[1]))
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
	return out
}

// shellWords splits a command line as the shell would for these examples:
// blanks separate words, single and double quotes group them. (Help texts
// hold no variables, escapes or globs; a shell-parser dependency for this
// one test would be more than it needs.)
func shellWords(t *testing.T, line string) []string {
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case r == '#' && !inWord:
			return words
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unclosed quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// TestHelpExamplesRunAsWritten: every command that --help shows parses with
// the real flags and arguments, and every repository file it names exists
// (from the repository root, where the READMEs run them too). The policy
// examples, which need neither Docker nor a server, are run.
func TestHelpExamplesRunAsWritten(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	examples := helpExamples(newRootCmd())
	n := 0
	for path, lines := range examples {
		for _, line := range lines {
			n++
			words := shellWords(t, line)
			if words[0] != "mce" {
				t.Errorf("%s: example %q does not start with mce", path, line)
				continue
			}
			cmd, rest, err := newRootCmd().Find(words[1:])
			if err != nil || !cmd.Runnable() {
				t.Errorf("%s: example %q: no such command (%v)", path, line, err)
				continue
			}
			if err := cmd.ParseFlags(rest); err != nil {
				t.Errorf("%s: example %q: %v", path, line, err)
				continue
			}
			if err := cmd.ValidateArgs(cmd.Flags().Args()); err != nil {
				t.Errorf("%s: example %q: %v", path, line, err)
			}
			for i, w := range words[1:] {
				// Words that name repository files: a relative path with a
				// folder, not a media type, URL, ARN, image reference or
				// key=value.
				if prev := words[i]; prev == "--content-type" || prev == "--accept" {
					continue
				}
				p := strings.TrimPrefix(w, "@")
				if !strings.Contains(p, "/") || strings.ContainsAny(p, ":=") || strings.HasPrefix(p, "-") {
					continue
				}
				if strings.HasPrefix(p, "build/") {
					continue // made by scripts/*.sh (make models framework-models), named in the README next to them
				}
				if _, err := os.Stat(filepath.Join(root, p)); err != nil {
					t.Errorf("%s: example %q names %s, which is not in the repository", path, line, p)
				}
			}
			if cmd.Parent() != nil && cmd.Parent().Name() == "policy" {
				wd, _ := os.Getwd()
				if err := os.Chdir(root); err != nil {
					t.Fatal(err)
				}
				var out bytes.Buffer
				c := newRootCmd()
				c.SetArgs(words[1:])
				c.SetOut(&out)
				c.SetErr(&out)
				err := c.ExecuteContext(context.Background())
				os.Chdir(wd)
				if err != nil {
					t.Errorf("%s: example %q failed: %v\n%s", path, line, err, out.String())
				}
			}
		}
	}
	if n < 5 || len(examples["mce check"]) == 0 || len(examples["mce"]) == 0 {
		t.Fatalf("found %d examples (%v): the extraction is broken", n, examples)
	}
}
