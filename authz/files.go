package authz

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"

	"go.yaml.in/yaml/v3"
)

const (
	maxConfigFileBytes = 4 << 20
	maxCredentials     = 10_000
	maxPolicyRefs      = 100
)

// credential is one access key.
type credential struct {
	principal Principal
	secret    []byte
	token     string
}

// loaded is everything read from the credentials and policies files.
type loaded struct {
	keys map[string]*credential
	// policies attached to each principal ARN, to anonymous callers, and to
	// every authenticated principal ("*").
	byARN     map[string][]*policyDoc
	anonymous []*policyDoc
	everyone  []*policyDoc
	files     []string // every file read, for Watch
	// empty are the configured files that held no YAML document (nothing,
	// or only comments): Reload refuses a file that becomes empty.
	empty []string
	// roles the files name, by roleKey; roleOf is the role ARN of each
	// role ARN and assumed-role session ARN of byARN (roles.go).
	roles  map[string]Role
	roleOf map[string]string
}

// credentialsFile is the credentials file's shape (documented in doc.go).
type credentialsFile struct {
	Credentials []struct {
		AccessKeyId     string      `yaml:"AccessKeyId"`
		SecretAccessKey string      `yaml:"SecretAccessKey"`
		SessionToken    string      `yaml:"SessionToken"`
		Arn             string      `yaml:"Arn"`
		UserName        string      `yaml:"UserName"`
		Policies        []yaml.Node `yaml:"Policies"`
	} `yaml:"Credentials"`
	Anonymous struct {
		Policies []yaml.Node `yaml:"Policies"`
	} `yaml:"Anonymous"`
}

// policiesFile is the policies file's shape (documented in doc.go).
type policiesFile struct {
	Policies map[string]yaml.Node `yaml:"Policies"`
	Attach   map[string][]string  `yaml:"Attach"`
}

// readCapped reads a whole regular file of at most limit bytes. Anything
// else (a FIFO, a device, a directory) is refused without waiting: the file
// is opened non-blocking (opening a FIFO that has no writer would block the
// reloader for good) and checked again once open, in case it was swapped
// in between.
func readCapped(path string, limit int64) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err = f.Stat(); err != nil {
		return nil, err
	} else if !fi.Mode().IsRegular() {
		return nil, notRegular(path, fi.Mode())
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", path, limit)
	}
	return b, nil
}

func notRegular(path string, m os.FileMode) error {
	return fmt.Errorf("%s: not a regular file (%v): mce reads policies and credentials from regular files only", path, m.Type())
}

// readLog reads files and remembers what it read, so that a reload can
// check, after a short wait, that every file still holds what was parsed
// (a file being written when it was read is not applied). A nil *readLog
// only reads.
type readLog struct {
	sums []fileSum
}

type fileSum struct {
	path  string
	limit int64
	sum   [sha256.Size]byte
}

func (r *readLog) read(path string, limit int64) ([]byte, error) {
	b, err := readCapped(path, limit)
	if err == nil && r != nil {
		r.sums = append(r.sums, fileSum{path, limit, sha256.Sum256(b)})
	}
	return b, err
}

// changed names a file read that no longer holds what was read, or "".
func (r *readLog) changed() string {
	for _, f := range r.sums {
		b, err := readCapped(f.path, f.limit)
		if err != nil || sha256.Sum256(b) != f.sum {
			return f.path
		}
	}
	return ""
}

