package modelserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/mce-run/mce/examples/containers/internal/smserve"
	"github.com/mce-run/mce/internal/wire"
)

// TargetModelHeader names the model in Triton's SageMaker front end (https://github.com/triton-inference-server/server/blob/main/src/sagemaker_server.cc).
const TargetModelHeader = wire.HeaderTargetModel

// unspecifiedModel is the model /invocations addresses in multi-model mode, as in Triton when
// SAGEMAKER_TRITON_DEFAULT_MODEL_NAME is not set.
const unspecifiedModel = "unspecified_SAGEMAKER_TRITON_DEFAULT_MODEL_NAME"

// maxLoadBody caps a load request body.
const maxLoadBody = 64 << 10

var (
	// modelsRE is Triton's models_regex_, matched against the whole path.
	modelsRE = regexp.MustCompile(`^/models(?:/)?([^/]+)?(/invoke)?$`)
	// modelPathRE is Triton's model_path_regex_: /opt/ml/models/<hash>/model[/<subdir>].
	modelPathRE = regexp.MustCompile(`^(/opt/ml/models/[0-9A-Za-z._]+)/(model)/?([0-9A-Za-z._]+)?$`)
)

// MME serves the multi-model container API as Triton's SageMaker front end does. Build it with NewMME; it
// is safe for concurrent use.
type MME struct {
	root   string
	budget *budget
	delay  time.Duration
	ctx    context.Context
	log    io.Writer

	mu      sync.Mutex
	byHash  map[string]*entry // loaded models by model_name (hash)
	names   map[string]string // model name → hash, for loaded and loading models
	loading map[string]bool   // hashes being loaded
}

type entry struct {
	hash, name, url string
	model           *Model
	inflight        sync.WaitGroup
}

// NewMME returns the multi-model handler. Model URLs (/opt/ml/models/…) are read under root ("" or "/"
// for the real file system; tests pass a temporary directory). Loads still running when ctx is done fail.
// Load and unload events are logged to log.
func NewMME(ctx context.Context, s Settings, root string, log io.Writer) *MME {
	if root == "" {
		root = "/"
	}
	return &MME{
		root:    root,
		budget:  &budget{limit: s.MemoryBytes, workspace: s.WorkspaceBytes},
		delay:   s.LoadDelay,
		ctx:     ctx,
		log:     log,
		byHash:  map[string]*entry{},
		names:   map[string]string{},
		loading: map[string]bool{},
	}
}

// ModelInfo is an element of the GET /models answer and the GET /models/<hash> answer.
type ModelInfo struct {
	ModelName string `json:"modelName"`
	ModelURL  string `json:"modelUrl"`
}

// ModelList is the GET /models answer.
type ModelList struct {
	Models []ModelInfo `json:"models"`
}

// ServeHTTP routes like SagemakerAPIServer::Handle: /ping, /invocations, then the models regex; anything
// else is 400 with an empty body.
func (s *MME) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := r.URL.EscapedPath()
	switch p {
	case "/ping":
		if r.Method != http.MethodGet {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		w.WriteHeader(http.StatusOK) // ping mode "live": the server is up
		return
	case "/invocations":
		if r.Method != http.MethodPost {
			writeJSON(w, http.StatusMethodNotAllowed, map[string]string{"error": "Method Not Allowed"})
			return
		}
		writeError(w, badRequest("Request for unknown model: '%s' is not found", unspecifiedModel))
		return
	}
	m := modelsRE.FindStringSubmatch(p)
	if m == nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	hash, action := m[1], m[2]
	switch r.Method {
	case http.MethodGet:
		if hash == "" {
			s.list(w)
		} else {
			s.get(w, hash)
		}
	case http.MethodPost:
		if action == "/invoke" {
			s.invoke(w, r, hash)
		} else {
			s.load(w, r) // as in Triton, POST /models/<anything> is a load too
		}
	case http.MethodDelete:
		s.unload(w, r, hash)
	default:
		w.WriteHeader(http.StatusBadRequest)
	}
}

// targetModel returns the X-Amzn-SageMaker-Target-Model header if present (even empty), else fallback.
func targetModel(r *http.Request, fallback string) string {
	if v := r.Header.Values(TargetModelHeader); len(v) > 0 {
		return v[0]
	}
	return fallback
}

func (s *MME) list(w http.ResponseWriter) {
	s.mu.Lock()
	out := ModelList{Models: make([]ModelInfo, 0, len(s.byHash))}
	for _, e := range s.byHash {
		out.Models = append(out.Models, ModelInfo{ModelName: e.hash, ModelURL: e.url})
	}
	s.mu.Unlock()
	sort.Slice(out.Models, func(i, j int) bool { return out.Models[i].ModelName < out.Models[j].ModelName })
	writeJSON(w, http.StatusOK, out)
}

