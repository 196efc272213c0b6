package gpu

import (
	"fmt"
	"strconv"
	"strings"
)

// Request is what a container asks for in GPUs. At most one of All, Count and
// DeviceIDs is set; the zero value asks for no GPU. Requests built by
// ParseRequest are always well formed.
type Request struct {
	// All asks for every GPU on the host.
	All bool
	// Count asks for that many GPUs (> 0), chosen by the runtime.
	Count int
	// DeviceIDs asks for specific GPUs: decimal indexes ("0") or full UUIDs
	// ("GPU-…", matched case-insensitively), or for MIG partitions by their
	// UUIDs ("MIG-…").
	DeviceIDs []string
}

const (
	uuidPrefix = "GPU-"
	migPrefix  = "MIG-"
)

// ParseRequest parses a GPU request:
//
//	""                      no GPU
//	"all"                   every GPU
//	"2", "count=2"          two GPUs (a lone number is always a count)
//	"0,1", "GPU-<uuid>,1"   those devices, by index or UUID
//	"MIG-<uuid>"            that MIG partition
//	"device=0"              device 0 alone
//
// Spaces around items are ignored. It rejects counts below 1, items that are
// neither an index nor a GPU UUID, empty items and duplicates, with an error
// wrapping ErrInvalidRequest.
func ParseRequest(s string) (Request, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return Request{}, nil
	case strings.EqualFold(s, "all"):
		return Request{All: true}, nil
	}
	if rest, ok := cutPrefixFold(s, "count="); ok {
		return parseCount(s, rest)
	}
	if rest, ok := cutPrefixFold(s, "device="); ok {
		return parseDevices(s, rest)
	}
	if !strings.Contains(s, ",") && !hasPrefixFold(s, uuidPrefix) && !hasPrefixFold(s, migPrefix) {
		return parseCount(s, s)
	}
	return parseDevices(s, s)
}

func parseCount(orig, s string) (Request, error) {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return Request{}, fmt.Errorf("%w %q: want \"all\", a count, or device indexes/UUIDs separated by commas", ErrInvalidRequest, orig)
	}
	if n < 1 {
		hint := ""
		if n == 0 {
			hint = ` (for device 0 alone write "device=0")`
		}
		return Request{}, fmt.Errorf("%w %q: count must be at least 1%s", ErrInvalidRequest, orig, hint)
	}
	return Request{Count: n}, nil
}

func parseDevices(orig, list string) (Request, error) {
	items := strings.Split(list, ",")
	ids := make([]string, 0, len(items))
	seen := make(map[string]bool, len(items))
	for i, item := range items {
		id, err := parseDeviceID(strings.TrimSpace(item))
		if err != nil {
			return Request{}, fmt.Errorf("%w %q: item %d: %w", ErrInvalidRequest, orig, i+1, err)
		}
		key := strings.ToLower(id)
		if seen[key] {
			return Request{}, fmt.Errorf("%w %q: device %s listed twice", ErrInvalidRequest, orig, id)
		}
		seen[key] = true
		ids = append(ids, id)
	}
	return Request{DeviceIDs: ids}, nil
}

// parseDeviceID accepts a decimal index (returned without leading zeros), a
// GPU UUID or a MIG partition's UUID (returned as given). A MIG UUID is
// "MIG-<uuid>" (drivers from R470) or, from older drivers,
// "MIG-GPU-<uuid>/<gpu instance>/<compute instance>".
func parseDeviceID(s string) (string, error) {
	switch {
	case s == "":
		return "", fmt.Errorf("empty device ID")
	case isDigits(s):
		n, err := strconv.Atoi(s)
		if err != nil {
			return "", fmt.Errorf("device index %s: %w", s, err)
		}
		return strconv.Itoa(n), nil
	case hasPrefixFold(s, uuidPrefix):
		body := s[len(uuidPrefix):]
		if body == "" || strings.Trim(body, "0123456789abcdefABCDEF-") != "" {
			return "", fmt.Errorf("malformed GPU UUID %q", s)
		}
		return s, nil
	case hasPrefixFold(s, migPrefix):
		if !isMIGUUID(s[len(migPrefix):]) {
			return "", fmt.Errorf("malformed MIG UUID %q", s)
		}
		return s, nil
	default:
		return "", fmt.Errorf("%q is neither a device index nor a GPU UUID (GPU-…) nor a MIG UUID (MIG-…)", s)
	}
}

// IsZero reports whether r asks for no GPU.
func (r Request) IsZero() bool {
	return !r.All && r.Count == 0 && len(r.DeviceIDs) == 0
}

// String returns r in the form ParseRequest reads back: "", "all",
// "count=N" or "device=ID,ID".
func (r Request) String() string {
	switch {
	case r.All:
		return "all"
	case len(r.DeviceIDs) > 0:
		return "device=" + strings.Join(r.DeviceIDs, ",")
	case r.Count != 0:
		return "count=" + strconv.Itoa(r.Count)
	default:
		return ""
	}
}

// validate reports requests not built by ParseRequest that set more than one
// form or a negative count.
func (r Request) validate() error {
	forms := 0
	if r.All {
		forms++
	}
	if r.Count != 0 {
		forms++
	}
	if len(r.DeviceIDs) > 0 {
		forms++
	}
	if forms > 1 || r.Count < 0 {
		return fmt.Errorf("%w: set only one of All, Count (> 0) and DeviceIDs (got %+v)", ErrInvalidRequest, r)
	}
	return nil
}

// isMIGUUID reports whether body, what follows "MIG-", is a MIG UUID's:
// hexadecimal digits and dashes, or an older driver's
// "GPU-<uuid>/<gpu instance>/<compute instance>".
func isMIGUUID(body string) bool {
	isHex := func(s string) bool { return s != "" && strings.Trim(s, "0123456789abcdefABCDEF-") == "" }
	if gpuID, rest, ok := strings.Cut(body, "/"); ok {
		gi, ci, ok := strings.Cut(rest, "/")
		return ok && hasPrefixFold(gpuID, uuidPrefix) && isHex(gpuID[len(uuidPrefix):]) && isDigits(gi) && isDigits(ci) && len(gi) <= 3 && len(ci) <= 3
	}
	return isHex(body)
}

// IsMIG reports whether id names a MIG partition (its UUID, "MIG-…").
func IsMIG(id string) bool { return hasPrefixFold(id, migPrefix) }

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func cutPrefixFold(s, prefix string) (string, bool) {
	if !hasPrefixFold(s, prefix) {
		return s, false
	}
	return s[len(prefix):], true
}
