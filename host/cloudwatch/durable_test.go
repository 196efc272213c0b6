package cloudwatch

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"
)

// allStats asks every statistic of the first three hours per minute and,
// separately, percentiles per 5 minutes.
func allStats(t *testing.T, s *Service) (basic, pct []map[string]any) {
	t.Helper()
	basic = datapoints(t, okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(3*time.Hour), 60,
		[]string{"Sum", "Average", "Minimum", "Maximum", "SampleCount"}, nil)))
	pct = datapoints(t, okJSON(t, s, "GetMetricStatistics", gms(t0, t0.Add(3*time.Hour), 300, nil, []string{"p10", "p50", "p99"})))
	return basic, pct
}

// TestRestartLosesNoDatapoint: what was recorded, closed or still open at
// Close, answers the same after reopening the folder; the open period
// goes on after the restart and merges with what Close wrote of it.
func TestRestartLosesNoDatapoint(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	s := openTest(t, dir, c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	mustSeries(t, s, "AWS/SageMaker", "Invocations", epDims, "Count", Standard).Observe(1)
	// Two hours and a bit, crossing segment files.
	for m := range 130 {
		c.Set(t0.Add(time.Duration(m)*time.Minute + 7*time.Second))
		s.Flush()
		for i := range m%7 + 1 {
			h.Observe(float64(100*m + i))
		}
	}
	basic, pct := allStats(t, s)
	if len(basic) != 130 || len(pct) != 26 {
		t.Fatalf("%d datapoints per minute, %d per 5 minutes; want 130 and 26", len(basic), len(pct))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	h.Observe(5) // after Close: dropped, not a panic
	if st := s.Stats(); st.Dropped == 0 {
		t.Errorf("an observation after Close is counted as dropped: %+v", st)
	}

	s2 := openTest(t, dir, c, nil)
	b2, p2 := allStats(t, s2)
	if !reflect.DeepEqual(basic, b2) || !reflect.DeepEqual(pct, p2) {
		t.Errorf("after a restart the answers differ:\nbefore %v\nafter  %v", basic[len(basic)-3:], b2[max(0, len(b2)-3):])
	}
	if st := s2.Stats(); st.Segments != 3 || st.TornRecords != 0 {
		t.Errorf("segments after restart: %+v, want 3 hours and no torn record", st)
	}
	// The last minute (open at Close) goes on: one more value merges in.
	h2 := mustSeries(t, s2, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	h2.Observe(1e6)
	b3, _ := allStats(t, s2)
	last := b3[len(b3)-1]
	if last["SampleCount"] != basic[len(basic)-1]["SampleCount"].(float64)+1 || last["Maximum"] != 1e6 {
		t.Errorf("the reopened period: %v (before %v)", last, basic[len(basic)-1])
	}
	if got := len(okJSON(t, s2, "ListMetrics", map[string]any{})["Metrics"].([]any)); got != 2 {
		t.Errorf("ListMetrics after a restart: %d metrics, want 2", got)
	}
}

// TestTornTailIsCutAndReported: a segment whose last record was half
// written (a crash) opens: the record is cut and counted, every earlier
// datapoint answers, the cut stays cut on the next start, and later writes
// read back.
func TestTornTailIsCutAndReported(t *testing.T) {
	for _, tc := range []struct {
		name string
		tear func(t *testing.T, path string)
	}{
		{"half a record", func(t *testing.T, path string) {
			fi, _ := os.Stat(path)
			if err := os.Truncate(path, fi.Size()-5); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage appended", func(t *testing.T, path string) {
			appendFile(t, path, []byte{0x20, 0, 0, 0, 1, 2, 3, 4, 'D', 9, 9})
		}},
		{"a flipped byte in the last record", func(t *testing.T, path string) {
			b, _ := os.ReadFile(path)
			b[len(b)-3] ^= 0xff
			os.WriteFile(path, b, 0o600)
		}},
		{"a huge length", func(t *testing.T, path string) {
			appendFile(t, path, []byte{0xff, 0xff, 0xff, 0x7f, 0, 0, 0, 0})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			c := newClock(t0)
			s := openTest(t, dir, c, nil)
			h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
			for m := range 5 {
				c.Set(t0.Add(time.Duration(m) * time.Minute))
				s.Flush()
				h.Observe(float64(m + 1))
			}
			c.Set(t0.Add(5 * time.Minute))
			s.Flush()
			s.Close()
			path := filepath.Join(dir, segName(t0.Unix()))
			tc.tear(t, path)

			s2 := openTest(t, dir, c, nil)
			st := s2.Stats()
			if st.TornRecords != 1 || st.TornBytes == 0 {
				t.Errorf("stats %+v, want one torn tail reported", st)
			}
			basic, _ := allStats(t, s2)
			wantN := 5
			if tc.name != "garbage appended" && tc.name != "a huge length" {
				wantN = 4 // the last record itself was torn
			}
			if len(basic) != wantN {
				t.Fatalf("%d datapoints after the tear, want %d: %v", len(basic), wantN, basic)
			}
			h2 := mustSeries(t, s2, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
			c.Set(t0.Add(70 * time.Minute)) // the next hour: the torn file is not written again
			h2.Observe(42)
			s2.Close()
			s3 := openTest(t, dir, c, nil)
			if st := s3.Stats(); st.TornRecords != 0 {
				t.Errorf("a second start finds a torn tail again: %+v", st)
			}
			b3, _ := allStats(t, s3)
			if len(b3) != wantN+1 || b3[len(b3)-1]["Sum"] != 42.0 {
				t.Errorf("after the cut, a later write reads back: %v", b3)
			}
		})
	}
}

func appendFile(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(b)
	f.Close()
}

// TestAForeignFileIsSetAside: a file named as a segment but not one does
// not stop the start; it is moved aside.
func TestAForeignFileIsSetAside(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	path := filepath.Join(dir, segName(t0.Unix()))
	os.WriteFile(path, []byte("this is not a metrics segment at all"), 0o600)
	short := filepath.Join(dir, segName(t0.Unix()+3600))
	os.WriteFile(short, []byte("MCE"), 0o600) // torn while its header was written
	s := openTest(t, dir, c, nil)
	h := mustSeries(t, s, "AWS/SageMaker", "ModelLatency", epDims, "Microseconds", Standard)
	h.Observe(3)
	s.Close()
	matches, _ := filepath.Glob(path + ".corrupt-*")
	if len(matches) != 1 {
		t.Errorf("the foreign file was not set aside: %v", matches)
	}
	s2 := openTest(t, dir, c, nil)
	if basic, _ := allStats(t, s2); len(basic) != 1 {
		t.Errorf("%v", basic)
	}
}

// TestRetentionDeletesOldHours: hours past the retention are deleted (at
// Open and by the sweep) and their series forgotten.
func TestRetentionDeletesOldHours(t *testing.T) {
	dir := t.TempDir()
	c := newClock(t0)
	s := openTest(t, dir, c, func(o *Options) { o.Retention = 3 * time.Hour })
	old := mustSeries(t, s, "Custom", "Old", nil, "Count", Standard)
	old.Observe(1)
	c.Set(t0.Add(2 * time.Hour))
	s.Flush()
	mustSeries(t, s, "Custom", "New", nil, "Count", Standard).Observe(1)
	c.Set(t0.Add(4*time.Hour + time.Minute))
	s.Flush()
	s.st.sweep()
	st := s.Stats()
	if st.SegmentsExpired != 1 || st.Segments != 1 || st.Series != 1 {
		t.Errorf("after the sweep: %+v, want one hour expired, one kept, one series left", st)
	}
	if _, err := os.Stat(filepath.Join(dir, segName(t0.Unix()))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the expired hour's file is still there: %v", err)
	}
	// The old handle records again: its series is made anew.
	old.Observe(2)
	if st := s.Stats(); st.Series != 2 {
		t.Errorf("an expired series' handle records again: %+v", st)
	}
	s.Close()
	c.Set(t0.Add(10 * time.Hour))
	s2 := openTest(t, dir, c, func(o *Options) { o.Retention = 3 * time.Hour })
	if st := s2.Stats(); st.Segments != 0 || st.SegmentsExpired != 2 || st.Series != 0 {
		t.Errorf("at Open, past the retention: %+v", st)
	}
}

// TestSeriesLimit: past MaxSeries a new series is refused with
// ErrSeriesLimit, its values are dropped and counted, the others record.
func TestSeriesLimit(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, func(o *Options) { o.MaxSeries = 3 })
	for i := range 3 {
		mustSeries(t, s, "Custom", "M", []Dimension{{"I", fmt.Sprint(i)}}, "Count", Standard).Observe(1)
	}
	h, err := s.Series("Custom", "M", []Dimension{{"I", "hostile"}}, "Count", Standard)
	if !errors.Is(err, ErrSeriesLimit) || h == nil {
		t.Fatalf("the fourth series: %v, %v", h, err)
	}
	h.Observe(1)
	h.Observe(1)
	st := s.Stats()
	if st.Series != 3 || st.SeriesRefused != 1 || st.Dropped != 2 || st.Observations != 3 {
		t.Errorf("%+v", st)
	}
	if _, err := s.Series("", "M", nil, "Count", Standard); err == nil {
		t.Error("an empty namespace is refused")
	}
	if _, err := s.Series("Custom", "M", nil, "Furlongs", Standard); err == nil {
		t.Error("a unit that is not CloudWatch's is refused")
	}
	for _, res := range []Resolution{1, 7, 120} {
		if _, err := s.Series("Custom", "M", nil, "Count", res); err == nil {
			t.Errorf("a resolution of %d s is refused", res)
		}
	}
}

// TestDiskLimitEvictsOldestHours: past MaxDiskBytes the oldest hour goes
// first (logged, counted); the store stays under its bound.
func TestDiskLimitEvictsOldestHours(t *testing.T) {
	c := newClock(t0)
	dir := t.TempDir()
	s := openTest(t, dir, c, func(o *Options) { o.MaxDiskBytes = 6000 })
	h := mustSeries(t, s, "Custom", "M", nil, "Count", Standard)
	for m := range 5 * 60 {
		c.Set(t0.Add(time.Duration(m) * time.Minute))
		s.Flush()
		h.Observe(float64(m))
		if st := s.Stats(); st.DiskBytes > 6000 {
			t.Fatalf("minute %d: %d bytes on disk, bound 6000", m, st.DiskBytes)
		}
	}
	if st := s.Stats(); st.SegmentsEvicted == 0 {
		t.Errorf("no hour was evicted: %+v", st)
	}
}

// TestFlusherBehindDropsAndCounts: when a period two periods old is still
// unwritten (the flusher stalled), a new value is dropped and counted
// rather than mixed into the wrong period.
func TestFlusherBehindDropsAndCounts(t *testing.T) {
	c := newClock(t0)
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "Custom", "M", nil, "Count", Standard)
	h.Observe(1)
	c.Set(t0.Add(2 * time.Minute)) // no flush in between
	h.Observe(2)
	if st := s.Stats(); st.Dropped != 1 || st.Observations != 1 {
		t.Errorf("%+v", st)
	}
	s.Flush()
	h.Observe(3)
	basic := datapoints(t, okJSON(t, s, "GetMetricStatistics", map[string]any{"Namespace": "Custom", "MetricName": "M",
		"StartTime": t0.Unix(), "EndTime": t0.Add(3 * time.Minute).Unix(), "Period": 60, "Statistics": []string{"Sum"}}))
	if len(basic) != 2 || basic[0]["Sum"] != 1.0 || basic[1]["Sum"] != 3.0 {
		t.Errorf("%v", basic)
	}
	h.Observe(nan())
	if st := s.Stats(); st.InvalidValues != 1 {
		t.Errorf("NaN: %+v", st)
	}
}

// TestLateValueJustBeforeTheBoundaryCounts: a value whose time was read just
// before a period ended, and which arrives after the flusher's tick past
// the boundary, still counts in its period, and the period is written once
// (the flusher waits a second past the end).
func TestLateValueJustBeforeTheBoundaryCounts(t *testing.T) {
	c := newClock(t0.Add(59 * time.Second))
	s := openTest(t, t.TempDir(), c, nil)
	h := mustSeries(t, s, "Custom", "M", nil, "Count", Standard)
	h.ObserveAt(c.Now(), 1)
	ended := t0.Add(59*time.Second + 999*time.Millisecond) // the call ended here…
	c.Set(t0.Add(60*time.Second + 300*time.Millisecond))
	s.Flush()             // …the flusher ticks…
	h.ObserveAt(ended, 1) // …and then its value arrives
	c.Set(t0.Add(2 * time.Minute))
	s.Flush()
	if st := s.Stats(); st.Dropped != 0 || st.RecordsWritten != 1 {
		t.Errorf("the late value: %+v, want none dropped and one record", st)
	}
	dps := datapoints(t, okJSON(t, s, "GetMetricStatistics", map[string]any{"Namespace": "Custom", "MetricName": "M",
		"StartTime": t0.Unix(), "EndTime": t0.Add(time.Minute).Unix(), "Period": 60, "Statistics": []string{"Sum"}}))
	if len(dps) != 1 || dps[0]["Sum"] != 2.0 {
		t.Errorf("%v, want Sum 2 in the first minute", dps)
	}
}