func (s *MME) get(w http.ResponseWriter, hash string) {
	s.mu.Lock()
	e := s.byHash[hash]
	s.mu.Unlock()
	if e == nil {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	writeJSON(w, http.StatusOK, ModelInfo{ModelName: e.hash, ModelURL: e.url})
}

// NormalizeURL mimics std::filesystem::absolute(path.lexically_normal()) with "/" as the working
// directory: dot and dot-dot elements and repeated slashes go, and a trailing slash stays.
func NormalizeURL(u string) string {
	trailing := strings.HasSuffix(u, "/") || path.Base(u) == "." || path.Base(u) == ".."
	if !strings.HasPrefix(u, "/") {
		u = "/" + u
	}
	c := path.Clean(u)
	if trailing && c != "/" {
		c += "/"
	}
	return c
}

type loadRequest struct {
	hash, url, target string
	match             []string // modelPathRE groups
}

// parseLoad reads the load body. A nil request with a nil error means the response was written.
func parseLoad(w http.ResponseWriter, r *http.Request) (*loadRequest, error) {
	if r.ContentLength > maxLoadBody {
		return nil, smserve.Errorf(http.StatusRequestEntityTooLarge, "load request body exceeds %d bytes", maxLoadBody)
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxLoadBody))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, smserve.Errorf(http.StatusRequestEntityTooLarge, "load request body exceeds %d bytes", maxLoadBody)
		}
		return nil, badRequest("read request body: %v", err)
	}
	fields := map[string]json.RawMessage{}
	if len(strings.TrimSpace(string(body))) > 0 {
		if err := json.Unmarshal(body, &fields); err != nil {
			return nil, badRequest("failed to parse the request JSON buffer: %v", err)
		}
	}
	lr := &loadRequest{}
	for key, dst := range map[string]*string{"model_name": &lr.hash, "url": &lr.url} {
		if raw, ok := fields[key]; ok {
			if err := json.Unmarshal(raw, dst); err != nil {
				return nil, badRequest("\"%s\" must be a string", key)
			}
		}
	}
	norm := NormalizeURL(lr.url)
	for _, bad := range []string{"/dev/", "/proc/", "/sys/"} {
		if strings.HasPrefix(norm, bad) {
			w.WriteHeader(http.StatusBadRequest) // Triton answers these with an empty body
			return nil, nil
		}
	}
	if lr.match = modelPathRE.FindStringSubmatch(norm); lr.match == nil {
		return nil, badRequest("Invalid \"url\" '%s': expected a path of the form /opt/ml/models/<hash>/model[/<subdir>]", lr.url)
	}
	lr.url = norm
	if lr.hash == "" {
		return nil, badRequest("\"model_name\" must be a non-empty string")
	}
	lr.target = targetModel(r, lr.hash)
	if lr.target == "" {
		return nil, badRequest("the %s header must not be empty", TargetModelHeader)
	}
	return lr, nil
}

func (s *MME) load(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	lr, err := parseLoad(w, r)
	if err != nil {
		writeError(w, err)
		return
	}
	if lr == nil {
		return
	}
	dir := filepath.Join(s.root, filepath.FromSlash(lr.url))
	modelURL := lr.url
	if st, err := os.Stat(filepath.Join(dir, ConfigFile)); err == nil && st.Mode().IsRegular() {
		modelURL = lr.match[1] // config.pbtxt at the url: the repository is /opt/ml/models/<hash>
	}

	// Register the names first, as Triton registers the repository before loading: a second load of the
	// same hash or name conflicts (409) even while the first is still loading.
	s.mu.Lock()
	if e, ok := s.byHash[lr.hash]; ok || s.loading[lr.hash] {
		repo := modelURL
		if ok {
			repo = e.url
		}
		s.mu.Unlock()
		writeError(w, smserve.Errorf(http.StatusConflict, "model repository '%s' has already been registered (model_name '%s')", repo, lr.hash))
		return
	}
	if h, ok := s.names[lr.target]; ok {
		s.mu.Unlock()
		writeError(w, smserve.Errorf(http.StatusConflict,
			"failed to register '%s', there is a conflicting mapping for '%s' (already loaded from model_name '%s')", modelURL, lr.target, h))
		return
	}
	s.loading[lr.hash] = true
	s.names[lr.target] = lr.hash
	s.mu.Unlock()

	e, err := s.loadModel(lr, dir, modelURL)
	s.mu.Lock()
	delete(s.loading, lr.hash)
	if err != nil {
		delete(s.names, lr.target)
	} else {
		s.byHash[lr.hash] = e
	}
	n := len(s.byHash)
	s.mu.Unlock()
	if err != nil {
		writeError(w, err)
		return
	}
	used, limit := s.budget.usage()
	fmt.Fprintf(s.log, "modelserver: loaded '%s' (model_name %s) from %s in %s: %s; %d models, %d of %d bytes used\n",
		lr.target, lr.hash, lr.url, time.Since(start).Round(time.Microsecond), e.model.Describe(), n, used, limit)
	w.WriteHeader(http.StatusOK)
}

