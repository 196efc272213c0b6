package cloudwatch

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/internal/awsclock"
)

// Options configure a Service. Zero values take the defaults documented on
// each field.
type Options struct {
	// Dir is the folder the datapoints are kept in (mce's state folder,
	// e.g. <state>/cloudwatch). Required; created when missing.
	Dir string
	// Retention is how long datapoints are kept: at least this long, at
	// most an hour more (segments go whole). Default 24 h; at least 3 h.
	Retention time.Duration
	// MaxSeries bounds the number of distinct series (namespace, metric,
	// dimensions, unit, resolution). Past it a new series' datapoints are
	// dropped, counted (Stats.SeriesRefused, Stats.Dropped) and logged once
	// a minute. Default 20,000.
	MaxSeries int
	// MaxDiskBytes bounds the segment files. Past it the oldest hours are
	// deleted before their retention (logged, Stats.SegmentsEvicted);
	// when only the hours being written are left, closed datapoints are
	// lost (logged, Stats.RecordsLost). Default 2 GiB.
	MaxDiskBytes int64
	// FlushInterval is how often closed periods are written. A period is
	// on disk at most 1 s (a grace for values just before its end) plus
	// FlushInterval after it closes. Keep it under the shortest resolution
	// recorded less 2 s: a series keeps two periods in memory, and a value
	// whose slot still holds an unwritten period is dropped (counted).
	// Default 1 s.
	FlushInterval time.Duration
	// MaxRequestBytes bounds a request body (ServeHTTP, Serve). Default
	// 1 MiB, far above the largest valid request (500 GetMetricData
	// queries of 30 dimensions each).
	MaxRequestBytes int
	// Authorize decides whether the (already authenticated) caller may
	// perform action ("cloudwatch:GetMetricStatistics" …) on resource "*".
	// A non-nil error refuses the call with AccessDenied (403) and the
	// error's text as the message, or with the error itself when it is an
	// *APIError. Nil allows every call (tests, a listener without
	// credentials).
	Authorize func(ctx context.Context, r *http.Request, action string) error
	// Logger receives the store's warnings (torn segments, the series and
	// disk limits). The zero value logs nothing.
	Logger zerolog.Logger
	// Now is the clock (tests). Default Clock's Now.
	Now func() time.Time
	// Clock is AWS time (mce serve --time-compression): it gives Now, and
	// the default FlushInterval and AlarmInterval and every sampler's
	// interval are its AWS durations turned into wall-clock time. nil:
	// the wall clock.
	Clock *awsclock.Clock
	// MaxAlarms bounds the metric alarms (PutMetricAlarm of one more is
	// LimitExceeded). Default 5,000.
	MaxAlarms int
	// AlarmInterval is how often every alarm is evaluated. Default 10 s;
	// tests make it short (with Now, a compressed clock) to see alarms
	// change within a test.
	AlarmInterval time.Duration
	// Region and Account go into the alarms' ARNs. Default us-east-1 and
	// 000000000000.
	Region, Account string
}

const (
	defaultRetention     = 24 * time.Hour
	minRetention         = 3 * time.Hour
	defaultMaxSeries     = 20000
	defaultMaxDiskBytes  = 2 << 30
	defaultFlushInterval = time.Second
	defaultMaxRequest    = 1 << 20
	defaultRegion        = "us-east-1"
	defaultAccount       = "000000000000"
)

// store holds the series and their segments; see store.go, segment.go and
// flush.go.
type store struct {
	dir        string
	retention  int64
	maxSeries  int
	maxDisk    int64
	flushEvery time.Duration
	now        func() time.Time
	log        zerolog.Logger

	flushMu sync.Mutex // one flush or sweep at a time; held by every change of segs

	mu        sync.RWMutex // the registry, the index, segs and diskBytes
	reg       registry
	segs      map[int64]*segment
	diskBytes int64

	c              counters
	lastRefusedLog atomic.Int64
}

// Service is the CloudWatch metrics API and its datapoint store. It is safe
// for concurrent use. Open it, record with Series/Observe, serve it with
// Serve or ServeHTTP, and Close it.
type Service struct {
	st        *store
	al        *alarms
	authorize func(ctx context.Context, r *http.Request, action string) error
	maxBody   int

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed atomic.Bool
	clock  *awsclock.Clock
}

