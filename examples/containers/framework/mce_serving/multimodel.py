"""Multi-model mode (SAGEMAKER_MULTI_MODEL=true): the multi-model container API.

    POST   /models                 {"model_name": N, "url": "/opt/ml/models/…/model"}  load: 200, 409 when
                                    N is loaded or loading, 507 over the memory budget, 404 no such folder
    GET    /models                 {"models": [{"modelName": N, "modelUrl": U}, …]}
    GET    /models/N               {"modelName": N, "modelUrl": U}, or 404
                                    (on a CUDA device also "gpuId" and the GPU footprint, see below)
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

GPUs (PyTorch with CUDA; see gpu.py). Each model is loaded on the device with the most free memory,
which is its context's system_properties["gpu_id"] and this thread's current CUDA device during its
load and its invocations. Its GPU footprint is measured around the load too: the caching allocator's
allocated and reserved deltas and the driver's used delta (mem_get_info); the largest counts against
the device's GPU budget (MCE_MODEL_GPU_MEMORY_MB per device, default 90 % of its memory), which is
kept apart from the RAM budget above: a load passing either is refused with 507. A CUDA
out-of-memory error during a load is a 507 too (the half-loaded model released), and so is one
during an invocation. The load answer, GET /models and GET /models/N add, for a model on a GPU,
"gpuId", "gpuMemoryBytes" (the counted footprint), "gpuAllocatedBytes", "gpuReservedBytes" and
"gpuDriverBytes". An unload drops the model, collects garbage and empties the allocator's cache
(torch.cuda.empty_cache), so that the driver, and mce, see the memory come back; the log says how much
did. On a CPU-only host none of this applies and the answers are as before.
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

from . import errors, gpu, usercode
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
    """Imports the framework and runs it once (on every CUDA device too: the CUDA context and the
    libraries' handles take memory), so that what that allocates is not counted against the first
    model loaded."""
    import numpy as np
    if framework == "pytorch":
        import io
        import torch
        buf = io.BytesIO()
        torch.jit.save(torch.jit.script(torch.nn.Linear(2, 1)), buf)
        buf.seek(0)
        lin = torch.jit.load(buf)
        with torch.no_grad():
            lin(torch.ones(1, 2))
            for i in range(gpu.device_count()):
                device = torch.device("cuda", i)
                lin.to(device)(torch.ones(1, 2, device=device))
        del lin
        gpu.release()
    else:
        import joblib  # noqa: F401
        from sklearn.linear_model import LinearRegression
        LinearRegression().fit(np.eye(2), np.ones(2)).predict(np.ones((1, 2)))
    _trim()


class _Entry:
    def __init__(self, name, url, handler, module_name, footprint, gpu_footprint=None):
        self.name, self.url, self.handler = name, url, handler
        self.module_name = module_name
        self.footprint = footprint
        self.gpu = gpu_footprint  # gpu.Footprint, or None on the CPU
        self.inflight = 0
        self.idle = threading.Condition()

    def describe(self):
        d = {"modelName": self.name, "modelUrl": self.url}
        d.update(gpu_fields(self.gpu))
        return d


def gpu_fields(fp):
    """The GPU fields of the API's answers for footprint fp (none on the CPU)."""
    if fp is None:
        return {}
    return {"gpuId": fp.device, "gpuMemoryBytes": fp.bytes, "gpuAllocatedBytes": fp.allocated,
            "gpuReservedBytes": fp.reserved, "gpuDriverBytes": fp.driver}


class MultiModelApp:
    """WSGI application of the multi-model API; safe for concurrent use by threads."""

    def __init__(self, settings, models_root=None):
        self.s = settings
        self.root = os.path.realpath(models_root or settings.models_dir)
        self.budget = settings.memory_budget
        self.gpu_used = {}  # device index → bytes counted for the models on it
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
            items = [e.describe() for e in self.models.values()]
        items.sort(key=lambda m: m["modelName"])
        return respond(start_response, 200, json.dumps({"models": items}).encode(), "application/json")

    def describe(self, name, start_response):
        with self.mu:
            e = self.models.get(name)
        if e is None:
            return respond_error(start_response, 404, "model %s is not loaded" % name)
        return respond(start_response, 200, json.dumps(e.describe()).encode(), "application/json")

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

    def _gpu_budget(self, device, snap):
        return self.s.gpu_memory_budget or int(snap.total * 0.9)

    def _load(self, name, url, real, start_response):
        t0 = time.monotonic()
        estimate = files_size(real)
        with self.mu:
            used = self.used
        if used + estimate > self.budget:
            return respond_error(start_response, 507, "out of memory: model %s needs at least %d bytes and %d of "
                                 "%d are in use" % (name, estimate, used, self.budget))
        device = gpu.most_free(load=self.s.framework == "pytorch")
        gpu_before = gpu.snapshot(device)
        if gpu_before is not None:
            gpu_budget = self._gpu_budget(device, gpu_before)
            with self.mu:
                gpu_used = self.gpu_used.get(device, 0)
            if gpu_used >= gpu_budget:
                return respond_error(start_response, 507, "out of GPU memory: device %d has %d of its %d-byte "
                                     "budget in use" % (device, gpu_used, gpu_budget))
        unique = "mce_model_" + hashlib.sha256(name.encode()).hexdigest()[:20]
        before = rss_bytes()
        handler = None
        failed = None
        try:
            with gpu.use(device):
                module = usercode.import_private(os.path.join(real, "code"), self.s.program, unique)
                handler = Handler(module, real, self.s.framework, self.s.default_accept, model_name=name)
                handler.load(gpu_id=device)
        except Exception as e:  # the user's code, its requirements or the model files
            cause = e.__cause__ if isinstance(e, UserCodeError) else e
            if gpu.is_oom(cause):
                log.error("model %s: CUDA out of memory while loading on device %s: %s", name, device, e,
                          exc_info=cause)
                failed = (507, "out of GPU memory: loading model %s on device %s: %s"
                          % (name, device, str(e).splitlines()[0]))
            else:
                log.error("model %s: load failed: %s", name, e, exc_info=cause)
                code = errors.status_of(cause)
                failed = (code if code != 404 else 500, "failed to load model %s: %s" % (name, e))
            del cause
        if failed is not None:
            # Out of the except block: the exception's frames, and what they held, are gone.
            sys.modules.pop(unique, None)
            handler = module = None
            _trim()
            gpu.release()
            return respond_error(start_response, failed[0], failed[1])
        footprint = max(rss_bytes() - before, estimate)
        gfp = gpu.footprint(device, gpu_before, gpu.snapshot(device))
        refused = None
        with self.mu:
            if self.used + footprint > self.budget:
                refused = "out of memory: model %s took %d bytes, over the budget of %d bytes (%d in use)" % (
                    name, footprint, self.budget, self.used)
            elif gfp is not None and self.gpu_used.get(device, 0) + gfp.bytes > self._gpu_budget(device, gpu_before):
                refused = "out of GPU memory: model %s took %d bytes on device %d, over its budget of %d bytes " \
                          "(%d in use)" % (name, gfp.bytes, device, self._gpu_budget(device, gpu_before),
                                           self.gpu_used.get(device, 0))
            else:
                self.used += footprint
                if gfp is not None:
                    self.gpu_used[device] = self.gpu_used.get(device, 0) + gfp.bytes
                self.models[name] = _Entry(name, url, handler, unique, footprint, gfp)
                used, n = self.used, len(self.models)
        if refused:
            sys.modules.pop(unique, None)
            handler = module = None
            _trim()
            gpu.release()
            return respond_error(start_response, 507, refused)
        log.info("loaded model %s from %s in %.3f s: %d bytes; %d models, %d of %d bytes used",
                 name, url, time.monotonic() - t0, footprint, n, used, self.budget)
        if gfp is not None:
            log.info("model %s is on GPU %d: %d bytes counted (allocator allocated %+d, reserved %+d; driver "
                     "used %+d)", name, device, gfp.bytes, gfp.allocated, gfp.reserved, gfp.driver)
        answer = {"status": "Model %s loaded" % name}
        answer.update(gpu_fields(gfp))
        return respond(start_response, 200, json.dumps(answer).encode(), "application/json")

    def unload(self, name, start_response):
        with self.mu:
            e = self.models.pop(name, None)
        if e is None:
            return respond_error(start_response, 404, "model %s is not loaded" % name)
        with e.idle:
            while e.inflight:
                e.idle.wait()
        device = e.gpu.device if e.gpu is not None else None
        before = gpu.snapshot(device)
        if e.handler is not None:
            e.handler.model = None
        e.handler = None
        sys.modules.pop(e.module_name, None)
        _trim()
        gpu.release()  # after the last reference went: PyTorch's cache gives the memory back to the driver
        after = gpu.snapshot(device)
        with self.mu:
            self.used -= e.footprint
            if e.gpu is not None:
                self.gpu_used[device] = max(0, self.gpu_used.get(device, 0) - e.gpu.bytes)
            used, n = self.used, len(self.models)
        log.info("unloaded model %s: %d bytes freed; %d models, %d of %d bytes used",
                 name, e.footprint, n, used, self.budget)
        if before is not None:
            log.info("unloaded model %s from GPU %d: %d bytes came back to the driver (before: %s; after: %s)",
                     name, device, after.free - before.free, gpu.describe(before), gpu.describe(after))
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
        device = e.gpu.device if e.gpu is not None else None
        with gpu.use(device):
            # A streamed answer goes on after this returns, on the server's thread, whose device is its own.
            return run_invocation(e.handler, environ, start_response, self.s.max_payload, on_finish=finished)
