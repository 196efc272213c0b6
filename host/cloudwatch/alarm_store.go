package cloudwatch

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/mce-run/mce/internal/atomicfile"
)

// The alarms' files: one JSON file an alarm in <Options.Dir>/alarms, named
// by a hash of the alarm's name, holding its configuration, state, tags and
// history. A change writes a temporary file, fsyncs it and renames it over
// the old one, so a crash leaves the old file or the new, never half of
// one. At Open every file is read; one that does not parse, or whose alarm
// does not pass PutMetricAlarm's checks, is moved aside
// (.corrupt-<time>), logged and counted (Stats.AlarmFilesQuarantined), and
// mce starts without that alarm.

const (
	alarmDirName  = "alarms"
	alarmFileExt  = ".alarm.json"
	alarmFileVers = 1
)

// alarmFile is what a file holds.
type alarmFile struct {
	Version int           `json:"version"`
	Alarm   Alarm         `json:"alarm"`
	Tags    []Tag         `json:"tags,omitempty"`
	History []HistoryItem `json:"history,omitempty"`
}

func alarmFileName(name string) string {
	h := sha256.Sum256([]byte(name))
	return hex.EncodeToString(h[:16]) + alarmFileExt
}

// persist writes the alarm name as it is now, or removes its file when it
// is gone. Writes are ordered by fileMu and each writes the state read
// under it, so the last write is the newest state.
func (s *Service) persist(name string) error {
	al := s.al
	al.fileMu.Lock()
	defer al.fileMu.Unlock()
	path := filepath.Join(al.dir, alarmFileName(name))
	al.mu.Lock()
	e := al.byName[name]
	var rec alarmFile
	if e != nil {
		rec = alarmFile{Version: alarmFileVers, Alarm: e.a, Tags: e.tags, History: e.history}
	}
	b, err := json.Marshal(&rec)
	al.mu.Unlock()
	if err != nil {
		return err
	}
	if err := atomicfile.Replace(path, b, e == nil); err != nil {
		al.log.Error().Err(err).Str("alarm", name).Msg("cloudwatch: writing or removing an alarm's file; its last change is not kept over a restart")
		return err
	}
	return nil
}

// loadAlarms reads the alarms' files (see above). It fails only when the
// folder cannot be made or listed.
func (s *Service) loadAlarms() error {
	al := s.al
	if err := os.MkdirAll(al.dir, 0o700); err != nil {
		return err
	}
	entries, err := os.ReadDir(al.dir)
	if err != nil {
		return err
	}
	for _, de := range entries {
		name := de.Name()
		path := filepath.Join(al.dir, name)
		if atomicfile.IsTemp(name) {
			os.Remove(path) // a write that did not finish
			continue
		}
		if !strings.HasSuffix(name, alarmFileExt) || !de.Type().IsRegular() {
			continue
		}
		e, why := readAlarmFile(path)
		if why == "" && alarmFileName(e.a.AlarmName) != name {
			why = "the file's name is not its alarm's"
		}
		if why == "" && al.byName[e.a.AlarmName] != nil {
			why = "a second file for the alarm"
		}
		if why != "" {
			aside := path + ".corrupt-" + time.Now().UTC().Format("20060102T150405")
			err := os.Rename(path, aside)
			s.st.c.alarmFilesQuarantined.Add(1)
			al.log.Error().Err(err).Str("file", path).Str("moved_to", aside).Str("why", why).
				Msg("cloudwatch: an alarm's file is corrupt; it is moved aside and its alarm is not loaded")
			continue
		}
		al.gen++
		e.cfg.gen = al.gen
		al.byName[e.a.AlarmName] = e
	}
	return nil
}

// readAlarmFile reads and checks one file; why says what is wrong with it.
func readAlarmFile(path string) (*alarmEntry, string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err.Error()
	}
	var rec alarmFile
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, "not JSON: " + err.Error()
	}
	if rec.Version != alarmFileVers {
		return nil, fmt.Sprintf("version %d, not %d", rec.Version, alarmFileVers)
	}
	a := rec.Alarm
	in := &putMetricAlarmInput{AlarmName: &a.AlarmName, AlarmDescription: a.AlarmDescription, OKActions: a.OKActions,
		AlarmActions: a.AlarmActions, InsufficientDataActions: a.InsufficientDataActions, MetricName: &a.MetricName,
		Namespace: &a.Namespace, Statistic: a.Statistic, ExtendedStatistic: a.ExtendedStatistic, Dimensions: a.Dimensions,
		Period: &a.Period, Unit: a.Unit, EvaluationPeriods: &a.EvaluationPeriods, DatapointsToAlarm: a.DatapointsToAlarm,
		Threshold: &a.Threshold, ComparisonOperator: &a.ComparisonOperator, TreatMissingData: &a.TreatMissingData,
		EvaluateLowSampleCountPercentile: a.EvaluateLowSampleCountPercentile, Tags: rec.Tags}
	c, apiErr := checkPutMetricAlarm(in)
	if apiErr != nil {
		return nil, "its alarm is not valid: " + apiErr.Message
	}
	if !validState(string(a.StateValue)) {
		return nil, "its state is not valid"
	}
	if len(rec.History) > maxHistoryPerAlarm {
		rec.History = rec.History[len(rec.History)-maxHistoryPerAlarm:]
	}
	a.OKActions, a.AlarmActions, a.InsufficientDataActions = nonNil(a.OKActions), nonNil(a.AlarmActions), nonNil(a.InsufficientDataActions)
	a.Dimensions = nonNil(a.Dimensions)
	return &alarmEntry{a: a, cfg: c, tags: rec.Tags, history: rec.History}, ""
}