// loadModel reads, parses and validates the model, takes its memory and waits out the load delay.
func (s *MME) loadModel(lr *loadRequest, dir, modelURL string) (*entry, error) {
	fail := func(status int, err error) error {
		return &smserve.Error{Status: status, Message: fmt.Sprintf("failed to load '%s': %v", lr.target, err), Err: err}
	}
	m, err := readModelDir(dir)
	if err != nil {
		return nil, fail(http.StatusBadRequest, err)
	}
	if ok, free := s.budget.take(m.Footprint); !ok {
		_, limit := s.budget.usage()
		return nil, fail(http.StatusInsufficientStorage, fmt.Errorf(
			"out of memory: the model needs %d bytes and %d of %d bytes are free", m.Footprint, free, limit))
	}
	if s.delay > 0 {
		t := time.NewTimer(s.delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-s.ctx.Done():
			s.budget.give(m.Footprint)
			return nil, fail(http.StatusBadRequest, errors.New("the server is shutting down"))
		}
	}
	return &entry{hash: lr.hash, name: lr.target, url: modelURL, model: m}, nil
}

// readModelDir loads the model in dir (a model directory, or a repository holding one), without following
// symbolic links out of dir.
func readModelDir(dir string) (*Model, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("open model directory: %w", err)
	}
	defer root.Close()
	fsys := root.FS()
	sub, err := ResolveModelDir(fsys)
	if err != nil {
		return nil, err
	}
	mfs, err := fs.Sub(fsys, sub)
	if err != nil {
		return nil, err
	}
	m, err := LoadFS(mfs)
	if err != nil && sub != "." {
		err = fmt.Errorf("%s: %w", sub, err)
	}
	return m, err
}

func (s *MME) invoke(w http.ResponseWriter, r *http.Request, hash string) {
	s.mu.Lock()
	if s.byHash[hash] == nil {
		s.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		return
	}
	name := targetModel(r, hash)
	e := s.byHash[s.names[name]]
	if e == nil || e.name != name {
		s.mu.Unlock()
		writeError(w, badRequest("Request for unknown model: '%s' is not found", name))
		return
	}
	e.inflight.Add(1)
	s.mu.Unlock()
	defer e.inflight.Done()
	handlerFunc(func(w http.ResponseWriter, r *http.Request) error {
		return infer(w, r, e.model, name, s.budget)
	}).ServeHTTP(w, r)
}

func (s *MME) unload(w http.ResponseWriter, r *http.Request, hash string) {
	start := time.Now()
	s.mu.Lock()
	e := s.byHash[hash]
	if e == nil {
		s.mu.Unlock()
		w.WriteHeader(http.StatusNotFound)
		return
	}
	name := targetModel(r, hash)
	if name != e.name {
		s.mu.Unlock()
		writeError(w, badRequest("failed to unload '%s': model_name '%s' is loaded as '%s'", name, hash, e.name))
		return
	}
	delete(s.byHash, hash)
	delete(s.names, e.name)
	n := len(s.byHash)
	s.mu.Unlock()
	e.inflight.Wait() // like Triton, answer once the model is really gone
	s.budget.give(e.model.Footprint)
	used, limit := s.budget.usage()
	fmt.Fprintf(s.log, "modelserver: unloaded '%s' (model_name %s) in %s, %d bytes freed; %d models, %d of %d bytes used\n",
		e.name, hash, time.Since(start).Round(time.Microsecond), e.model.Footprint, n, used, limit)
	w.WriteHeader(http.StatusOK)
}

// infer answers one KServe v2 request with m.
func infer(w http.ResponseWriter, r *http.Request, m *Model, name string, b *budget) error {
	if err := checkContentType(r); err != nil {
		return err
	}
	body, err := smserve.ReadBody(w, r)
	if err != nil {
		return err
	}
	batch, err := m.DecodeRequest(name, body)
	if err != nil {
		return err
	}
	taken, err := b.scratch(m.ScratchBytes(batch.Rows))
	if err != nil {
		return err
	}
	defer b.give(taken)
	resp, err := m.Run(name, batch)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, resp)
	return nil
}
