import json
import os
import shutil
import tempfile
import types
import unittest

from mce_serving import adapters
from mce_serving.app import SingleModelApp
from mce_serving.handler import Handler

from .helpers import call, error_of


def adapter_app(root, **fns):
    """A model whose prediction is the input times its weight, plus the named adapter's offset
    (read from <src>/offset), with the adapter registry in root."""
    m = types.ModuleType("u")
    m.model_fn = lambda d: 2.0

    def adapter_fn(model, name, src):
        with open(os.path.join(src, "offset")) as f:
            return float(f.read())

    def predict_fn(data, model, context):
        return [[x * model + (context.adapter or 0.0) for x in row] for row in data]

    m.adapter_fn, m.predict_fn = adapter_fn, predict_fn
    for k, v in fns.items():
        setattr(m, k, v)
    os.environ["SAGEMAKER_ADAPTERS_PATH"] = root
    try:
        h = Handler(m, "/m")
    finally:
        del os.environ["SAGEMAKER_ADAPTERS_PATH"]
    h.load()
    return SingleModelApp(h, 1000)


class AdaptersTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp()
        self.root = os.path.join(self.tmp, "registry")
        self.src = os.path.join(self.tmp, "ten")
        os.makedirs(self.src)
        with open(os.path.join(self.src, "offset"), "w") as f:
            f.write("10")
        # Two apps on one registry: two worker processes of one server.
        self.a, self.b = adapter_app(self.root), adapter_app(self.root)

    def tearDown(self):
        shutil.rmtree(self.tmp, ignore_errors=True)

    def invoke(self, app, adapter=None):
        hs = {"Content-Type": "application/json"}
        if adapter:
            hs[adapters.ADAPTER_HEADER] = adapter
        code, _, body = call(app, "POST", "/invocations", b"[[1, 2]]", hs)
        return code, json.loads(body)

    def register(self, app, name, src):
        return call(app, "POST", "/adapters", json.dumps({"name": name, "src": src}).encode())

    def test_register_invoke_unregister_across_workers(self):
        self.assertEqual(self.invoke(self.a), (200, [[2.0, 4.0]]))
        code, _, body = self.register(self.a, "ten", self.src)
        self.assertEqual((code, json.loads(body)), (200, {"name": "ten"}))
        # The other worker loads it on its first call that names it.
        self.assertEqual(self.invoke(self.b, "ten"), (200, [[12.0, 14.0]]))
        self.assertEqual(json.loads(call(self.b, "GET", "/adapters")[2]), {"adapters": [{"name": "ten", "src": self.src}]})
        # Registered anew with other files: every worker reloads it.
        with open(os.path.join(self.src, "offset"), "w") as f:
            f.write("100")
        os.utime(self.src)
        self.assertEqual(self.register(self.a, "ten", self.src)[0], 200)
        self.assertEqual(self.invoke(self.b, "ten"), (200, [[102.0, 104.0]]))
        self.assertEqual(call(self.a, "DELETE", "/adapters/ten")[0], 200)
        code, body = self.invoke(self.b, "ten")
        self.assertEqual((code, body["message"]), (404, "adapter ten is not registered with this model"))
        self.assertEqual(call(self.a, "DELETE", "/adapters/ten")[0], 404)

    def test_refusals(self):
        missing = os.path.join(self.tmp, "missing")
        empty = os.path.join(self.tmp, "empty")
        os.makedirs(empty)
        cases = [
            ("POST", "/adapters", b"{", 400, "not JSON"),
            ("POST", "/adapters", b'{"name": "x", "src": "/", "extra": 1}', 400, 'send {"name"'),
            ("POST", "/adapters", json.dumps({"name": "../x", "src": self.src}).encode(), 400, "adapter name"),
            ("POST", "/adapters", json.dumps({"name": "a" * 64, "src": self.src}).encode(), 400, "adapter name"),
            ("POST", "/adapters", json.dumps({"name": "x", "src": "relative"}).encode(), 400, "is not a folder"),
            ("POST", "/adapters", json.dumps({"name": "x", "src": missing}).encode(), 400, "is not a folder"),
            ("POST", "/adapters", json.dumps({"name": "x", "src": empty}).encode(), 400, "could not be loaded: FileNotFoundError"),
            ("PUT", "/adapters", b"", 405, "use POST"),
            ("GET", "/adapters/x", b"", 405, "use DELETE"),
            ("DELETE", "/adapters/..", b"", 400, "adapter name"),
        ]
        for method, path, body, want, says in cases:
            with self.subTest(body=body[:40], path=path):
                code, _, out = call(self.a, method, path, body)
                self.assertEqual(code, want)
                self.assertIn(says, error_of(out)[2])
        self.assertEqual(os.listdir(self.root), [])  # nothing registered by a refusal
        self.assertEqual(self.invoke(self.a, "../x")[0], 400)

    def test_bound(self):
        for i in range(adapters.MAX_ADAPTERS):
            with open(os.path.join(self.root, "a%d.json" % i), "w") as f:
                json.dump({"name": "a%d" % i, "src": self.src}, f)
        code, _, out = self.register(self.a, "one-more", self.src)
        self.assertEqual((code, error_of(out)[0]), (429, 429))
        self.assertEqual(self.register(self.a, "a0", self.src)[0], 200)  # registering anew is no more

    def test_a_model_without_adapters(self):
        m = types.ModuleType("u")
        m.model_fn = lambda d: None
        m.predict_fn = lambda x, model: x
        h = Handler(m, "/m")
        h.load()
        app = SingleModelApp(h, 100)
        code, _, out = call(app, "POST", "/adapters", b"{}")
        self.assertEqual((code, error_of(out)[2]), (404, "this model takes no adapters: its script defines no adapter_fn"))
        hs = {"Content-Type": "application/json", adapters.ADAPTER_HEADER: "x"}
        self.assertEqual(call(app, "POST", "/invocations", b"[1]", hs)[0], 200)  # the header is ignored
