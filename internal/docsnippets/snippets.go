package docsnippets

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Block is one fenced code block of a README.
type Block struct {
	Line      int    // line of the opening fence, from 1
	Lang      string // sh, bash or python
	Text      string // the block's text, as the reader sees it
	Directive string // "", "serve" or "skip"
	Reason    string // why a skip block is skipped
}

var directiveRE = regexp.MustCompile(`^<!--\s*snippet:\s*(\S+)\s*(.*?)\s*-->$`)

// Parse returns the sh, bash and python blocks of a Markdown document with
// their directives. A skip without a reason, or an unknown directive, is an
// error.
func Parse(r io.Reader) ([]Block, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	var (
		out       []Block
		cur       *Block
		fence     string
		directive string
		reason    string
		dirLine   int
		lines     []string
		n         int
	)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil && fence != "" { // inside a block of another language
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				fence = ""
			}
			continue
		}
		if cur != nil {
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, "`~") == "" {
				cur.Text = strings.Join(lines, "\n") + "\n"
				out = append(out, *cur)
				cur, fence, lines = nil, "", nil
				continue
			}
			lines = append(lines, line)
			continue
		}
		if m := directiveRE.FindStringSubmatch(trimmed); m != nil {
			directive, reason, dirLine = m[1], m[2], n
			switch {
			case directive == "skip" && reason == "":
				return nil, fmt.Errorf("line %d: snippet: skip needs a reason", n)
			case directive != "skip" && directive != "serve":
				return nil, fmt.Errorf("line %d: unknown snippet directive %q (want skip REASON or serve)", n, directive)
			}
			continue
		}
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			f := trimmed[:3]
			for len(f) < len(trimmed) && trimmed[len(f)] == f[0] {
				f += f[:1]
			}
			lang := strings.ToLower(strings.TrimSpace(strings.Fields(trimmed[len(f):] + " x")[0]))
			fence = f
			switch lang {
			case "sh", "bash", "python":
				cur = &Block{Line: n, Lang: lang, Directive: directive, Reason: reason}
			}
			directive, reason = "", ""
			continue
		}
		if trimmed != "" && directive != "" {
			return nil, fmt.Errorf("line %d: snippet directive not followed by a code block", dirLine)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil || fence != "" {
		return nil, fmt.Errorf("code block not closed")
	}
	return out, nil
}
