package spec

import (
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mce-run/mce/internal/wire"
)

// Patterns from SageMaker's service model (the API Reference pages of
// CreateModel, CreateEndpointConfig and CreateEndpoint, e.g.
// https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_CreateModel.html).
// Each has the text SageMaker shows in its messages beside it.
var (
	// ModelName: messages seen from the real service show this text (e.g.
	// https://github.com/aws/amazon-sagemaker-examples/issues/2236); the
	// model's own pattern [a-zA-Z0-9]([\-a-zA-Z0-9]*[a-zA-Z0-9])? is the
	// same language.
	modelNameRe = regexp.MustCompile(wire.NamePattern + "$")
	// EndpointName, EndpointConfigName, VariantName, ContainerHostname.
	entityNameRe   = regexp.MustCompile("^" + wire.EntityNamePattern + "$")
	envKeyRe       = regexp.MustCompile("^" + wire.EnvironmentKeyPattern + "$")
	imageRe        = regexp.MustCompile(`^[\S]+$`)
	modelDataURLRe = regexp.MustCompile(modelDataURLPattern)
	roleARNRe      = regexp.MustCompile(`^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`)
	tagKeyRe       = regexp.MustCompile(`^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`)
	tagValueRe     = regexp.MustCompile(`^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`)
	instanceTypeRe = regexp.MustCompile(`^(local|local_gpu|ml\.[a-z0-9]+(-[a-z0-9]+)?\.[a-z0-9]+)$`)
)

const (
	modelNamePattern    = wire.NamePattern
	entityNamePattern   = wire.EntityNamePattern
	envKeyPattern       = wire.EnvironmentKeyPattern
	envValuePattern     = `[\S\s]*`
	imagePattern        = `[\S]+`
	modelDataURLPattern = wire.S3URIPattern + `|^file://(.+)$` // and mce's own file:// URLs
	roleARNPattern      = `^arn:aws[a-z\-]*:iam::\d{12}:role/?[a-zA-Z_0-9+=,.@\-_/]+$`
	tagPattern          = `^([\p{L}\p{Z}\p{N}_.:/=+\-@]*)$`
)

// Limits from the service model.
const (
	maxNameLen          = 63
	maxContainers       = 15
	maxVariants         = 10
	maxEnvEntries       = 100
	maxEnvKeyLen        = 1024
	maxEnvValueLen      = 1024
	maxEnvTotal         = 32 * 1024 // bytes of keys and values across a model's containers
	maxImageLen         = 255
	maxModelDataURLLen  = 1024
	maxTags             = 50
	maxTagKeyLen        = 128
	maxTagValueLen      = 256
	maxKMSKeyIDLen      = 2048
	minRoleARNLen       = 20
	maxRoleARNLen       = 2048
	minHealthTimeoutSec = 60
	maxHealthTimeoutSec = 3600
)

// checker collects constraint failures in SageMaker's wording:
// "Value 'x' at 'path' failed to satisfy constraint: Member must …".
// Paths are SageMaker's: lower-camel member names, 1-based list positions
// followed by ".member".
type checker struct{ msgs []string }

// fail records one failure; value is "'x'", "null", or "" (no value shown,
// as SageMaker does for lists and maps).
func (c *checker) fail(value, path, constraint string) {
	v := "Value"
	if value != "" {
		v += " " + value
	}
	c.msgs = append(c.msgs, v+" at '"+path+"' failed to satisfy constraint: "+constraint)
}

func quote(s string) string { return "'" + s + "'" }

// required reports a missing value; empty strings count as missing.
func (c *checker) required(path, s string) bool {
	if s == "" {
		c.fail("null", path, "Member must not be null")
		return false
	}
	return true
}

// str checks an optional string's length and pattern, in SageMaker's order.
func (c *checker) str(path, s string, maxLen int, re *regexp.Regexp, pattern string) {
	if s == "" {
		return
	}
	if utf8.RuneCountInString(s) > maxLen {
		c.fail(quote(s), path, "Member must have length less than or equal to "+strconv.Itoa(maxLen))
	}
	if re != nil && !re.MatchString(s) {
		c.fail(quote(s), path, "Member must satisfy regular expression pattern: "+pattern)
	}
}

// requiredStr is str for a required member.
func (c *checker) requiredStr(path, s string, maxLen int, re *regexp.Regexp, pattern string) {
	if c.required(path, s) {
		c.str(path, s, maxLen, re, pattern)
	}
}

