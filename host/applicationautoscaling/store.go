package applicationautoscaling

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mce-run/mce/internal/atomicfile"
)

// The state folder: one JSON file a scalable target, named by a hash of
// its dimension and resource ID, holding the target, its policies, its
// scheduled actions with their last runs, its recent activities and its
// cooldowns. A change writes a temporary file, fsyncs it and renames it
// over the old one. A file that does not parse is moved aside
// (.corrupt-<time>) and logged; mce starts without that target. The
// alarms of target tracking policies are CloudWatch's to keep.

const (
	fileExt  = ".target.json"
	fileVers = 1
)

// cooldowns is what the decisions remember of the last scalings.
type cooldowns struct {
	LastOut time.Time `json:"lastOut,omitzero"`
	OutFrom int       `json:"outFrom,omitempty"` // the capacity before the last scale-out
	OutTo   int       `json:"outTo,omitempty"`   // and after it
	LastIn  time.Time `json:"lastIn,omitzero"`
}

type scheduled struct {
	A       ScheduledAction `json:"action"`
	LastRun time.Time       `json:"lastRun,omitzero"`
}

// target is a registered scalable target and all that hangs on it.
type target struct {
	T          ScalableTarget   `json:"target"`
	Policies   []*ScalingPolicy `json:"policies,omitempty"`
	Scheduled  []*scheduled     `json:"scheduled,omitempty"`
	Activities []Activity       `json:"activities,omitempty"` // newest first
	Cool       cooldowns        `json:"cooldowns"`
}

type targetFile struct {
	Version int     `json:"version"`
	Target  *target `json:"target"`
}

func key(dimension, resourceID string) string { return dimension + "|" + resourceID }

func fileName(k string) string {
	h := sha256.Sum256([]byte(k))
	return hex.EncodeToString(h[:16]) + fileExt
}

// persist writes the target k as it is now, or removes its file when it is
// gone. Writes are ordered by fileMu and each writes what it read under
// it, so the last write is the newest state.
func (s *Service) persist(k string) error {
	s.fileMu.Lock()
	defer s.fileMu.Unlock()
	path := filepath.Join(s.dir, fileName(k))
	s.mu.Lock()
	t := s.targets[k]
	var b []byte
	var err error
	if t != nil {
		b, err = json.Marshal(targetFile{Version: fileVers, Target: t})
	}
	s.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(path, b, t == nil); err != nil {
		s.log.Error().Err(err).Str("scalable_target", k).Msg("applicationautoscaling: writing or removing a target's file; its last change is not kept over a restart")
		return err
	}
	return nil
}

// load reads every target file of the folder.
func (s *Service) load() error {
	ents, err := os.ReadDir(s.dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := e.Name()
		if atomicfile.IsTemp(name) {
			os.Remove(filepath.Join(s.dir, name))
			continue
		}
		if !strings.HasSuffix(name, fileExt) {
			continue
		}
		path := filepath.Join(s.dir, name)
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var f targetFile
		if err := json.Unmarshal(b, &f); err != nil || f.Version != fileVers || f.Target == nil ||
			checkTargetKey(f.Target.T.ServiceNamespace, f.Target.T.ResourceID, f.Target.T.ScalableDimension) != nil {
			aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405")
			os.Rename(path, aside)
			s.log.Error().Str("file", name).Msg("applicationautoscaling: a scalable target's file does not parse; moved aside, the target is not registered")
			continue
		}
		t := f.Target
		s.targets[key(t.T.ScalableDimension, t.T.ResourceID)] = t
		for _, a := range t.Activities {
			if n := activitySeq(a.ActivityID); n > s.seq.Load() {
				s.seq.Store(n)
			}
		}
	}
	return nil
}
