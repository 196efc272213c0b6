package pipeline

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxIdleConnsPerHost keeps enough idle keep-alive connections per container
// for 200 concurrent clients (the DESIGN.md benchmark) to reuse them.
const maxIdleConnsPerHost = 512

// target is the pooled way to one container: its invocation URL and a
// transport of its own, so that one slow or dead container cannot starve the
// idle-connection pool of the others.
type target struct {
	url string // BaseURL + "/invocations"
	rt  *http.Transport
}

// newTarget builds the target for a container base URL.
func newTarget(base string, dialTimeout time.Duration) (*target, error) {
	u, err := url.Parse(base)
	if err != nil {
		return nil, fmt.Errorf("pipeline: container base URL %q: %w", base, err)
	}
	if u.Scheme != "http" || u.Host == "" {
		return nil, fmt.Errorf("pipeline: container base URL %q: want http://host:port", base)
	}
	d := &net.Dialer{Timeout: dialTimeout, KeepAlive: 30 * time.Second}
	protos := new(http.Protocols)
	protos.SetHTTP1(true)
	rt := &http.Transport{
		Proxy:               nil, // never from the environment: containers are local
		DialContext:         d.DialContext,
		Protocols:           protos,
		DisableCompression:  true,
		MaxIdleConns:        0, // no total limit; the per-host limit below applies
		MaxIdleConnsPerHost: maxIdleConnsPerHost,
		IdleConnTimeout:     90 * time.Second,
	}
	return &target{url: strings.TrimSuffix(base, "/") + "/invocations", rt: rt}, nil
}

// target returns the pooled target for base, creating it on first use.
func (iv *Invoker) target(base string) (*target, error) {
	if t, ok := iv.targets.Load(base); ok {
		return t.(*target), nil
	}
	t, err := newTarget(base, iv.dialTimeout)
	if err != nil {
		return nil, err
	}
	if prev, loaded := iv.targets.LoadOrStore(base, t); loaded {
		return prev.(*target), nil // t never dialled: nothing to close
	}
	return t, nil
}

// Forget drops the pooled transport of the container at baseURL (it was
// stopped or replaced) and closes its idle connections. Calls in flight to it
// finish normally. Safe for concurrent use.
func (iv *Invoker) Forget(baseURL string) {
	if t, ok := iv.targets.LoadAndDelete(baseURL); ok {
		t.(*target).rt.CloseIdleConnections()
	}
}

// Close closes the idle connections of every pooled transport and forgets
// them. Calls in flight finish normally, and the Invoker stays usable: later
// calls dial again. Safe for concurrent use.
func (iv *Invoker) Close() {
	iv.targets.Range(func(k, t any) bool {
		iv.targets.Delete(k)
		t.(*target).rt.CloseIdleConnections()
		return true
	})
}
