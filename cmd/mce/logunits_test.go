package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
)

// TestLogDurationsCarryUnits: a duration in a log line is a number of
// milliseconds (zerolog's Dur in its default DurationFieldUnit, which nothing
// may change), so every such field's name ends in _ms; a bare
// "took":1284.38 says nothing. It reads the repository's Go sources, as the
// next person adding a log line would write them.
func TestLogDurationsCarryUnits(t *testing.T) {
	if zerolog.DurationFieldUnit != time.Millisecond || zerolog.DurationFieldInteger {
		t.Fatalf("zerolog writes durations in %v (integer %v), want its default, float milliseconds", zerolog.DurationFieldUnit, zerolog.DurationFieldInteger)
	}
	global := regexp.MustCompile(`zerolog\.DurationField(?:Unit|Integer)\s*=`)
	dur := regexp.MustCompile(`\.Dur\("([^"]*)"`)
	num := regexp.MustCompile(`\.(?:Float64|Float32|Int64|Int|Uint64|Str|Stringer)\("([a-z_]*(?:took|elapsed|latency|duration|wait|delay|backoff|timeout)[a-z_]*)"`)
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	err = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == "build" || d.Name() == "bin" || strings.HasPrefix(d.Name(), ".")) && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "logunits_test.go") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		for i, line := range strings.Split(string(b), "\n") {
			if global.MatchString(line) {
				t.Errorf("%s:%d: changes zerolog's duration unit, which the *_ms field names rely on", rel, i+1)
			}
			for _, re := range []*regexp.Regexp{dur, num} {
				for _, m := range re.FindAllStringSubmatch(line, -1) {
					checked++
					if !strings.HasSuffix(m[1], "_ms") {
						t.Errorf("%s:%d: log field %q holds a duration: name it %s_ms (milliseconds)", rel, i+1, m[1], strings.TrimSuffix(m[1], "_ms"))
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked == 0 {
		t.Fatal("found no duration fields at all: the scan is broken")
	}
}
