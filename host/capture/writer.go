package capture

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Store is where capture files go. *artifact.Fetcher, mce's S3 client (the
// ObjectStore of asynchronous inference), implements it; PutObject replaces
// any object at url and honours ctx.
type Store interface {
	PutObject(ctx context.Context, url string, body []byte, contentType string, meta map[string]string) error
}

// Defaults of Options.
const (
	// DefaultMaxBufferBytes bounds the captured records held in memory.
	DefaultMaxBufferBytes = 64 << 20
	// DefaultMaxPayloadBytes is SageMaker's limit on a real-time request
	// and answer (6 MB); larger payloads (asynchronous, streamed) are not
	// captured.
	DefaultMaxPayloadBytes = 6 << 20
	// DefaultMaxQueuedRecords bounds the records waiting for the writer's
	// goroutine, whatever their size.
	DefaultMaxQueuedRecords = 1 << 16
	// DefaultFlushBytes: a capture file is written once its records hold
	// this many bytes…
	DefaultFlushBytes = 8 << 20
	// DefaultFlushInterval: …or once its first record is this old.
	// SageMaker delivers "within a couple of minutes"; mce writes sooner,
	// as it runs beside the user.
	DefaultFlushInterval = time.Minute
	// DefaultUploads is the number of capture files written at once.
	DefaultUploads = 4
	// DefaultUploadTimeout bounds one attempt to write a file.
	DefaultUploadTimeout = time.Minute
	// DefaultRetryMin and DefaultRetryMax bound the wait between attempts
	// to write a file (doubling from the first to the second).
	DefaultRetryMin = time.Second
	DefaultRetryMax = time.Minute
	// DefaultDropLogInterval: dropped records and failed uploads are
	// logged at most once per interval, as counts.
	DefaultDropLogInterval = 10 * time.Second
)

// Options configure a Writer. Zero values take the defaults above.
type Options struct {
	// Store receives the capture files (required).
	Store Store
	// Log receives the writer's lines: dropped records and failed uploads
	// (rate-limited counts), and records lost at shutdown.
	Log zerolog.Logger
	// MaxBufferBytes bounds the records held, from Record until their
	// file is written: payload bytes plus a fixed overhead per record.
	// The JSON of a file being written adds up to 4/3 of its payloads
	// (base64) while it is written.
	MaxBufferBytes int64
	// MaxPayloadBytes is the largest request or answer captured.
	MaxPayloadBytes int64
	// MaxQueuedRecords bounds the records not yet taken by the writer.
	MaxQueuedRecords int
	// FlushBytes and FlushInterval say when a file is written: when its
	// records reach FlushBytes, or FlushInterval after its first record
	// was accepted. A file holds one endpoint, variant and hour.
	FlushBytes    int64
	FlushInterval time.Duration
	// Uploads is the number of files written at once.
	Uploads int
	// UploadTimeout bounds one attempt to write a file.
	UploadTimeout time.Duration
	// RetryMin and RetryMax bound the backoff between attempts; a file is
	// tried until it is written or Close's deadline comes.
	RetryMin, RetryMax time.Duration
	// DropLogInterval is the most often drops and failed uploads are
	// logged.
	DropLogInterval time.Duration
	// Allowed, when set, says whether a destination (s3://bucket/prefix/)
	// may be written to; NewCapturer and Update refuse others. host passes
	// the rule of --async-output-prefix.
	Allowed func(url string) bool

	// Test knobs. Now is the clock of records and of files' ages
	// (time.Now); RandN draws the sampling number in [0, n) and must be
	// safe for concurrent use (math/rand/v2's Uint32N); NewID makes event
	// and file IDs (random UUIDs); TickInterval is how often files' ages
	// and due retries are looked at (FlushInterval/4, at most a second).
	Now          func() time.Time
	RandN        func(n uint32) uint32
	NewID        func() string
	TickInterval time.Duration
}

