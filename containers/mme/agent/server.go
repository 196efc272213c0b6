package agent

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/docker/go-units"
	"github.com/rs/zerolog"

	"github.com/mce-run/mce/containers/artifact"
	"github.com/mce-run/mce/containers/mme"
)

// Server is the agent's HTTP API over a local cache. It keeps the
// references it handed out, by model, so that release and reset can give
// them back. It is safe for concurrent use.
type Server struct {
	cache *mme.Cache
	log   zerolog.Logger

	mu     sync.Mutex
	held   map[string][]heldRef // by TargetModel, oldest first
	seq    uint64               // acquisition order across models
	closed bool
}

// heldRef is one reference the agent handed out; seq orders the
// references of every model by acquisition, so that a reset gives back the
// oldest first and the cache's LRU deletes the earliest used files first.
type heldRef struct {
	files mme.Files
	seq   uint64
}

// NewServer serves cache, which the caller closes after [Server.Close].
func NewServer(cache *mme.Cache, log zerolog.Logger) *Server {
	return &Server{cache: cache, log: log.With().Str("component", "mme-agent").Logger(), held: map[string][]heldRef{}}
}

// Close makes every later call but /ping answer 503 and gives back every
// reference.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.reset()
}

// ServeHTTP implements http.Handler: the routes of the package doc, and
// nothing else.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	route, method := r.URL.Path, http.MethodPost
	var h func(http.ResponseWriter, *http.Request) int
	switch route {
	case "/ping":
		method, h = http.MethodGet, s.ping
	case "/v1/acquire":
		h = s.acquire
	case "/v1/release":
		h = s.release
	case "/v1/reset":
		h = s.resetRoute
	case "/v1/usage":
		method, h = http.MethodGet, s.usageRoute
	default:
		s.log.Warn().Str("method", r.Method).Str("remote", r.RemoteAddr).Msgf("refused a call to an unknown route %.200q", r.URL.Path)
		writeError(w, http.StatusNotFound, CodeUnknownRoute, "no such route; the agent answers /ping and /v1/{acquire,release,reset,usage}", "")
		return
	}
	if r.Method != method {
		w.Header().Set("Allow", method)
		writeError(w, http.StatusMethodNotAllowed, CodeMethodNotAllowed, route+" takes "+method, "")
		return
	}
	if method == http.MethodPost && route != "/v1/reset" {
		if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, CodeUnsupportedMediaType, "the body must be application/json", "")
			return
		}
	}
	if route != "/ping" {
		s.mu.Lock()
		closed := s.closed
		s.mu.Unlock()
		if closed {
			writeError(w, http.StatusServiceUnavailable, CodeShuttingDown, "the agent is shutting down", "")
			return
		}
	}
	status := h(w, r)
	if route != "/ping" {
		s.log.Debug().Str("route", route).Int("status", status).Dur("took_ms", time.Since(start)).Msg("agent call")
	}
}

func (s *Server) ping(w http.ResponseWriter, _ *http.Request) int {
	return writeJSON(w, http.StatusOK, map[string]string{"Status": "Healthy"})
}

// decode reads a small JSON body into v: one object, no unknown field,
// nothing after it. It answers the error itself and returns its status.
func decode(w http.ResponseWriter, r *http.Request, v any) int {
	data, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return writeError(w, http.StatusRequestEntityTooLarge, CodeRequestTooLarge, "the body is larger than 8 KiB", "")
		}
		return writeError(w, http.StatusBadRequest, CodeInvalidRequest, "reading the body failed", "")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return writeError(w, http.StatusBadRequest, CodeInvalidRequest, "the body is not the expected JSON object: "+err.Error(), "")
	}
	if dec.More() {
		return writeError(w, http.StatusBadRequest, CodeInvalidRequest, "the body holds more than one JSON value", "")
	}
	return 0
}

func (s *Server) acquire(w http.ResponseWriter, r *http.Request) int {
	var req acquireRequest
	if st := decode(w, r, &req); st != 0 {
		return st
	}
	if err := mme.ValidTargetModel(req.TargetModel); err != nil {
		return writeError(w, http.StatusBadRequest, CodeInvalidTargetModel, err.Error(), "")
	}
	s.mu.Lock()
	n := len(s.held[req.TargetModel])
	s.mu.Unlock()
	if n >= MaxReferencesPerModel {
		return writeError(w, http.StatusConflict, CodeTooManyReferences, fmt.Sprintf(
			"%d references on model %q are held already, the most the agent keeps; release one first", n, req.TargetModel), "")
	}
	had := s.cache.Has(req.TargetModel)
	start := time.Now()
	f, err := s.cache.Acquire(r.Context(), req.TargetModel)
	if err != nil {
		return s.writeFailure(w, req.TargetModel, err)
	}
	took := time.Since(start)
	if !had {
		// The cache deleted what no reference holds to make room; what is
		// still over capacity belongs to models in use, and the files just
		// fetched do not fit beside them.
		if c, used := s.cache.Capacity(), s.usage().CacheBytes; c > 0 && used > c {
			s.cache.Release(f, true)
			s.log.Warn().Str("model", req.TargetModel).Int64("bytes", f.Size()).Int64("cache_bytes", used).
				Int64("capacity_bytes", c).Msg("refused a model: the disk capacity is taken by models in use")
			return writeError(w, http.StatusInsufficientStorage, CodeCacheFull, fmt.Sprintf(
				"model %q (%s) does not fit in the agent's disk capacity (%s): %s are taken by models in use; unload one first",
				req.TargetModel, units.HumanSize(float64(f.Size())), units.HumanSize(float64(c)),
				units.HumanSize(float64(used-f.Size()))), "")
		}
	}
	s.mu.Lock()
	if s.closed || r.Context().Err() != nil || len(s.held[req.TargetModel]) >= MaxReferencesPerModel {
		// nobody will give it back, or concurrent calls passed the cap
		s.mu.Unlock()
		s.cache.Release(f, false)
		if !s.closed && r.Context().Err() == nil {
			return writeError(w, http.StatusConflict, CodeTooManyReferences, fmt.Sprintf(
				"%d references on model %q are held already, the most the agent keeps; release one first", MaxReferencesPerModel, req.TargetModel), "")
		}
		return writeError(w, http.StatusServiceUnavailable, CodeShuttingDown, "the call ended before the files were ready", "")
	}
	s.seq++
	s.held[req.TargetModel] = append(s.held[req.TargetModel], heldRef{files: f, seq: s.seq})
	s.mu.Unlock()
	resp := acquireResponse{ModelId: mme.ModelID(req.TargetModel), Bytes: f.Size(), usage: s.usage()}
	if !had {
		resp.DownloadMs = max(took.Milliseconds(), 1)
	}
	return writeJSON(w, http.StatusOK, resp)
}