// Open opens the store in opts.Dir, reading the datapoints kept there (a
// torn or corrupt tail is cut and reported, never fatal), and starts the
// flusher. It fails only when the folder cannot be made or read.
func Open(opts Options) (*Service, error) {
	if opts.Dir == "" {
		return nil, errors.New("cloudwatch: Options.Dir is required")
	}
	if opts.Retention == 0 {
		opts.Retention = defaultRetention
	}
	if opts.Retention < minRetention {
		return nil, fmt.Errorf("cloudwatch: retention %s is below the minimum of %s", opts.Retention, minRetention)
	}
	if opts.MaxSeries <= 0 {
		opts.MaxSeries = defaultMaxSeries
	}
	if opts.MaxDiskBytes <= 0 {
		opts.MaxDiskBytes = defaultMaxDiskBytes
	}
	if opts.FlushInterval <= 0 {
		opts.FlushInterval = opts.Clock.Real(defaultFlushInterval)
	}
	if opts.MaxRequestBytes <= 0 {
		opts.MaxRequestBytes = defaultMaxRequest
	}
	if opts.Now == nil {
		opts.Now = opts.Clock.Now
	}
	if opts.MaxAlarms <= 0 {
		opts.MaxAlarms = defaultMaxAlarms
	}
	if opts.AlarmInterval <= 0 {
		opts.AlarmInterval = opts.Clock.Real(defaultAlarmInterval)
	}
	if opts.Region == "" {
		opts.Region = defaultRegion
	}
	if opts.Account == "" {
		opts.Account = defaultAccount
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("cloudwatch: %w", err)
	}
	st := &store{
		dir:        opts.Dir,
		retention:  int64(opts.Retention / time.Second),
		maxSeries:  opts.MaxSeries,
		maxDisk:    opts.MaxDiskBytes,
		flushEvery: opts.FlushInterval,
		now:        opts.Now,
		log:        opts.Logger,
		reg:        registry{byKey: map[string]*series{}, byMetric: map[string][]*series{}},
		segs:       map[int64]*segment{},
	}
	st.mu.Lock()
	err := st.loadSegments()
	st.mu.Unlock()
	if err != nil {
		return nil, fmt.Errorf("cloudwatch: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	al := &alarms{dir: filepath.Join(opts.Dir, alarmDirName), max: opts.MaxAlarms, interval: opts.AlarmInterval,
		region: opts.Region, account: opts.Account, log: opts.Logger, byName: map[string]*alarmEntry{}}
	s := &Service{st: st, al: al, authorize: opts.Authorize, maxBody: opts.MaxRequestBytes, ctx: ctx, cancel: cancel, clock: opts.Clock}
	if err := s.loadAlarms(); err != nil {
		cancel()
		for _, seg := range st.segs {
			seg.f.Close()
		}
		return nil, fmt.Errorf("cloudwatch: alarms: %w", err)
	}
	s.wg.Add(2)
	go s.flusher()
	go s.evaluator()
	return s, nil
}

func (s *Service) flusher() {
	defer s.wg.Done()
	t := time.NewTicker(s.st.flushEvery)
	defer t.Stop()
	lastSweep := time.Now()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			s.st.flush(false)
			if time.Since(lastSweep) >= time.Minute {
				s.st.sweep()
				lastSweep = time.Now()
			}
		}
	}
}

// Flush writes every period that has closed now, as the flusher does each
// FlushInterval (tests, and host before a planned stop).
func (s *Service) Flush() { s.st.flush(false) }

// Close stops the flusher and the samplers, writes every open period
// (its datapoint so far; more values for the same period after a restart
// are merged with it) and closes the files. Observations after Close are
// dropped. Close is idempotent.
func (s *Service) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	s.cancel()
	s.wg.Wait()
	st := s.st
	// No more observations (nothing would write them), then the last flush.
	st.mu.Lock()
	st.maxSeries = 0
	for _, se := range st.reg.byKey {
		se.mu.Lock()
		se.retired = true
		se.mu.Unlock()
	}
	st.mu.Unlock()
	st.flush(true)
	st.flushMu.Lock()
	defer st.flushMu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	var errs []error
	for h, seg := range st.segs {
		if err := seg.f.Close(); err != nil {
			errs = append(errs, err)
		}
		delete(st.segs, h)
	}
	return errors.Join(errs...)
}