func (o *Options) fill() error {
	if o.Store == nil {
		return errors.New("capture: Options.Store is required")
	}
	if o.MaxBufferBytes < 0 || o.MaxPayloadBytes < 0 || o.MaxQueuedRecords < 0 || o.FlushBytes < 0 || o.FlushInterval < 0 ||
		o.Uploads < 0 || o.UploadTimeout < 0 || o.RetryMin < 0 || o.RetryMax < 0 || o.DropLogInterval < 0 || o.TickInterval < 0 {
		return errors.New("capture: options must not be negative")
	}
	def := func(v *int64, d int64) {
		if *v == 0 {
			*v = d
		}
	}
	defDur := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&o.MaxBufferBytes, DefaultMaxBufferBytes)
	def(&o.MaxPayloadBytes, DefaultMaxPayloadBytes)
	def(&o.FlushBytes, DefaultFlushBytes)
	if o.MaxQueuedRecords == 0 {
		o.MaxQueuedRecords = DefaultMaxQueuedRecords
	}
	if o.Uploads == 0 {
		o.Uploads = DefaultUploads
	}
	defDur(&o.FlushInterval, DefaultFlushInterval)
	defDur(&o.UploadTimeout, DefaultUploadTimeout)
	defDur(&o.RetryMin, DefaultRetryMin)
	defDur(&o.RetryMax, DefaultRetryMax)
	defDur(&o.DropLogInterval, DefaultDropLogInterval)
	defDur(&o.TickInterval, min(o.FlushInterval/4, time.Second))
	if o.TickInterval <= 0 {
		o.TickInterval = time.Millisecond
	}
	o.RetryMax = max(o.RetryMax, o.RetryMin)
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RandN == nil {
		o.RandN = rand.Uint32N
	}
	if o.NewID == nil {
		o.NewID = uuid.NewString
	}
	return nil
}

// ErrClosed is Flush's answer once Close has begun.
var ErrClosed = errors.New("capture: the writer is closed")

// Writer buffers captured records of every endpoint of an mce process and
// writes them to S3 in the background. It is safe for concurrent use.
type Writer struct {
	opts    Options
	randN   func(uint32) uint32
	metrics *metrics

	// The call path's state: atomics only.
	used          atomic.Int64 // bytes of records accepted and not yet written or lost
	closed        atomic.Bool
	senders       atomic.Int64 // Records between their check of closed and their send
	dropsSinceLog [numReasons]atomic.Int64

	queue   queue         // records taken by Record, not yet by the loop
	signal  chan struct{} // queueWake records wait
	results chan uploadResult
	flushes chan flushReq
	closing chan closeReq
	wake    chan struct{} // a retry is due

	ctx      context.Context // the uploads' lifetime; Close cancels it
	cancel   context.CancelFunc
	loopDone chan struct{}

	closeOnce sync.Once
	closeErr  error
}

// New starts a Writer.
func New(opts Options) (*Writer, error) {
	w, err := build(opts)
	if err != nil {
		return nil, err
	}
	l := &loop{w: w, batches: map[batchKey]*batch{}, outstanding: map[uint64]*object{}}
	go l.run()
	return w, nil
}

// build makes a Writer without starting its goroutine.
func build(opts Options) (*Writer, error) {
	if err := opts.fill(); err != nil {
		return nil, err
	}
	w := &Writer{
		opts:    opts,
		randN:   opts.RandN,
		signal:  make(chan struct{}, 1),
		results: make(chan uploadResult, opts.Uploads),
		flushes: make(chan flushReq),
		closing: make(chan closeReq, 1),
		wake:    make(chan struct{}, 1),
	}
	w.metrics = newMetrics(func() float64 { return float64(w.used.Load()) }, opts.MaxBufferBytes)
	// The uploads run under the writer's lifetime, not a caller's: they
	// outlive the calls whose records they carry, and Close ends them.
	w.ctx, w.cancel = context.WithCancel(context.Background())
	w.loopDone = make(chan struct{})
	return w, nil
}

