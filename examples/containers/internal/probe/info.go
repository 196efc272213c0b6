package probe

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Bounds on what info reports.
const (
	maxInfoFiles = 1000
	maxTagBytes  = 4096
)

// Info is the answer to the info switch.
type Info struct {
	Hostname string `json:"hostname"`
	// Instance tells this container from others of the same hostname (a variant's instances share
	// theirs): its non-loopback IP addresses.
	Instance string `json:"instance"`
	// Env holds SAGEMAKER_*, MCE_* and PROBE_* variables (SAGEMAKER_BIND_TO_PORT, SAGEMAKER_SAFE_PORT_RANGE,
	// SAGEMAKER_MULTI_MODEL, PROBE_TAG, …) as set at start.
	Env              map[string]string `json:"env"`
	ContentType      string            `json:"content_type"`
	Accept           string            `json:"accept"`
	CustomAttributes string            `json:"custom_attributes"`
	ModelDir         string            `json:"model_dir"`
	// ModelFiles lists regular files under ModelDir (paths relative to it, at most 1000).
	ModelFiles []ModelFile `json:"model_files"`
	// ModelTag is the content of ModelDir/tag without trailing line breaks, if the file exists.
	ModelTag *string `json:"model_tag,omitempty"`
}

// ModelFile is one file in the model directory.
type ModelFile struct {
	Path string `json:"path"`
	Size int64  `json:"size"`
}

// reportedEnv picks the variables Info reports.
func reportedEnv(environ []string) map[string]string {
	env := make(map[string]string)
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && (strings.HasPrefix(k, "SAGEMAKER_") || strings.HasPrefix(k, "MCE_") || strings.HasPrefix(k, "PROBE_")) {
			env[k] = v
		}
	}
	return env
}

// listModelDir returns the regular files under dir in lexical order; a missing dir gives none.
func listModelDir(dir string) ([]ModelFile, error) {
	files := []ModelFile{}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			if path == dir && errors.Is(err, fs.ErrNotExist) {
				return fs.SkipAll
			}
			return err
		}
		if !d.Type().IsRegular() {
			return nil
		}
		if len(files) == maxInfoFiles {
			return fs.SkipAll
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		files = append(files, ModelFile{Path: filepath.ToSlash(rel), Size: fi.Size()})
		return nil
	})
	return files, err
}

// readTag returns the model's tag file, nil if it does not exist.
func readTag(dir string) (*string, error) {
	f, err := os.Open(filepath.Join(dir, "tag"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxTagBytes))
	if err != nil {
		return nil, err
	}
	s := strings.TrimRight(string(b), "\r\n")
	return &s, nil
}
