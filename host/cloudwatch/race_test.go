package cloudwatch

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestConcurrentObserveFlushQueryClose: values told from several
// goroutines while the flusher writes five-second periods and queries read,
// then Close, add up after a restart to exactly what was stored, and
// stored + dropped is what was told.
func TestConcurrentObserveFlushQueryClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(Options{Dir: dir, FlushInterval: 5 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	const writers = 4
	var told atomic.Int64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := range writers {
		h := mustSeries(t, s, "Custom", "Calls", []Dimension{{"W", string(rune('a' + w%2))}}, "Count", 5)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				h.Observe(1)
				told.Add(1)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			s.st.aggregate(s.st.seriesOf("Custom", "Calls", []Dimension{{"W", "a"}}, ""), window{from: start.Unix() - 5, to: start.Unix() + 60, period: 5}, true, true)
		}
	}()
	// Until at least two periods are written (about 12 s).
	for s.Stats().RecordsWritten < 2 {
		time.Sleep(50 * time.Millisecond)
		if time.Since(start) > time.Minute {
			t.Fatal("the flusher wrote nothing in a minute")
		}
	}
	close(stop)
	wg.Wait()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	st := s.Stats()
	if int64(st.Observations+st.Dropped) != told.Load() {
		t.Errorf("stored %d + dropped %d != told %d", st.Observations, st.Dropped, told.Load())
	}

	s2, err := Open(Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	var sum float64
	for _, w := range []string{"a", "b"} {
		for _, p := range s2.st.aggregate(s2.st.seriesOf("Custom", "Calls", []Dimension{{"W", w}}, ""), window{from: start.Unix() - 5, to: time.Now().Unix() + 5, period: 60}, true, false) {
			sum += p.st.sum
		}
	}
	if uint64(sum) != st.Observations || st.RecordsLost != 0 {
		t.Errorf("after a restart the datapoints sum to %v, %d were stored (%+v)", sum, st.Observations, st)
	}
	t.Logf("told %d, stored %d, dropped %d, %d records", told.Load(), st.Observations, st.Dropped, st.RecordsWritten)
}