func (c *checker) minLen(path, s string, minLen int) {
	if s != "" && utf8.RuneCountInString(s) < minLen {
		c.fail(quote(s), path, "Member must have length greater than or equal to "+strconv.Itoa(minLen))
	}
}

// enum checks an optional enumerated string.
func (c *checker) enum(path, s string, values ...string) {
	if s != "" && !slices.Contains(values, s) {
		c.fail(quote(s), path, "Member must satisfy enum value set: ["+strings.Join(values, ", ")+"]")
	}
}

// intRange checks an optional integer against inclusive bounds; max < 0
// means no upper bound.
func (c *checker) intRange(path string, v *int32, minV, maxV int) {
	if v == nil {
		return
	}
	n := int(*v)
	if n < minV {
		c.fail(quote(strconv.Itoa(n)), path, "Member must have value greater than or equal to "+strconv.Itoa(minV))
	}
	if maxV >= 0 && n > maxV {
		c.fail(quote(strconv.Itoa(n)), path, "Member must have value less than or equal to "+strconv.Itoa(maxV))
	}
}

// listLen checks a list's length; min 0 means "may be empty".
func (c *checker) listLen(path string, n, minN, maxN int) {
	if n < minN {
		c.fail("", path, "Member must have length greater than or equal to "+strconv.Itoa(minN))
	}
	if n > maxN {
		c.fail("", path, "Member must have length less than or equal to "+strconv.Itoa(maxN))
	}
}

func (c *checker) tags(path string, tags []Tag) {
	c.listLen(path, len(tags), 0, maxTags)
	for i, t := range tags {
		p := member1(path, i)
		c.requiredStr(p+".key", t.Key, maxTagKeyLen, tagKeyRe, tagPattern)
		c.str(p+".value", t.Value, maxTagValueLen, tagValueRe, tagPattern)
	}
}

func (c *checker) roleARN(path, s string) {
	c.minLen(path, s, minRoleARNLen)
	c.str(path, s, maxRoleARNLen, roleARNRe, roleARNPattern)
}

// err returns the collected failures as a *ValidationError, or nil.
func (c *checker) err() error {
	if len(c.msgs) == 0 {
		return nil
	}
	return &ValidationError{Messages: c.msgs, Constraints: true}
}

// member1 is SageMaker's path to element i (0-based) of a list.
func member1(path string, i int) string {
	return path + "." + strconv.Itoa(i+1) + ".member"
}

// semantic collects whole-sentence failures.
type semantic struct{ msgs []string }

func (s *semantic) add(msg string) { s.msgs = append(s.msgs, msg) }

func (s *semantic) err() error {
	if len(s.msgs) == 0 {
		return nil
	}
	return &ValidationError{Messages: s.msgs}
}

// present reports whether a kept-raw member was given (and is not null).
func present(raw []byte) bool {
	return len(raw) > 0 && string(raw) != "null"
}

// formatFloat renders a float as SageMaker's Java service does (1.0, 0.5).
func formatFloat(f float64) string {
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".eEnN") {
		s += ".0"
	}
	return s
}

// CheckTags validates the Tags of AddTags as SageMaker does (at most 50,
// keys 1–128 and values 0–256 characters of the tag pattern); keys starting
// with "aws:" are reserved.
func CheckTags(path string, tags []Tag) error {
	var c checker
	c.tags(path, tags)
	if err := c.err(); err != nil {
		return err
	}
	keys := make([]string, len(tags))
	for i, t := range tags {
		keys[i] = t.Key
	}
	return reservedTagKeys(keys)
}

// CheckTagKeys validates the TagKeys of DeleteTags: 1–50 keys of 1–128
// characters of the tag pattern.
func CheckTagKeys(path string, keys []string) error {
	var c checker
	c.listLen(path, len(keys), 1, maxTags)
	for i, k := range keys {
		c.requiredStr(member1(path, i), k, maxTagKeyLen, tagKeyRe, tagPattern)
	}
	if err := c.err(); err != nil {
		return err
	}
	return reservedTagKeys(keys)
}

// MaxTags is how many tags one resource may carry.
const MaxTags = maxTags

func reservedTagKeys(keys []string) error {
	var s semantic
	for _, k := range keys {
		if strings.HasPrefix(strings.ToLower(k), "aws:") {
			s.add("Tag keys starting with 'aws:' are reserved for system use: " + quote(k) + ".")
		}
	}
	return s.err()
}
