package modelserver

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
)

// Environment variables.
const (
	EnvMultiModel     = "SAGEMAKER_MULTI_MODEL"
	EnvDefaultModel   = "SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"
	EnvMemoryBytes    = "MODELSERVER_MEMORY_BYTES"
	EnvWorkspaceBytes = "MODELSERVER_WORKSPACE_BYTES"
	EnvLoadDelay      = "MODELSERVER_LOAD_DELAY"
	// EnvAdapterRoot is the folder adapters' src must lie under (single-model mode); default /opt/ml.
	EnvAdapterRoot = "MODELSERVER_ADAPTER_ROOT"
)

// Defaults.
const (
	DefaultMemoryBytes    = 256 << 20
	DefaultWorkspaceBytes = 1 << 20
	MaxLoadDelay          = 10 * time.Minute
)

// Settings are modelserver's own knobs, read from the environment.
type Settings struct {
	// MultiModel is SAGEMAKER_MULTI_MODEL=true.
	MultiModel bool
	// MemoryBytes is the memory budget shared by loaded models and request scratch space.
	MemoryBytes int64
	// WorkspaceBytes is the scratch space every request may use without touching the budget.
	WorkspaceBytes int64
	// LoadDelay is added to every load, to simulate slow loads.
	LoadDelay time.Duration
	// DefaultModel is SAGEMAKER_TRITON_DEFAULT_MODEL_NAME: in single-model mode, the directory under the
	// model dir that holds the model.
	DefaultModel string
}

// SettingsFromConfig reads the settings; bad values are errors wrapping smserve.ErrConfig.
func SettingsFromConfig(cfg smserve.Config) (Settings, error) {
	s := Settings{
		MultiModel:     strings.EqualFold(cfg.Getenv(EnvMultiModel), "true"),
		MemoryBytes:    DefaultMemoryBytes,
		WorkspaceBytes: DefaultWorkspaceBytes,
		DefaultModel:   cfg.Getenv(EnvDefaultModel),
	}
	var err error
	if v := cfg.Getenv(EnvMemoryBytes); v != "" {
		if s.MemoryBytes, err = ParseBytes(v); err != nil || s.MemoryBytes == 0 {
			return s, fmt.Errorf("%w: %s=%q is not a positive byte count (e.g. 268435456 or 256Mi)", smserve.ErrConfig, EnvMemoryBytes, v)
		}
	}
	if v := cfg.Getenv(EnvWorkspaceBytes); v != "" {
		if s.WorkspaceBytes, err = ParseBytes(v); err != nil {
			return s, fmt.Errorf("%w: %s=%q is not a byte count (e.g. 1048576 or 1Mi)", smserve.ErrConfig, EnvWorkspaceBytes, v)
		}
	}
	if v := cfg.Getenv(EnvLoadDelay); v != "" {
		if s.LoadDelay, err = time.ParseDuration(v); err != nil || s.LoadDelay < 0 || s.LoadDelay > MaxLoadDelay {
			return s, fmt.Errorf("%w: %s=%q is not a duration between 0 and %s (e.g. 500ms)", smserve.ErrConfig, EnvLoadDelay, v, MaxLoadDelay)
		}
	}
	if strings.ContainsAny(s.DefaultModel, "/\\") || s.DefaultModel == "." || s.DefaultModel == ".." {
		return s, fmt.Errorf("%w: %s=%q is not a directory name", smserve.ErrConfig, EnvDefaultModel, s.DefaultModel)
	}
	return s, nil
}

// ParseBytes parses a non-negative byte count: digits, optionally followed by Ki, Mi, Gi or Ti.
func ParseBytes(v string) (int64, error) {
	mult := int64(1)
	for i, suf := range []string{"Ki", "Mi", "Gi", "Ti"} {
		if n, ok := strings.CutSuffix(v, suf); ok {
			v, mult = n, int64(1)<<(10*(i+1))
			break
		}
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || n > MaxMemoryBytes/mult {
		return 0, fmt.Errorf("bad byte count %q", v)
	}
	return n * mult, nil
}

// budget is a memory budget shared by loaded models and scratch space. It is safe for concurrent use.
type budget struct {
	mu        sync.Mutex
	limit     int64
	used      int64
	workspace int64
}

// take reserves n bytes, or reports how much is free.
func (b *budget) take(n int64) (ok bool, free int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	free = b.limit - b.used
	if n > free {
		return false, free
	}
	b.used += n
	return true, free - n
}

func (b *budget) give(n int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
}

func (b *budget) usage() (used, limit int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used, b.limit
}

// scratch reserves the part of a request's scratch need beyond the workspace. It returns the bytes to give
// back, or a 507 error whose message carries Triton's OOM marker "out of memory".
func (b *budget) scratch(need int64) (int64, error) {
	extra := need - b.workspace
	if extra <= 0 {
		return 0, nil
	}
	if ok, free := b.take(extra); !ok {
		return 0, &smserve.Error{Status: http.StatusInsufficientStorage, Message: fmt.Sprintf(
			"failed to allocate memory for inference: out of memory: the request needs %d bytes of scratch space, "+
				"%d beyond the %d-byte workspace, and %d of %d bytes are free", need, extra, b.workspace, free, b.limit)}
	}
	return extra, nil
}
