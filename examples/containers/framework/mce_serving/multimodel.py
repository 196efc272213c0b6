"""Multi-model mode (SAGEMAKER_MULTI_MODEL=true): the multi-model container API.

    POST   /models                 {"model_name": N, "url": "/opt/ml/models/…/model"}  load: 200, 409 when
                                    N is loaded or loading, 507 over the memory budget, 404 no such folder
    GET    /models                 {"models": [{"modelName": N, "modelUrl": U}, …]}
    GET    /models/N               {"modelName": N, "modelUrl": U}, or 404
    DELETE /models/N               unload (after its running calls end): 200, or 404
    POST   /models/N/invoke        the model's /invocations, or 404
    GET    /ping                   200

Every model brings its own code/ (imported privately, see usercode.py) and its own requirements.
Models live in one process, served by threads; loads run one at a time so that each model's
memory can be measured: the process's resident memory after the load minus before, at least the
size of the model's files. The sum of loaded models' memory may not pass the budget
(MCE_MODEL_MEMORY_MB, default 80 % of the memory limit): a load that would pass it is refused
with 507 (and undone when only the measurement shows it), which makes mce unload the least
recently used model and try again.
"""

import ctypes
import gc
import hashlib
import json
import logging
import os
import sys
import threading
import time
from urllib.parse import unquote

from . import errors, usercode
from .app import read_body, respond, respond_error, run_invocation
from .handler import Handler, UserCodeError

log = logging.getLogger("mce_serving")

MAX_LOAD_BODY = 64 << 10
MAX_NAME = 1024


def rss_bytes():
    """The process's resident anonymous memory (RssAnon): what models allocate. Pages of shared
    libraries (RssFile), faulted in lazily on first use, say nothing about a model's size."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("RssAnon:"):
                return int(line.split()[1]) * 1024
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _trim():
    """Returns freed heap memory to the system, so resident memory follows unloads."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def files_size(root, limit=200000):
    """Bytes of the regular files under root, code/ excluded (symbolic links not followed)."""
    total, n = 0, 0
    for dirpath, dirnames, filenames in os.walk(root):
        if dirpath == root and "code" in dirnames:
            dirnames.remove("code")
        for f in filenames:
            n += 1
            if n > limit:
                return total
            try:
                st = os.lstat(os.path.join(dirpath, f))
            except OSError:
                continue
            if not os.path.islink(os.path.join(dirpath, f)):
                total += st.st_size
    return total


def warm_up(framework):
    """Imports the framework and runs it once, so that what that allocates is not counted against
    the first model loaded."""
    import numpy as np
    if framework == "pytorch":
        import io
        import torch
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), buf)
        buf.seek(0)
        with torch.no_grad():
            torch.jit.load(buf)(torch.ones(1, 2))
    else:
        import joblib  # noqa: F401
        from sklearn.linear_model import LinearRegression
        LinearRegression().fit(np.eye(2), np.ones(2)).predict(np.ones((1, 2)))
    _trim()


class _Entry:
    def __init__(self, name, url, handler, module_name, footprint):
        self.name, self.url, self.handler = name, url, handler
        self.module_name = module_name
        self.footprint = footprint
        self.inflight = 0
        self.idle = threading.Condition()


