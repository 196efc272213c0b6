package probe

import (
	"io"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/internal/wire"
)

// AttributesHeader carries the switches in and the attrs= value out (https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_runtime_InvokeEndpoint.html).
const AttributesHeader = wire.HeaderCustomAttributes

const (
	defaultContentType = "application/octet-stream"
	// smallBody is the largest echo answered from one pooled buffer with a single write.
	smallBody = 64 << 10
	fillChunk = 32 << 10
)

// Handler serves POST /invocations. It is safe for concurrent use.
type Handler struct {
	s        Settings
	tag      []byte
	hostname string
	env      map[string]string
	modelDir string
	exit     func(int)
	start    time.Time
	fill     []byte    // fillChunk bytes of 'x'
	bufs     sync.Pool // *[]byte of cap smallBody
	gates    gates
	sessions sessionTable // stateful sessions (session.go)
	instance instanceID   // Info.Instance
}

// NewHandler returns a probe with settings s, reporting hostname, the model directory and environment
// from cfg, and exiting through cfg.Exit. start is the process start (for ReadyAfter).
func NewHandler(s Settings, cfg smserve.Config, hostname string, start time.Time) *Handler {
	fill := make([]byte, fillChunk)
	for i := range fill {
		fill[i] = 'x'
	}
	h := &Handler{s: s, tag: []byte(s.Tag), hostname: hostname, env: reportedEnv(cfg.Environ),
		modelDir: cfg.ModelDir, exit: cfg.Exit, start: start, fill: fill}
	h.bufs.New = func() any { b := make([]byte, 0, smallBody); return &b }
	return h
}

// Ready reports whether /ping should answer 200.
func (h *Handler) Ready() bool {
	return !h.s.PingFail && time.Since(h.start) >= h.s.ReadyAfter
}

// ServeHTTP applies the switches in the order the package comment gives.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if sid := r.Header.Get(wire.HeaderSessionID); sid != "" {
		h.session(w, r, sid)
		return
	}
	a := Attributes{Crash: -1, Status: -1, Size: -1}
	if v := r.Header.Get(AttributesHeader); v != "" {
		var err error
		if a, err = ParseAttributes(v); err != nil {
			smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "probe: %s: %w", AttributesHeader, err))
			return
		}
	}
	if a.Status < 0 && h.s.Status > 0 {
		a.Status = h.s.Status
	}
	if a.Crash >= 0 {
		h.exit(a.Crash)
		return
	}
	if a.Sleep > 0 {
		t := time.NewTimer(a.Sleep)
		select {
		case <-t.C:
		case <-r.Context().Done():
			t.Stop()
			return
		}
	}
	if a.HasRespAttrs {
		w.Header().Set(AttributesHeader, a.RespAttrs)
	}
	ct := a.ContentType
	switch {
	case a.Status >= 0:
		if ct == "" {
			ct = "text/plain"
		}
		body := "probe " + h.hostname + ": forced status " + strconv.Itoa(a.Status)
		smserve.Write(w, a.Status, ct, []byte(body))
	case a.Open != "":
		if !h.gates.open(a.Open) {
			smserve.WriteError(w, smserve.Errorf(http.StatusServiceUnavailable, "probe: too many gates"))
			return
		}
		smserve.Write(w, http.StatusOK, "text/plain", []byte("opened "+a.Open))
	case a.Info:
		h.info(w, r)
	case a.Parts > 0:
		h.stream(w, r, ct, a)
	case a.Size >= 0:
		h.size(w, ct, a.Size)
	default:
		h.echo(w, r, ct)
	}
}

func (h *Handler) echo(w http.ResponseWriter, r *http.Request, ct string) {
	if ct == "" {
		ct = r.Header.Get("Content-Type")
	}
	if ct == "" {
		ct = defaultContentType
	}
	n := r.ContentLength
	if n < 0 || n > smserve.MaxBodyBytes {
		// Unknown length (chunked) or over the cap: ReadBody bounds it and answers 413 when too large.
		body, err := smserve.ReadBody(w, r)
		if err != nil {
			smserve.WriteError(w, err)
			return
		}
		if isChat(ct, body) {
			h.chat(w, body)
			return
		}
		smserve.Write(w, http.StatusOK, ct, append(body, h.tag...))
		return
	}
	hdr := w.Header()
	hdr.Set("Content-Type", ct)
	hdr.Set("Content-Length", strconv.FormatInt(n+int64(len(h.tag)), 10))
	if n+int64(len(h.tag)) <= smallBody {
		bp := h.bufs.Get().(*[]byte)
		defer h.bufs.Put(bp)
		b := (*bp)[:n]
		if _, err := io.ReadFull(r.Body, b); err != nil {
			smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "read request body: %w", err))
			return
		}
		if isChat(ct, b) {
			hdr.Del("Content-Length")
			h.chat(w, b)
			return
		}
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write(append(b, h.tag...)) // a failed write means the client left
		return
	}
	// Read the whole body before answering: Go's HTTP/1 server may close the
	// request body once the response headers are flushed (net/http's
	// ResponseWriter contract), so copying body to answer in a stream comes back
	// short for bodies past the first flush.
	b := make([]byte, n, n+int64(len(h.tag)))
	if _, err := io.ReadFull(r.Body, b); err != nil {
		smserve.WriteError(w, smserve.Errorf(http.StatusBadRequest, "read request body: %w", err))
		return
	}
	if isChat(ct, b) {
		hdr.Del("Content-Length")
		h.chat(w, b)
		return
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(append(b, h.tag...)) // a failed write means the client left
}

func (h *Handler) size(w http.ResponseWriter, ct string, n int64) {
	if ct == "" {
		ct = defaultContentType
	}
	hdr := w.Header()
	hdr.Set("Content-Type", ct)
	hdr.Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	for n > 0 {
		k := min(n, int64(len(h.fill)))
		if _, err := w.Write(h.fill[:k]); err != nil {
			return
		}
		n -= k
	}
}

func (h *Handler) info(w http.ResponseWriter, r *http.Request) {
	files, err := listModelDir(h.modelDir)
	if err != nil {
		smserve.WriteError(w, err)
		return
	}
	tag, err := readTag(h.modelDir)
	if err != nil {
		smserve.WriteError(w, err)
		return
	}
	smserve.WriteJSON(w, http.StatusOK, Info{
		Hostname:         h.hostname,
		Instance:         h.instance.get(),
		Env:              h.env,
		ContentType:      r.Header.Get("Content-Type"),
		Accept:           r.Header.Get("Accept"),
		CustomAttributes: r.Header.Get(AttributesHeader),
		ModelDir:         h.modelDir,
		ModelFiles:       files,
		ModelTag:         tag,
	})
}