// Series returns the handle of one series for the hot path. ns, metric and
// dims name the metric as CloudWatch does; unit is one of CloudWatch's
// StandardUnit names ("Count", "Microseconds", "Percent", "None" …); res
// is the storage resolution (Standard, HighResolution). An identity outside
// CloudWatch's bounds is an error; a full registry returns a working
// handle and ErrSeriesLimit (see Options.MaxSeries). Resolve handles once,
// when an endpoint or variant is made, not per call.
func (s *Service) Series(ns, metric string, dims []Dimension, unit string, res Resolution) (*Series, error) {
	if err := checkIdentity(ns, metric, unit, res); err != nil {
		return nil, fmt.Errorf("cloudwatch: %w", err)
	}
	sd, err := sortedDims(dims)
	if err != nil {
		return nil, fmt.Errorf("cloudwatch: %w", err)
	}
	h := &Series{st: s.st, ns: ns, name: metric, unit: unit, dims: sd, res: int64(res)}
	if s.closed.Load() {
		return h, nil
	}
	s.st.mu.Lock()
	se, err := s.st.lookupLocked(ns, metric, sd, unit, int64(res))
	s.st.mu.Unlock()
	if err != nil {
		h.retryAt.Store(s.st.nowUnix() + 60)
		s.st.logRefused(ns, metric)
		return h, err
	}
	h.s.Store(se)
	return h, nil
}

// Observe records v on a series named on the spot: a map lookup (and an
// allocation when the series is new) per call; the hot path resolves a
// handle once with Series instead.
func (s *Service) Observe(ns, metric string, dims []Dimension, unit string, res Resolution, v float64) error {
	h, err := s.Series(ns, metric, dims, unit, res)
	if h != nil {
		h.Observe(v)
	}
	return err
}

// Now is the Service's clock: AWS time, which runs faster than the wall
// clock under mce serve --time-compression. What publishes datapoints
// stamps them with it.
func (s *Service) Now() time.Time { return s.st.now() }

// AddSampler runs sample every interval until the returned stop is called
// or the Service closes: the way to publish gauges (LoadedModelCount,
// CPUUtilization …), whose sample calls Observe on their handles with the
// value read. sample runs on its own goroutine, one call at a time, with a
// context cancelled by stop and Close; a panic in it is recovered, logged
// and stops that sampler only.
func (s *Service) AddSampler(interval time.Duration, sample func(ctx context.Context)) (stop func()) {
	if interval <= 0 {
		interval = time.Minute
	}
	interval = s.clock.Real(interval)
	ctx, cancel := context.WithCancel(s.ctx)
	done := make(chan struct{})
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer close(done)
		defer func() {
			if v := recover(); v != nil {
				s.st.log.Error().Interface("panic", v).Msg("cloudwatch: a metrics sampler panicked; it is stopped")
			}
		}()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				sample(ctx)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// Stats are the store's running totals and sizes.
type Stats struct {
	Series          int    // distinct series now
	DiskBytes       int64  // size of the segment files
	Segments        int    // segment files (hours) kept
	Observations    uint64 // values stored
	Dropped         uint64 // values not stored: no room for their series, after Close, or late for a closed period
	SeriesRefused   uint64 // series refused at MaxSeries
	InvalidValues   uint64 // NaN or ±Inf values refused
	RecordsWritten  uint64 // datapoints written to disk
	RecordsLost     uint64 // closed datapoints that could not be written (disk limit, I/O error)
	TornRecords     uint64 // torn or corrupt tails cut at Open
	TornBytes       uint64 // bytes cut with them
	SegmentsExpired uint64 // hours deleted past the retention
	SegmentsEvicted uint64 // hours deleted early for MaxDiskBytes
	Alarms          int    // metric alarms now
	// AlarmFilesQuarantined counts alarm files moved aside at Open
	// (corrupt, or an alarm that is not valid).
	AlarmFilesQuarantined uint64
}

// Stats reads the totals.
func (s *Service) Stats() Stats {
	st := s.st
	st.mu.RLock()
	out := Stats{Series: len(st.reg.byKey), DiskBytes: st.diskBytes, Segments: len(st.segs)}
	for _, se := range st.reg.byKey {
		se.mu.Lock()
		out.Observations += se.observed
		se.mu.Unlock()
	}
	out.Observations += st.c.observations.Load()
	st.mu.RUnlock()
	out.Dropped = st.c.dropped.Load()
	out.SeriesRefused = st.c.seriesRefused.Load()
	out.InvalidValues = st.c.invalidValues.Load()
	out.RecordsWritten = st.c.recordsWritten.Load()
	out.RecordsLost = st.c.recordsLost.Load()
	out.TornRecords = st.c.tornRecords.Load()
	out.TornBytes = st.c.tornBytes.Load()
	out.SegmentsExpired = st.c.segmentsExpired.Load()
	out.SegmentsEvicted = st.c.segmentsEvicted.Load()
	out.AlarmFilesQuarantined = st.c.alarmFilesQuarantined.Load()
	s.al.mu.Lock()
	out.Alarms = len(s.al.byName)
	s.al.mu.Unlock()
	return out
}
