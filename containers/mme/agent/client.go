package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
)

// DefaultTimeout bounds a release, reset or usage call.
const DefaultTimeout = 10 * time.Second

// ClientOptions configure a [Client].
type ClientOptions struct {
	// BaseURL returns the agent's base URL ("http://10.1.0.7:9400"), read
	// on every call; "" while the pod has no address. Required.
	BaseURL func() string
	// HTTP sends the calls. Nil means a dedicated client with keep-alives.
	HTTP *http.Client
	// Timeout bounds a release, reset or usage call (an acquire is bounded
	// by its context: downloads take long). 0 means DefaultTimeout.
	Timeout time.Duration
	// ResetFirst gives back, before the first acquire, every reference the
	// agent holds: what an earlier mce (or an earlier attachment to the
	// pod) took and will never release.
	ResetFirst bool
	// Observer receives ModelDownloadingTime of the downloads the agent
	// made for this client's acquires. Nil means none.
	Observer mme.Observer
	// Logger receives failures of releases, which no caller waits for.
	Logger zerolog.Logger
}

// Client is an [mme.Store] over an agent's API: the model cache of one pod.
// Release is asynchronous (a Manager calls it with work waiting), Usage
// answers from the last call's numbers without a call of its own. Close it
// when the pod is gone.
type Client struct {
	o    ClientOptions
	life context.Context
	stop context.CancelFunc

	resetMu   sync.Mutex // serializes the first reset
	needReset bool       // guarded by resetMu

	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup // releases in flight

	cacheBytes  atomic.Int64
	cacheModels atomic.Int64
}

// NewClient returns a client; it makes no call.
func NewClient(o ClientOptions) (*Client, error) {
	if o.BaseURL == nil {
		return nil, errors.New("mme agent client: BaseURL is required")
	}
	if o.HTTP == nil {
		o.HTTP = &http.Client{Transport: &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			MaxIdleConnsPerHost: 8,
			IdleConnTimeout:     90 * time.Second,
		}}
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultTimeout
	}
	if o.Observer == nil {
		o.Observer = mme.NopObserver{}
	}
	life, stop := context.WithCancel(context.Background())
	return &Client{o: o, life: life, stop: stop, needReset: o.ResetFirst}, nil
}

// Close cancels the calls in flight, waits for releases to end, and makes
// later calls fail (Acquire) or do nothing (Release).
func (c *Client) Close() {
	c.mu.Lock()
	c.closed = true
	c.mu.Unlock()
	c.stop()
	c.wg.Wait()
}

// remoteFiles is a reference the agent holds for this client.
type remoteFiles struct {
	target   string
	size     int64
	released atomic.Bool
}

func (f *remoteFiles) Size() int64 { return f.size }

// Acquire implements [mme.Store]: the agent fetches the files if needed
// and takes a reference.
func (c *Client) Acquire(ctx context.Context, target string) (mme.Files, error) {
	if err := mme.ValidTargetModel(target); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(c.life, cancel)
	defer stop()
	if err := c.resetOnce(ctx); err != nil {
		return nil, err
	}
	var resp acquireResponse
	if err := c.call(ctx, "/v1/acquire", acquireRequest{TargetModel: target}, &resp); err != nil {
		return nil, c.typed(target, err)
	}
	if want := mme.ModelID(target); resp.ModelId != want {
		// The container would load another folder than the agent filled.
		c.release(&remoteFiles{target: target}, false)
		return nil, fmt.Errorf("model cache agent: model %q stored as %q, want %q", target, resp.ModelId, want)
	}
	c.setUsage(resp.usage)
	if resp.DownloadMs > 0 {
		c.o.Observer.ModelDownloadingTime(time.Duration(resp.DownloadMs) * time.Millisecond)
	}
	return &remoteFiles{target: target, size: resp.Bytes}, nil
}

// Release implements [mme.Store]: the call goes in the background, bounded
// by Timeout; a failure is logged (the agent keeps the files until a reset).
func (c *Client) Release(f mme.Files, drop bool) {
	rf, ok := f.(*remoteFiles)
	if !ok || rf == nil || !rf.released.CompareAndSwap(false, true) {
		return
	}
	c.release(rf, drop)
}

func (c *Client) release(rf *remoteFiles, drop bool) {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.life, c.o.Timeout)
		defer cancel()
		var u usage
		err := c.call(ctx, "/v1/release", releaseRequest{TargetModel: rf.target, Drop: drop}, &u)
		if err != nil {
			var ae *apiError
			ev := c.o.Logger.Warn()
			if (errors.As(err, &ae) && ae.Code == CodeNotHeld) || c.life.Err() != nil {
				ev = c.o.Logger.Debug() // the agent restarted, or the pod is going
			}
			ev.Err(err).Str("model", rf.target).Msg("giving back a model's files to the pod's cache agent failed")
			return
		}
		c.setUsage(u)
	}()
}