// decodeYAMLStrict decodes YAML or JSON into v, refusing unknown fields.
// empty reports a file with no document at all (v is left zero).
func decodeYAMLStrict(path string, data []byte, v any) (empty bool, err error) {
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(v); err != nil {
		if err == io.EOF {
			return true, nil
		}
		return false, fmt.Errorf("%s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return false, fmt.Errorf("%s: more than one YAML document", path)
	}
	return false, nil
}

// loadFiles reads the credentials file and the policies file (either may be
// ""), and every policy document they reference.
func loadFiles(rd *readLog, credPath, polPath string) (*loaded, error) {
	l := &loaded{keys: map[string]*credential{}, byARN: map[string][]*policyDoc{}}
	docs := map[string]*policyDoc{} // by file path, so one file is parsed once
	readDoc := func(path, name string) (*policyDoc, error) {
		if d, ok := docs[path]; ok {
			return d, nil
		}
		data, err := rd.read(path, maxPolicyBytes)
		if err != nil {
			return nil, fmt.Errorf("policy %q: %w", name, err)
		}
		d, err := parsePolicyJSON(name, path, data)
		if err != nil {
			return nil, err
		}
		docs[path] = d
		l.files = append(l.files, path)
		return d, nil
	}

	// Named policies and attachments.
	named := map[string]*policyDoc{}
	var attach map[string][]string
	if polPath != "" {
		data, err := rd.read(polPath, maxConfigFileBytes)
		if err != nil {
			return nil, fmt.Errorf("policies file: %w", err)
		}
		l.files = append(l.files, polPath)
		var pf policiesFile
		empty, err := decodeYAMLStrict(polPath, data, &pf)
		if err != nil {
			return nil, err
		}
		if empty {
			l.empty = append(l.empty, polPath)
		}
		names := make([]string, 0, len(pf.Policies))
		for n := range pf.Policies {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			if name == "" || len(name) > 128 {
				return nil, &lineError{polPath, 0, fmt.Sprintf("policy name %q: want 1 to 128 characters", name)}
			}
			y := pf.Policies[name]
			d, err := policyFromYAML(polPath, name, &y, readDoc)
			if err != nil {
				return nil, err
			}
			named[name] = d
		}
		attach = pf.Attach
	}

	resolveList := func(file string, ys []yaml.Node, who string) ([]*policyDoc, error) {
		if len(ys) > maxPolicyRefs {
			return nil, &lineError{file, ys[0].Line, fmt.Sprintf("%s: more than %d policies", who, maxPolicyRefs)}
		}
		var out []*policyDoc
		for i := range ys {
			y := &ys[i]
			if y.Kind == yaml.ScalarNode {
				if d, ok := named[y.Value]; ok {
					out = append(out, d)
					continue
				}
			}
			d, err := policyFromYAML(file, "", y, readDoc)
			if err != nil {
				return nil, err
			}
			out = append(out, d)
		}
		return out, nil
	}

	if credPath != "" {
		data, err := rd.read(credPath, maxConfigFileBytes)
		if err != nil {
			return nil, fmt.Errorf("credentials file: %w", err)
		}
		l.files = append(l.files, credPath)
		var cf credentialsFile
		var root yaml.Node
		if err := yaml.Unmarshal(data, &root); err != nil {
			return nil, fmt.Errorf("%s: %w", credPath, err)
		}
		empty, err := decodeYAMLStrict(credPath, data, &cf)
		if err != nil {
			return nil, err
		}
		if empty {
			l.empty = append(l.empty, credPath)
		}
		if len(cf.Credentials) > maxCredentials {
			return nil, &lineError{credPath, 0, fmt.Sprintf("more than %d credentials", maxCredentials)}
		}
		lines := credentialLines(&root)
		for i, c := range cf.Credentials {
			line := 0
			if i < len(lines) {
				line = lines[i]
			}
			bad := func(msg string) error {
				return &lineError{credPath, line, fmt.Sprintf("credential %d: %s", i+1, msg)}
			}
			switch {
			case c.AccessKeyId == "" || len(c.AccessKeyId) > 128 || strings.ContainsAny(c.AccessKeyId, "/ \t,="):
				return nil, bad("AccessKeyId is required (1 to 128 characters, no '/', ',', '=' or spaces)")
			case c.SecretAccessKey == "" || len(c.SecretAccessKey) > 256:
				return nil, bad("SecretAccessKey is required (at most 256 characters)")
			case !strings.HasPrefix(c.Arn, "arn:") || len(c.Arn) > 2048:
				return nil, bad("Arn is required (arn:aws:iam::ACCOUNT:user/NAME)")
			}
			if _, dup := l.keys[c.AccessKeyId]; dup {
				return nil, bad(fmt.Sprintf("AccessKeyId %q appears twice", c.AccessKeyId))
			}
			p := PrincipalFromARN(c.Arn)
			p.AccessKeyID = c.AccessKeyId
			if c.UserName != "" {
				p.Username = c.UserName
			}
			l.keys[c.AccessKeyId] = &credential{principal: p, secret: []byte(c.SecretAccessKey), token: c.SessionToken}
			docs, err := resolveList(credPath, c.Policies, "credential "+c.AccessKeyId)
			if err != nil {
				return nil, err
			}
			l.byARN[c.Arn] = appendUnique(l.byARN[c.Arn], docs...)
		}
		anon, err := resolveList(credPath, cf.Anonymous.Policies, "Anonymous")
		if err != nil {
			return nil, err
		}
		l.anonymous = appendUnique(l.anonymous, anon...)
	}

	// Attachments from the policies file.
	targets := make([]string, 0, len(attach))
	for t := range attach {
		targets = append(targets, t)
	}
	sort.Strings(targets)
	for _, t := range targets {
		var docs []*policyDoc
		for _, name := range attach[t] {
			d, ok := named[name]
			if !ok {
				return nil, &lineError{polPath, 0, fmt.Sprintf("Attach %q: no policy named %q under Policies", t, name)}
			}
			docs = append(docs, d)
		}
		switch {
		case t == "*":
			l.everyone = appendUnique(l.everyone, docs...)
		case t == "anonymous":
			l.anonymous = appendUnique(l.anonymous, docs...)
		case strings.HasPrefix(t, "arn:"):
			l.byARN[t] = appendUnique(l.byARN[t], docs...)
		default:
			return nil, &lineError{polPath, 0, fmt.Sprintf(`Attach %q: want a principal ARN, "*" or "anonymous"`, t)}
		}
	}
	if err := l.resolveRoles(); err != nil {
		return nil, err
	}
	return l, nil
}

// policyFromYAML resolves one policy reference: a scalar is a path relative
// to file (JSON); a mapping is either {Name, Document} or an IAM document
// itself; Document may also be a JSON string.
func policyFromYAML(file, name string, y *yaml.Node, readDoc func(path, name string) (*policyDoc, error)) (*policyDoc, error) {
	switch y.Kind {
	case yaml.ScalarNode:
		if y.Value == "" {
			return nil, &lineError{file, y.Line, "empty policy reference"}
		}
		p := y.Value
		if !filepath.IsAbs(p) {
			p = filepath.Join(filepath.Dir(file), p)
		}
		if name == "" {
			name = y.Value
		}
		return readDoc(p, name)
	case yaml.MappingNode:
		t, err := yamlTree(file, y)
		if err != nil {
			return nil, err
		}
		if t.get("Statement") != nil { // an IAM document inline
			if name == "" {
				name = fmt.Sprintf("%s:%d", filepath.Base(file), y.Line)
			}
			return parsePolicyTree(name, file, t)
		}
		for _, k := range t.keys {
			if k != "Name" && k != "Document" {
				return nil, &lineError{file, y.Line, fmt.Sprintf("policy entry: unknown key %q (want Name and Document, or an IAM document)", k)}
			}
		}
		n, doc := t.get("Name"), t.get("Document")
		if doc == nil {
			return nil, &lineError{file, y.Line, "policy entry: Document is required"}
		}
		if n != nil {
			if n.kind != kString || n.str == "" || len(n.str) > 128 {
				return nil, &lineError{file, n.line, "policy entry: Name must be a string of 1 to 128 characters"}
			}
			name = n.str
		}
		if name == "" {
			name = fmt.Sprintf("%s:%d", filepath.Base(file), y.Line)
		}
		if doc.kind == kString { // an IAM document as JSON text
			return parsePolicyJSON(name, fmt.Sprintf("%s (Document at line %d)", file, doc.line), []byte(doc.str))
		}
		return parsePolicyTree(name, file, doc)
	}
	return nil, &lineError{file, y.Line, "a policy is a file path, an IAM document, or {Name, Document}"}
}

// credentialLines returns the line of each entry of Credentials.
func credentialLines(root *yaml.Node) []int {
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil
	}
	m := root.Content[0]
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == "Credentials" && m.Content[i+1].Kind == yaml.SequenceNode {
			var out []int
			for _, c := range m.Content[i+1].Content {
				out = append(out, c.Line)
			}
			return out
		}
	}
	return nil
}

func appendUnique(list []*policyDoc, docs ...*policyDoc) []*policyDoc {
next:
	for _, d := range docs {
		for _, have := range list {
			if have == d {
				continue next
			}
		}
		list = append(list, d)
	}
	return list
}
