"""LoRA-style adapters of one model, under the adapter API SageMaker's inference components use.

When the user's script defines ``adapter_fn(model, name, src[, context])`` (it returns the loaded
adapter, any object), the server answers:

    POST /adapters            {"name": "<adapter>", "src": "<folder in the container>", "preload": bool}
                              registers the adapter: adapter_fn loads it now, as a check; 200 {"name"}
    DELETE /adapters/<name>   unregisters it; 200 {"name"}; 404 when it is not registered
    GET /adapters             {"adapters": [{"name", "src"}, ...]}

and an invocation with ``X-Amzn-SageMaker-Adapter-Identifier: <name>`` runs with
``context.adapter`` (what adapter_fn returned) and ``context.adapter_name`` set; an unregistered name
is a 404. Without adapter_fn these routes are 404 and the header is ignored, as a model without
adapters does.

The server's worker processes share the registration: it is a file per adapter under
SAGEMAKER_ADAPTERS_PATH (default /dev/shm/mce-adapters, else the temporary folder), written
atomically, and each worker loads an adapter the first time a call names it (again after it was
registered anew). At most MAX_ADAPTERS are registered; names are 1 to 63 letters, digits, '-', '_'
and '.', not starting with '.'; src must be an absolute path to a folder.
"""

import json
import os
import re
import tempfile
import threading

from .errors import InferenceError

MAX_ADAPTERS = 256
ADAPTER_HEADER = "X-Amzn-SageMaker-Adapter-Identifier"
NAME = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,62}$")
MAX_BODY = 64 << 10


def default_root():
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else tempfile.gettempdir()
    return os.environ.get("SAGEMAKER_ADAPTERS_PATH") or os.path.join(base, "mce-adapters")


class Adapters:
    """The registered adapters (shared by the worker processes) and those this process loaded."""

    def __init__(self, load, root=None):
        self.load_fn = load  # (name, src) -> adapter; raises what the user's adapter_fn raises
        self.root = root or default_root()
        os.makedirs(self.root, exist_ok=True)
        self.loaded = {}  # name -> (stamp, adapter)
        self.lock = threading.Lock()

    def _path(self, name):
        if not isinstance(name, str) or not NAME.match(name):
            raise InferenceError(400, "adapter name %s: want 1 to 63 letters, digits, '-', '_' or '.'" % repr(name)[:100])
        return os.path.join(self.root, name + ".json")

    def _record(self, name):
        """The registration of name and its stamp (the file's mtime), or (None, None)."""
        try:
            with open(self._path(name)) as f:
                return json.load(f), os.fstat(f.fileno()).st_mtime_ns
        except (OSError, ValueError):
            return None, None

    def names(self):
        out = []
        for fn in sorted(os.listdir(self.root)):
            if fn.endswith(".json"):
                rec, _ = self._record(fn[:-5])
                if rec:
                    out.append({"name": rec["name"], "src": rec["src"]})
        return out

    def register(self, body):
        try:
            req = json.loads(body)
        except ValueError as e:
            raise InferenceError(400, "the body is not JSON: %s" % e) from None
        if not isinstance(req, dict) or set(req) - {"name", "src", "preload"}:
            raise InferenceError(400, 'send {"name": "<adapter>", "src": "<folder>"} (and "preload")')
        name, src = req.get("name"), req.get("src")
        path = self._path(name)
        if not isinstance(src, str) or not os.path.isabs(src) or not os.path.isdir(src):
            raise InferenceError(400, "adapter %s: src %r is not a folder in this container" % (name, src))
        if not os.path.exists(path) and sum(1 for f in os.listdir(self.root) if f.endswith(".json")) >= MAX_ADAPTERS:
            raise InferenceError(429, "%d adapters are registered: unregister one first" % MAX_ADAPTERS)
        adapter = self.load_fn(name, src)  # raises on a bad adapter: nothing is registered
        fd, tmp = tempfile.mkstemp(dir=self.root, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump({"name": name, "src": src}, f)
        os.replace(tmp, path)
        _, stamp = self._record(name)
        with self.lock:
            self.loaded[name] = (stamp, adapter)
        return {"name": name}

    def unregister(self, name):
        path = self._path(name)
        try:
            os.remove(path)
        except FileNotFoundError:
            raise InferenceError(404, "adapter %s is not registered" % name) from None
        with self.lock:
            self.loaded.pop(name, None)
        return {"name": name}

    def get(self, name):
        """The adapter a call names, loaded in this process when it was not, or was registered anew.
        A call to an adapter loaded already costs one stat of its registration, not a read."""
        try:
            stamp = os.stat(self._path(name)).st_mtime_ns
        except OSError:
            stamp = None
        with self.lock:
            have = self.loaded.get(name)
            if stamp is None:
                self.loaded.pop(name, None)
        if stamp is None:
            raise InferenceError(404, "adapter %s is not registered with this model" % name)
        if have is not None and have[0] == stamp:
            return have[1]
        rec, stamp = self._record(name)
        if rec is None:
            raise InferenceError(404, "adapter %s is not registered with this model" % name)
        adapter = self.load_fn(name, rec["src"])
        with self.lock:
            self.loaded[name] = (stamp, adapter)
        return adapter

    def serve(self, method, path, body):
        """Answers a request on /adapters: (status, JSON-able body)."""
        if path == "/adapters":
            if method == "GET":
                return 200, {"adapters": self.names()}
            if method == "POST":
                return 200, self.register(body)
            raise InferenceError(405, "use POST /adapters or GET /adapters")
        name = path[len("/adapters/"):]
        if method != "DELETE":
            raise InferenceError(405, "use DELETE /adapters/<name>")
        return 200, self.unregister(name)