// Usage implements [mme.Store]: the numbers of the agent's last answer.
func (c *Client) Usage() (int64, int) {
	return c.cacheBytes.Load(), int(c.cacheModels.Load())
}

// Reset gives back every reference the agent holds.
func (c *Client) Reset(ctx context.Context) (released int, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var r resetResponse
	if err := c.call(ctx, "/v1/reset", nil, &r); err != nil {
		return 0, err
	}
	c.setUsage(r.usage)
	return r.Released, nil
}

// Ping asks the agent whether it is up.
func (c *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	return c.do(ctx, http.MethodGet, "/ping", nil, nil)
}

// RefreshUsage asks the agent for its usage now.
func (c *Client) RefreshUsage(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	var u usage
	if err := c.do(ctx, http.MethodGet, "/v1/usage", nil, &u); err != nil {
		return err
	}
	c.setUsage(u)
	return nil
}

// Attach makes the first reset of a ResetFirst client now (an Acquire
// would otherwise make it); it does nothing after one succeeded.
func (c *Client) Attach(ctx context.Context) error { return c.resetOnce(ctx) }

func (c *Client) resetOnce(ctx context.Context) error {
	c.resetMu.Lock()
	defer c.resetMu.Unlock()
	if !c.needReset {
		return nil
	}
	n, err := c.Reset(ctx)
	if err != nil {
		return fmt.Errorf("model cache agent: giving back earlier references: %w", err)
	}
	c.needReset = false
	if n > 0 {
		c.o.Logger.Info().Int("released", n).Msg("the pod's model cache agent gave back references of an earlier attachment")
	}
	return nil
}

func (c *Client) setUsage(u usage) {
	c.cacheBytes.Store(u.CacheBytes)
	c.cacheModels.Store(int64(u.CacheModels))
}

func (c *Client) call(ctx context.Context, route string, body, out any) error {
	return c.do(ctx, http.MethodPost, route, body, out)
}

// apiError is an error answer of the agent.
type apiError struct {
	Status int
	errorResponse
}

func (e *apiError) Error() string {
	return fmt.Sprintf("model cache agent: %s (%d): %s", e.Code, e.Status, e.Message)
}

// do sends one call and decodes a 200 answer into out; other answers are
// *apiError. Answers are read up to 64 KiB.
func (c *Client) do(ctx context.Context, method, route string, body, out any) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return mme.ErrClosed
	}
	base := c.o.BaseURL()
	if base == "" {
		return errors.New("model cache agent: the pod has no address now")
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, base+route, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.o.HTTP.Do(req)
	if err != nil {
		return fmt.Errorf("model cache agent: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes+1))
	if err != nil {
		return fmt.Errorf("model cache agent: reading the answer: %w", err)
	}
	if len(data) > maxResponseBytes {
		return fmt.Errorf("model cache agent: an answer longer than %d bytes", maxResponseBytes)
	}
	if resp.StatusCode != http.StatusOK {
		ae := &apiError{Status: resp.StatusCode}
		if json.Unmarshal(data, &ae.errorResponse) != nil || ae.Code == "" {
			ae.Code, ae.Message = CodeInternalFailure, clip(string(data))
		}
		return ae
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("model cache agent: a malformed answer: %w", err)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 512 {
		return s[:512] + "…"
	}
	return s
}

// typedError keeps the agent's message and matches the sentinel it names.
type typedError struct {
	msg      string
	sentinel error
}

func (e *typedError) Error() string { return e.msg }
func (e *typedError) Unwrap() error { return e.sentinel }

// typed turns an agent's error answer back into mme's and artifact's
// errors, as a local Cache gives them.
func (c *Client) typed(target string, err error) error {
	var ae *apiError
	if !errors.As(err, &ae) {
		return err
	}
	sentinel := map[string]error{
		CodeInvalidTargetModel: mme.ErrInvalidTargetModel,
		CodeUnsafeArchive:      artifact.ErrUnsafeArchive,
		CodeInvalidArchive:     artifact.ErrInvalidArchive,
		CodeModelTooLarge:      artifact.ErrTooLarge,
		CodeCacheFull:          artifact.ErrTooLarge, // as a full disk budget on Docker
		CodeOutsideModelRoots:  artifact.ErrOutsideModelRoots,
		CodeNoCredentials:      artifact.ErrNoCredentials,
	}[ae.Code]
	switch {
	case ae.Code == CodeModelNotFound:
		return &mme.ModelNotFoundError{TargetModel: target, URL: ae.URL, Err: &typedError{msg: ae.Message, sentinel: artifact.ErrNotFound}}
	case sentinel != nil:
		return &typedError{msg: ae.Message, sentinel: sentinel}
	}
	return err
}