func (s *Server) release(w http.ResponseWriter, r *http.Request) int {
	var req releaseRequest
	if st := decode(w, r, &req); st != 0 {
		return st
	}
	if err := mme.ValidTargetModel(req.TargetModel); err != nil {
		return writeError(w, http.StatusBadRequest, CodeInvalidTargetModel, err.Error(), "")
	}
	s.mu.Lock()
	fs := s.held[req.TargetModel]
	if len(fs) == 0 {
		s.mu.Unlock()
		return writeError(w, http.StatusNotFound, CodeNotHeld, "no reference on that model is held", "")
	}
	f := fs[len(fs)-1].files
	if len(fs) == 1 {
		delete(s.held, req.TargetModel)
	} else {
		s.held[req.TargetModel] = fs[:len(fs)-1]
	}
	s.mu.Unlock()
	s.cache.Release(f, req.Drop)
	return writeJSON(w, http.StatusOK, s.usage())
}

func (s *Server) resetRoute(w http.ResponseWriter, r *http.Request) int {
	// A reset takes no body; whatever comes is refused, not ignored.
	if n, _ := io.Copy(io.Discard, http.MaxBytesReader(w, r.Body, MaxRequestBytes)); n > 0 {
		return writeError(w, http.StatusBadRequest, CodeInvalidRequest, "reset takes no body", "")
	}
	n := s.reset()
	if n > 0 {
		s.log.Info().Str("event", "references_reset").Int("released", n).Msgf("gave back %d model references (mce attached anew)", n)
	}
	return writeJSON(w, http.StatusOK, resetResponse{Released: n, usage: s.usage()})
}

func (s *Server) usageRoute(w http.ResponseWriter, _ *http.Request) int {
	return writeJSON(w, http.StatusOK, s.usage())
}

// reset gives back every reference held, oldest first (so that the
// cache's LRU deletes the files used earliest first), and returns how many.
func (s *Server) reset() int {
	s.mu.Lock()
	held := s.held
	s.held = map[string][]heldRef{}
	s.mu.Unlock()
	var all []heldRef
	for _, fs := range held {
		all = append(all, fs...)
	}
	slices.SortFunc(all, func(a, b heldRef) int { return cmp.Compare(a.seq, b.seq) })
	for _, h := range all {
		s.cache.Release(h.files, false)
	}
	return len(all)
}

func (s *Server) usage() usage {
	b, n := s.cache.Usage()
	return usage{CacheBytes: b, CacheModels: n}
}

// writeFailure answers a failed acquire with the code the client maps back.
func (s *Server) writeFailure(w http.ResponseWriter, target string, err error) int {
	var nf *mme.ModelNotFoundError
	switch {
	case errors.As(err, &nf):
		return writeError(w, http.StatusNotFound, CodeModelNotFound, err.Error(), nf.URL)
	case errors.Is(err, mme.ErrInvalidTargetModel):
		return writeError(w, http.StatusBadRequest, CodeInvalidTargetModel, err.Error(), "")
	case errors.Is(err, artifact.ErrUnsafeArchive):
		return writeError(w, http.StatusUnprocessableEntity, CodeUnsafeArchive, err.Error(), "")
	case errors.Is(err, artifact.ErrInvalidArchive):
		return writeError(w, http.StatusUnprocessableEntity, CodeInvalidArchive, err.Error(), "")
	case errors.Is(err, artifact.ErrTooLarge):
		return writeError(w, http.StatusRequestEntityTooLarge, CodeModelTooLarge, err.Error(), "")
	case errors.Is(err, artifact.ErrOutsideModelRoots):
		return writeError(w, http.StatusForbidden, CodeOutsideModelRoots, err.Error(), "")
	case errors.Is(err, artifact.ErrNoCredentials):
		return writeError(w, http.StatusUnauthorized, CodeNoCredentials, err.Error(), "")
	}
	s.log.Warn().Err(err).Str("model", target).Msg("fetching model files failed")
	return writeError(w, http.StatusInternalServerError, CodeInternalFailure, err.Error(), "")
}

func writeError(w http.ResponseWriter, status int, code, msg, url string) int {
	return writeJSON(w, status, errorResponse{Code: code, Message: msg, URL: url})
}

func writeJSON(w http.ResponseWriter, status int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
	return status
}