class MultiModelApp:
    """WSGI application of the multi-model API; safe for concurrent use by threads."""

    def __init__(self, settings, models_root="/opt/ml/models"):
        self.s = settings
        self.root = os.path.realpath(models_root)
        self.budget = settings.memory_budget
        self.mu = threading.Lock()
        self.load_mu = threading.Lock()  # one load at a time: memory is measured around it
        self.models = {}
        self.loading = set()
        self.used = 0
        warm_up(settings.framework)

    # ---- routing

    def __call__(self, environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        try:
            if path == "/ping":
                return respond(start_response, 200)
            if path == "/invocations":
                return respond_error(start_response, 400, "multi-model mode: invoke POST /models/<name>/invoke "
                                                          "(with SageMaker, set TargetModel)")
            if path in ("/models", "/models/"):
                if method == "POST":
                    return self.load(environ, start_response)
                if method == "GET":
                    return self.list(start_response)
                return respond_error(start_response, 405, "use GET or POST /models")
            if path.startswith("/models/"):
                rest = path[len("/models/"):]
                invoke = rest.endswith("/invoke")
                if invoke:
                    rest = rest[:-len("/invoke")]
                name = unquote(rest)
                if not name or "/" in name:
                    return respond_error(start_response, 404, "no such path")
                if invoke:
                    if method != "POST":
                        return respond_error(start_response, 405, "use POST /models/<name>/invoke")
                    return self.invoke(name, environ, start_response)
                if method == "GET":
                    return self.describe(name, start_response)
                if method == "DELETE":
                    return self.unload(name, start_response)
                return respond_error(start_response, 405, "use GET or DELETE /models/<name>")
            return respond_error(start_response, 404, "no such path")
        except errors.InferenceError as e:
            return respond_error(start_response, e.status_code, e.message)

    # ---- the API

    def list(self, start_response):
        with self.mu:
            items = [{"modelName": e.name, "modelUrl": e.url} for e in self.models.values()]
        items.sort(key=lambda m: m["modelName"])
        return respond(start_response, 200, json.dumps({"models": items}).encode(), "application/json")

    def describe(self, name, start_response):
        with self.mu:
            e = self.models.get(name)
        if e is None:
            return respond_error(start_response, 404, "model %s is not loaded" % name)
        return respond(start_response, 200, json.dumps({"modelName": e.name, "modelUrl": e.url}).encode(),
                       "application/json")

    def _parse_load(self, environ):
        body = read_body(environ, MAX_LOAD_BODY)
        try:
            req = json.loads(body or b"{}")
        except ValueError as e:
            raise errors.InferenceError(400, "the load request is not JSON: %s" % e) from None
        if not isinstance(req, dict):
            raise errors.InferenceError(400, "the load request must be a JSON object")
        name, url = req.get("model_name"), req.get("url")
        if not isinstance(name, str) or not name or len(name) > MAX_NAME or "/" in name \
                or any(ord(c) < 32 for c in name):
            raise errors.InferenceError(400, "\"model_name\" must be a non-empty string without '/' "
                                             "(at most %d characters)" % MAX_NAME)
        if not isinstance(url, str) or not url:
            raise errors.InferenceError(400, "\"url\" must be a non-empty string")
        real = os.path.realpath(url)
        if real != self.root and not real.startswith(self.root + os.sep):
            raise errors.InferenceError(400, "\"url\" must be a folder under %s" % self.root)
        if not os.path.isdir(real):
            raise errors.InferenceError(404, "model folder %s does not exist" % url)
        return name, url, real

    def load(self, environ, start_response):
        name, url, real = self._parse_load(environ)
        with self.mu:
            if name in self.models or name in self.loading:
                return respond_error(start_response, 409, "model %s is already loaded" % name)
            self.loading.add(name)
        try:
            with self.load_mu:
                return self._load(name, url, real, start_response)
        finally:
            with self.mu:
                self.loading.discard(name)

    def _load(self, name, url, real, start_response):
        t0 = time.monotonic()
        estimate = files_size(real)
        with self.mu:
            used = self.used
        if used + estimate > self.budget:
            return respond_error(start_response, 507, "out of memory: model %s needs at least %d bytes and %d of "
                                 "%d are in use" % (name, estimate, used, self.budget))
        unique = "mce_model_" + hashlib.sha256(name.encode()).hexdigest()[:20]
        before = rss_bytes()
        handler = None
        try:
            module = usercode.import_private(os.path.join(real, "code"), self.s.program, unique)
            handler = Handler(module, real, self.s.framework, self.s.default_accept, model_name=name)
            handler.load()
        except Exception as e:  # the user's code, its requirements or the model files
            sys.modules.pop(unique, None)
            handler = None
            _trim()
            cause = e.__cause__ if isinstance(e, UserCodeError) else e
            log.error("model %s: load failed: %s", name, e, exc_info=cause)
            code = errors.status_of(cause)
            return respond_error(start_response, code if code != 404 else 500,
                                 "failed to load model %s: %s" % (name, e))
        footprint = max(rss_bytes() - before, estimate)
        with self.mu:
            if self.used + footprint > self.budget:
                over = True
            else:
                over = False
                self.used += footprint
                self.models[name] = _Entry(name, url, handler, unique, footprint)
                used, n = self.used, len(self.models)
        if over:
            sys.modules.pop(unique, None)
            handler = None
            _trim()
            return respond_error(start_response, 507, "out of memory: model %s took %d bytes, over the budget of "
                                 "%d bytes (%d in use)" % (name, footprint, self.budget, self.used))
        log.info("loaded model %s from %s in %.3f s: %d bytes; %d models, %d of %d bytes used",
                 name, url, time.monotonic() - t0, footprint, n, used, self.budget)
        return respond(start_response, 200, json.dumps({"status": "Model %s loaded" % name}).encode(),
                       "application/json")

    def unload(self, name, start_response):
        with self.mu:
            e = self.models.pop(name, None)
        if e is None:
            return respond_error(start_response, 404, "model %s is not loaded" % name)
        with e.idle:
            while e.inflight:
                e.idle.wait()
        e.handler = None
        sys.modules.pop(e.module_name, None)
        _trim()
        with self.mu:
            self.used -= e.footprint
            used, n = self.used, len(self.models)
        log.info("unloaded model %s: %d bytes freed; %d models, %d of %d bytes used",
                 name, e.footprint, n, used, self.budget)
        return respond(start_response, 200, json.dumps({"status": "Model %s unloaded" % name}).encode(),
                       "application/json")

    def invoke(self, name, environ, start_response):
        with self.mu:
            e = self.models.get(name)
            if e is not None:
                with e.idle:
                    e.inflight += 1
        if e is None:
            return respond_error(start_response, 404, "model %s is not loaded" % name)

        def finished():
            # Streamed answers count as in flight (the model is not unloaded) until they end.
            with e.idle:
                e.inflight -= 1
                if not e.inflight:
                    e.idle.notify_all()
        return run_invocation(e.handler, environ, start_response, self.s.max_payload, on_finish=finished)
