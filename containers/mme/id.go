package mme

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// MaxTargetModelLength is the longest TargetModel accepted, in bytes
// (SageMaker's limit).
const MaxTargetModelLength = 1024

// ModelID returns the model_name under which a TargetModel is loaded in the
// container and stored on disk: the hex SHA-256 of targetModel, 64
// characters of [0-9a-f]. It is stable across runs and hosts.
func ModelID(targetModel string) string {
	id := modelID(targetModel)
	return string(id[:])
}

// modelID is ModelID without an allocation.
func modelID(targetModel string) (id [2 * sha256.Size]byte) {
	sum := sha256.Sum256([]byte(targetModel))
	hex.Encode(id[:], sum[:])
	return id
}

// ValidTargetModel accepts a TargetModel that is a relative path below the
// ModelDataUrl prefix: 1 to [MaxTargetModelLength] bytes of printable UTF-8
// (the ASCII space included, but not first), no leading '/', and no empty,
// "." or ".." segment. The error matches [ErrInvalidTargetModel].
func ValidTargetModel(s string) error {
	why := checkTargetModel(s)
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w %.100q: %s", ErrInvalidTargetModel, s, why)
}

func checkTargetModel(s string) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > MaxTargetModelLength:
		return fmt.Sprintf("it is longer than %d bytes", MaxTargetModelLength)
	case !utf8.ValidString(s):
		return "it is not valid UTF-8"
	case s[0] == '/':
		return "it must be a path relative to the model data prefix, without a leading '/'"
	case s[0] == ' ':
		return "it must not start with a space"
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return "it holds a character that is not printable"
		}
	}
	for seg := range strings.SplitSeq(s, "/") {
		switch seg {
		case "":
			return "it holds an empty path segment"
		case ".", "..":
			return "it holds a '.' or '..' path segment"
		}
	}
	return ""
}
