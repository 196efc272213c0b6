package testenv

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
)

// Traffic keeps callers busy while a test changes what they call (an
// update, a scale-up or -down): Workers goroutines each call Call again and
// again until Stop, counting the calls that succeed and those that fail.
// Its methods are safe for concurrent use.
type Traffic struct {
	ok, failed atomic.Int64
	mu         sync.Mutex
	errs       []error // the first maxTrafficErrors failures
	stop       chan struct{}
	once       sync.Once
	wg         sync.WaitGroup
}

const maxTrafficErrors = 5

// StartTraffic starts workers goroutines calling call (nil: an answer that
// is right; an error: a failed call, wrong answers included) until Stop. A
// cleanup of tb stops them if the test ends first.
func StartTraffic(tb testing.TB, workers int, call func() error) *Traffic {
	tr := &Traffic{stop: make(chan struct{})}
	for range workers {
		tr.wg.Add(1)
		go func() {
			defer tr.wg.Done()
			for {
				select {
				case <-tr.stop:
					return
				default:
				}
				if err := call(); err != nil {
					tr.failed.Add(1)
					tr.mu.Lock()
					if len(tr.errs) < maxTrafficErrors {
						tr.errs = append(tr.errs, err)
					}
					tr.mu.Unlock()
				} else {
					tr.ok.Add(1)
				}
			}
		}()
	}
	tb.Cleanup(tr.Stop)
	return tr
}

// Stop ends the calls and waits for those in flight; later calls do nothing.
func (tr *Traffic) Stop() {
	tr.once.Do(func() { close(tr.stop) })
	tr.wg.Wait()
}

// OK is the number of calls that succeeded so far.
func (tr *Traffic) OK() int64 { return tr.ok.Load() }

// Failed is the number of calls that failed so far.
func (tr *Traffic) Failed() int64 { return tr.failed.Load() }

// Calls is the number of calls made so far.
func (tr *Traffic) Calls() int64 { return tr.ok.Load() + tr.failed.Load() }

// Errors returns the first failures (at most five), oldest first.
func (tr *Traffic) Errors() []error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return append([]error(nil), tr.errs...)
}

// String sums the calls up: "N calls, M failed (first: …)".
func (tr *Traffic) String() string {
	s := fmt.Sprintf("%d calls, %d failed", tr.Calls(), tr.Failed())
	if errs := tr.Errors(); len(errs) > 0 {
		s += fmt.Sprintf(" (first: %v)", errs[0])
	}
	return s
}