// Flush writes every record accepted so far and waits until they are
// written (or ctx ends: the records stay buffered and are retried). Tests
// and tools use it; mce itself writes on FlushBytes and FlushInterval.
func (w *Writer) Flush(ctx context.Context) error {
	if w.closed.Load() {
		return ErrClosed
	}
	req := flushReq{done: make(chan struct{})}
	select {
	case w.flushes <- req:
	case <-w.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-req.done:
		return nil
	case <-w.loopDone:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close stops capturing (calls sampled from now on are dropped, reason
// closed), writes every record buffered, and returns when they are written
// or ctx ends. Records still unwritten then are counted (reason shutdown)
// and logged, and Close returns ctx's error; a clean shutdown with a
// working store loses nothing. Later calls return the first call's result.
func (w *Writer) Close(ctx context.Context) error {
	w.closeOnce.Do(func() {
		w.closed.Store(true)
		// Records that saw the writer open finish their send; none blocks.
		for w.senders.Load() != 0 {
			runtime.Gosched()
		}
		req := closeReq{ctx: ctx, done: make(chan error, 1)}
		w.closing <- req
		// The loop answers when everything is written or at once when
		// ctx ends (it waits on nothing else), having counted and logged
		// what it could not write.
		w.closeErr = <-req.done
		w.cancel()
		select {
		case <-w.loopDone:
		case <-ctx.Done():
		}
	})
	return w.closeErr
}

type flushReq struct{ done chan struct{} }

type closeReq struct {
	ctx  context.Context
	done chan error
}

// batchKey is what one capture file holds: one destination, endpoint,
// variant and hour.
type batchKey struct {
	dest, endpoint, variant string
	hour                    int64 // the records' inferenceTime, to the hour (Unix seconds)
}

// batch is a capture file being filled.
type batch struct {
	key    batchKey
	recs   []*pending
	first  time.Time // the first record's inferenceTime: the file's name
	opened time.Time // when the first record was taken (Options.Now)
	bytes  int64
}

// object is a capture file sealed for writing.
type object struct {
	seq               uint64
	url               string
	body              []byte
	records           int
	bytes             int64 // buffer bytes released once written
	endpoint, variant string
	attempts          int
	next              time.Time // the next attempt, after a failure
}

type uploadResult struct {
	obj *object
	err error
}

// loop is the writer's goroutine and everything only it touches.
type loop struct {
	w           *Writer
	batches     map[batchKey]*batch
	spare       []*pending         // the queue's other slice
	ready       []*object          // sealed, waiting for an upload slot
	retry       []*object          // failed, waiting for their next attempt
	outstanding map[uint64]*object // sealed and not yet written: ready, retry and in flight
	inflight    int
	seq         uint64
	waiters     []flushWaiter
	closing     *closeReq
	draining    bool // Close: retries come at RetryMin, not backed off further
	counters    map[[2]string]*pairCounters
	failures    int    // failed uploads since the last log line
	lastErr     string // the last failure's message
	lastLog     time.Time
}

type flushWaiter struct {
	upto uint64 // written once no outstanding object has seq <= upto
	done chan struct{}
}

type pairCounters struct {
	captured, written, objects, uploadErrors prometheus.Counter
}

func (l *loop) counter(endpoint, variant string) *pairCounters {
	k := [2]string{endpoint, variant}
	if c, ok := l.counters[k]; ok {
		return c
	}
	if l.counters == nil {
		l.counters = map[[2]string]*pairCounters{}
	}
	m := l.w.metrics
	c := &pairCounters{captured: m.captured.WithLabelValues(endpoint, variant), written: m.written.WithLabelValues(endpoint, variant),
		objects: m.objects.WithLabelValues(endpoint, variant), uploadErrors: m.uploadErrors.WithLabelValues(endpoint, variant)}
	l.counters[k] = c
	return c
}

func (l *loop) run() {
	w := l.w
	defer close(w.loopDone)
	tick := time.NewTicker(w.opts.TickInterval)
	defer tick.Stop()
	var closeCtx <-chan struct{}
	for {
		select {
		case <-w.signal:
			l.drainIn()
		case res := <-w.results:
			l.finished(res)
		case <-tick.C:
			l.tick()
		case <-w.wake:
			l.promoteRetries()
		case f := <-w.flushes:
			l.drainIn()
			l.sealAll()
			l.waiters = append(l.waiters, flushWaiter{upto: l.seq, done: f.done})
		case c := <-w.closing:
			l.closing, l.draining = &c, true
			closeCtx = c.ctx.Done()
			l.drainIn() // Close waited for every sender: nothing more arrives
			l.sealAll()
			for _, o := range l.retry {
				o.next = time.Now()
			}
			l.promoteRetries()
		case <-closeCtx:
			l.lose()
			l.closing.done <- l.closing.ctx.Err()
			l.awaitUploads()
			return
		}
		l.startUploads()
		l.releaseWaiters()
		if l.closing != nil && len(l.outstanding) == 0 {
			l.closing.done <- nil
			return
		}
	}
}

// drainIn takes every record queued.
func (l *loop) drainIn() {
	l.spare = l.w.queue.take(l.spare)
	for i, r := range l.spare {
		l.add(r)
		l.spare[i] = nil
	}
	l.spare = l.spare[:0]
}

// queue hands records from the calls to the loop. A call appends under
// the lock; the loop takes the whole slice at each tick, or when
// queueWake records wait, so a call pays an uncontended lock, not a
// goroutine's wake-up per record.
type queue struct {
	mu   sync.Mutex
	recs []*pending
}

// queueWake is the number of waiting records that wakes the loop before
// its tick.
const queueWake = 256

// put appends r unless max records are queued already; wake says the
// loop should take them now.
func (q *queue) put(r *pending, max int) (ok, wake bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if len(q.recs) >= max {
		return false, false
	}
	q.recs = append(q.recs, r)
	return true, len(q.recs) == queueWake
}

// take returns the queued records, leaving spare (emptied) in their place.
func (q *queue) take(spare []*pending) []*pending {
	q.mu.Lock()
	defer q.mu.Unlock()
	recs := q.recs
	q.recs = spare[:0]
	return recs
}

// add puts a record in its file, sealing the file when full.
func (l *loop) add(r *pending) {
	l.counter(r.endpoint, r.variant).captured.Inc()
	k := batchKey{dest: r.pol.dest, endpoint: r.endpoint, variant: r.variant, hour: r.at.Truncate(time.Hour).Unix()}
	b := l.batches[k]
	if b != nil && b.bytes+r.size > l.w.opts.FlushBytes {
		l.seal(b)
		b = nil
	}
	if b == nil {
		b = &batch{key: k, first: r.at, opened: l.w.opts.Now()}
		l.batches[k] = b
	}
	b.recs = append(b.recs, r)
	b.bytes += r.size
	if b.bytes >= l.w.opts.FlushBytes {
		l.seal(b)
	}
}

// seal turns a batch into a capture file waiting to be written.
func (l *loop) seal(b *batch) {
	delete(l.batches, b.key)
	var buf bytes.Buffer
	buf.Grow(int(b.bytes + b.bytes/3))
	n := 0
	for _, r := range b.recs {
		if err := appendRecord(&buf, r, l.w.opts.NewID()); err != nil {
			// Record's strings and byte slices always encode; this
			// would be a bug, and the record is not written.
			l.w.opts.Log.Error().Err(err).Str("endpoint", r.endpoint).Str("variant", r.variant).Msg("data capture record not encoded")
			continue
		}
		n++
	}
	l.seq++
	o := &object{seq: l.seq, url: objectURL(b.key.dest, b.key.endpoint, b.key.variant, b.first, l.w.opts.NewID()),
		body: buf.Bytes(), records: n, bytes: b.bytes, endpoint: b.key.endpoint, variant: b.key.variant}
	l.outstanding[o.seq] = o
	l.ready = append(l.ready, o)
}

func (l *loop) sealAll() {
	for _, b := range l.batches {
		l.seal(b)
	}
}

// tick seals files that are old enough, retries what is due (a timer wakes
// the loop for each retry too), and logs drops and failures at most once
// per DropLogInterval.
func (l *loop) tick() {
	l.drainIn()
	now := l.w.opts.Now()
	for _, b := range l.batches {
		if now.Sub(b.opened) >= l.w.opts.FlushInterval {
			l.seal(b)
		}
	}
	l.promoteRetries()
	if time.Since(l.lastLog) >= l.w.opts.DropLogInterval {
		l.logCounts()
	}
}

func (l *loop) promoteRetries() {
	now := time.Now()
	kept := l.retry[:0]
	for _, o := range l.retry {
		if !now.Before(o.next) {
			l.ready = append(l.ready, o)
		} else {
			kept = append(kept, o)
		}
	}
	clear(l.retry[len(kept):])
	l.retry = kept
}

func (l *loop) startUploads() {
	for l.inflight < l.w.opts.Uploads && len(l.ready) > 0 {
		o := l.ready[0]
		l.ready[0] = nil
		l.ready = l.ready[1:]
		l.inflight++
		go l.w.upload(o)
	}
}

// upload makes one attempt to write o; its result goes back to the loop
// (the channel has room for every upload in flight, so it never blocks).
func (w *Writer) upload(o *object) {
	ctx, cancel := context.WithTimeout(w.ctx, w.opts.UploadTimeout)
	defer cancel()
	err := w.opts.Store.PutObject(ctx, o.url, o.body, ContentType, nil)
	w.results <- uploadResult{obj: o, err: err}
}

func (l *loop) finished(res uploadResult) {
	l.inflight--
	o := res.obj
	if _, ok := l.outstanding[o.seq]; !ok {
		return // counted as lost at Close's deadline
	}
	c := l.counter(o.endpoint, o.variant)
	if res.err == nil {
		delete(l.outstanding, o.seq)
		l.w.used.Add(-o.bytes)
		c.written.Add(float64(o.records))
		c.objects.Inc()
		o.body = nil
		return
	}
	c.uploadErrors.Inc()
	l.failures++
	l.lastErr = res.err.Error()
	o.attempts++
	delay := l.w.opts.RetryMin
	if !l.draining {
		for i := 1; i < o.attempts && delay < l.w.opts.RetryMax; i++ {
			delay *= 2
		}
		delay = min(delay, l.w.opts.RetryMax)
		delay += time.Duration(rand.Int64N(int64(delay)/5 + 1)) // jitter: stores that fail together are not retried together
	}
	o.next = time.Now().Add(delay)
	l.retry = append(l.retry, o)
	time.AfterFunc(delay, l.w.wakeUp)
}

// wakeUp tells the loop a retry is due; it never blocks.
func (w *Writer) wakeUp() {
	select {
	case w.wake <- struct{}{}:
	default: // a wake-up is already pending
	}
}

// releaseWaiters answers the Flushes whose files are all written.
func (l *loop) releaseWaiters() {
	if len(l.waiters) == 0 {
		return
	}
	lowest := ^uint64(0)
	for seq := range l.outstanding {
		lowest = min(lowest, seq)
	}
	kept := l.waiters[:0]
	for _, f := range l.waiters {
		if f.upto < lowest {
			close(f.done)
		} else {
			kept = append(kept, f)
		}
	}
	l.waiters = kept
}

// lose gives up on every file not yet written, at Close's deadline.
func (l *loop) lose() {
	lost := 0
	for seq, o := range l.outstanding {
		l.w.metrics.dropped.WithLabelValues(o.endpoint, o.variant, reasonNames[reasonShutdown]).Add(float64(o.records))
		l.w.used.Add(-o.bytes)
		lost += o.records
		delete(l.outstanding, seq)
	}
	if lost > 0 {
		ev := l.w.opts.Log.Error().Str("event", "data_capture_lost").Int("records", lost)
		if l.lastErr != "" {
			ev = ev.Str("last_error", l.lastErr)
		}
		ev.Msg("data capture records not written before the shutdown's deadline")
	}
}

// awaitUploads waits for the uploads in flight after Close's deadline
// (their context is cancelled once Close returns); a store that ignores
// its context keeps this goroutine, not Close, waiting.
func (l *loop) awaitUploads() {
	for l.inflight > 0 {
		<-l.w.results
		l.inflight--
	}
}

// logCounts writes the drops and upload failures since the last line, if
// any: one line each, whatever their number. The first drop after a quiet
// DropLogInterval is logged at the next tick.
func (l *loop) logCounts() {
	var counts [numReasons]int64
	total := int64(0)
	for r := range numReasons {
		counts[r] = l.w.dropsSinceLog[r].Swap(0)
		total += counts[r]
	}
	if total > 0 || l.failures > 0 {
		l.lastLog = time.Now() // the next line waits DropLogInterval
	}
	if total > 0 {
		ev := l.w.opts.Log.Warn().Str("event", "data_capture_dropped").Int64("records", total)
		for r := range numReasons {
			if counts[r] > 0 {
				ev = ev.Int64(reasonNames[r], counts[r])
			}
		}
		ev.Int64("buffered_bytes", l.w.used.Load()).Int64("buffer_limit_bytes", l.w.opts.MaxBufferBytes).
			Msg("data capture dropped sampled calls (mce_data_capture_records_dropped_total)")
	}
	if l.failures > 0 {
		l.w.opts.Log.Warn().Str("event", "data_capture_upload_failed").Int("failures", l.failures).
			Int("files_waiting", len(l.outstanding)).Str("last_error", l.lastErr).
			Msg("data capture could not write capture files to S3; they are kept and tried again")
		l.failures = 0
	}
}
