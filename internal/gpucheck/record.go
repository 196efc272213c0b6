package gpucheck

import (
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/mce-run/mce/containers/mme"
)

// recorder is the Manager's transport: it notes the status of every load
// call (POST /models) on the way.
type recorder struct {
	next http.RoundTripper

	mu    sync.Mutex
	loads map[int]int
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := r.next.RoundTrip(req)
	if err == nil && req.Method == http.MethodPost && req.URL.Path == "/models" {
		r.mu.Lock()
		if r.loads == nil {
			r.loads = map[int]int{}
		}
		r.loads[resp.StatusCode]++
		r.mu.Unlock()
	}
	return resp, err
}

func (r *recorder) reset() {
	r.mu.Lock()
	r.loads = nil
	r.mu.Unlock()
}

// loadStatuses returns the non-200 load answers by status, and the 200s.
func (r *recorder) loadStatuses() (map[int]int, int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[int]int{}
	for st, n := range r.loads {
		if st != http.StatusOK {
			out[st] = n
		}
	}
	return out, r.loads[http.StatusOK]
}

// observer counts what the Manager reports; NopObserver takes the rest.
type observer struct {
	mme.NopObserver
	evicted atomic.Int64
	loaded  atomic.Int64
	peak    atomic.Int64
}

func (o *observer) ModelEvicted() { o.evicted.Add(1) }

func (o *observer) LoadedModelCount(n int) {
	o.loaded.Store(int64(n))
	for {
		p := o.peak.Load()
		if int64(n) <= p || o.peak.CompareAndSwap(p, int64(n)) {
			return
		}
	}
}

func decodeJSON(r io.Reader, v any) error {
	return json.NewDecoder(io.LimitReader(r, 16<<20)).Decode(v)
}
