package mme

import (
	"errors"
	"regexp"
	"strings"
	"testing"
)

func TestModelID(t *testing.T) {
	id := ModelID("models/resnet/v1.tar.gz")
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(id) {
		t.Fatalf("ModelID = %q, want 64 hex characters", id)
	}
	if id != ModelID("models/resnet/v1.tar.gz") {
		t.Error("ModelID is not stable")
	}
	if id == ModelID("models/resnet/v2.tar.gz") {
		t.Error("different TargetModels share an id")
	}
}

func TestValidTargetModel(t *testing.T) {
	tests := []struct {
		in string
		ok bool
	}{
		{"model.tar.gz", true},
		{"a/b/c-1_2 x.tar.gz", true},
		{"ünïcode/模型.tar.gz", true},
		{strings.Repeat("a", MaxTargetModelLength), true},
		{"", false},
		{strings.Repeat("a", MaxTargetModelLength+1), false},
		{"/abs/model.tar.gz", false},
		{"../model.tar.gz", false},
		{"a/../../etc/passwd", false},
		{"a/./b", false},
		{".", false},
		{"a//b", false},
		{"a/", false},
		{" leading-space", false},
		{"tab\there", false},
		{"new\nline", false},
		{"nul\x00", false},
		{"bad\xffutf8", false},
	}
	for _, tt := range tests {
		err := ValidTargetModel(tt.in)
		if got := err == nil; got != tt.ok {
			t.Errorf("ValidTargetModel(%.40q) = %v, want ok=%v", tt.in, err, tt.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalidTargetModel) {
			t.Errorf("ValidTargetModel(%.40q) = %v, want ErrInvalidTargetModel", tt.in, err)
		}
	}
}

func TestLRU(t *testing.T) {
	c := newLRU[string, int]()
	c.touch("a", 1)
	c.touch("b", 2)
	c.touch("c", 3)
	c.touch("a", 10) // a becomes the most recent
	if k, v, _ := c.oldest(); k != "b" || v != 2 {
		t.Fatalf("oldest = %s %d, want b 2", k, v)
	}
	if !c.remove("b") || c.remove("b") {
		t.Fatal("remove reports wrongly")
	}
	if k, _, _ := c.oldest(); k != "c" {
		t.Fatalf("oldest = %s, want c", k)
	}
	c.remove("c")
	if k, v, _ := c.oldest(); k != "a" || v != 10 || c.len() != 1 {
		t.Fatalf("oldest = %s %d len %d, want a 10 len 1", k, v, c.len())
	}
	c.remove("a")
	if _, _, ok := c.oldest(); ok {
		t.Fatal("empty lru has an oldest")
	}
}
