import json
import os
import tempfile
import threading
import types
import unittest

from mce_serving.app import SingleModelApp
from mce_serving.handler import Handler
from mce_serving.multimodel import MultiModelApp
from mce_serving.settings import Settings, SettingsError

from .helpers import call, error_of

SCRIPT = """
import json, os
def model_fn(model_dir):
    with open(os.path.join(model_dir, "w.json")) as f:
        return json.load(f)
def predict_fn(data, model):
    return (data * model["w"]).sum(axis=1)
"""


def single(**fns):
    m = types.ModuleType("u")
    for k, v in fns.items():
        setattr(m, k, v)
    h = Handler(m, "/m")
    h.load()
    return SingleModelApp(h, 100)


class SingleModelAppTest(unittest.TestCase):
    def setUp(self):
        self.app = single(model_fn=lambda d: None, predict_fn=lambda x, m: x.sum(axis=1))

    def test_ping(self):
        self.assertEqual(call(self.app, "GET", "/ping")[0], 200)

    def test_invocations(self):
        code, hs, body = call(self.app, "POST", "/invocations", b"[[1, 2]]", {"Content-Type": "application/json"})
        self.assertEqual((code, hs["Content-Type"], json.loads(body)), (200, "application/json", [3.0]))

    def test_errors(self):
        cases = [
            ("GET", "/invocations", b"", {}, 405),
            ("POST", "/nope", b"", {}, 404),
            ("POST", "/invocations", b"[1]" * 50, {"Content-Type": "application/json"}, 413),
            ("POST", "/invocations", b"x", {"Content-Type": "text/plain"}, 415),
            ("POST", "/invocations", b"[1]", {"Content-Type": "application/json", "Accept": "text/html"}, 406),
            ("POST", "/invocations", b"[1", {"Content-Type": "application/json"}, 400),
        ]
        for method, path, body, hs, want in cases:
            with self.subTest(path=path, want=want):
                code, rh, out = call(self.app, method, path, body, hs)
                self.assertEqual(code, want)
                self.assertEqual(rh["Content-Type"], "application/json")
                self.assertEqual(error_of(out)[0], want)

    def test_user_status(self):
        class Refused(Exception):
            status_code = 422
            message = "no negative ages"

        def predict_fn(x, m):
            raise Refused("no negative ages")

        app = single(model_fn=lambda d: None, predict_fn=predict_fn)
        with self.assertLogs("mce_serving", "WARNING") as logs:
            code, _, out = call(app, "POST", "/invocations", b"[1]", {"Content-Type": "application/json"})
        self.assertEqual((code, error_of(out)[2]), (422, "no negative ages"))
        self.assertIn("Traceback", "\n".join(logs.output))

    def test_user_crash_is_500_with_message(self):
        app = single(model_fn=lambda d: None, predict_fn=lambda x, m: 1 / 0)
        with self.assertLogs("mce_serving", "ERROR") as logs:
            code, _, out = call(app, "POST", "/invocations", b"[1]", {"Content-Type": "application/json"})
        self.assertEqual(code, 500)
        self.assertIn("ZeroDivisionError", error_of(out)[2])
        self.assertIn("Traceback", "\n".join(logs.output))


class MultiModelAppTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.root = self.tmp.name
        self.app = MultiModelApp(Settings({"MCE_MODEL_MEMORY_MB": "8"}), models_root=self.root)

    def tearDown(self):
        self.tmp.cleanup()

    def model(self, name, w, pad=0):
        d = os.path.join(self.root, name, "model")
        os.makedirs(os.path.join(d, "code"))
        with open(os.path.join(d, "code", "inference.py"), "w") as f:
            f.write(SCRIPT)
        with open(os.path.join(d, "w.json"), "w") as f:
            json.dump({"w": w}, f)
        if pad:
            with open(os.path.join(d, "pad.bin"), "wb") as f:
                f.write(b"\0" * pad)
        return d

    def load(self, name, url):
        return call(self.app, "POST", "/models", json.dumps({"model_name": name, "url": url}).encode(),
                    {"Content-Type": "application/json"})

    def invoke(self, name, body):
        return call(self.app, "POST", "/models/%s/invoke" % name, body, {"Content-Type": "application/json"})

    def test_lifecycle(self):
        a, b = self.model("a", [1, 1]), self.model("b", [10, 0])
        self.assertEqual(self.load("a", a)[0], 200)
        self.assertEqual(self.load("b", b)[0], 200)
        self.assertEqual(self.load("a", a)[0], 409)
        self.assertEqual(json.loads(self.invoke("a", b"[[1, 2]]")[2]), [3])
        self.assertEqual(json.loads(self.invoke("b", b"[[1, 2]]")[2]), [10])
        code, _, body = call(self.app, "GET", "/models")
        self.assertEqual((code, json.loads(body)), (200, {"models": [{"modelName": "a", "modelUrl": a},
                                                                     {"modelName": "b", "modelUrl": b}]}))
        self.assertEqual(json.loads(call(self.app, "GET", "/models/b")[2]), {"modelName": "b", "modelUrl": b})
        self.assertEqual(call(self.app, "DELETE", "/models/a")[0], 200)
        self.assertEqual(call(self.app, "DELETE", "/models/a")[0], 404)
        self.assertEqual(call(self.app, "GET", "/models/a")[0], 404)
        self.assertEqual(self.invoke("a", b"[[1, 2]]")[0], 404)
        self.assertEqual(self.load("a", a)[0], 200)  # loads again after an unload

    def test_budget(self):
        big1, big2 = self.model("big1", [1], pad=5 << 20), self.model("big2", [1], pad=5 << 20)
        self.assertEqual(self.load("big1", big1)[0], 200)
        code, _, body = self.load("big2", big2)
        self.assertEqual(code, 507, body)
        self.assertIn("out of memory", error_of(body)[2])
        self.assertEqual(call(self.app, "DELETE", "/models/big1")[0], 200)
        self.assertEqual(self.load("big2", big2)[0], 200)

    def test_bad_loads(self):
        outside = tempfile.mkdtemp()
        cases = [
            (b"not json", 400), (b"[]", 400), (b'{"model_name": "", "url": "/x"}', 400),
            (json.dumps({"model_name": "x", "url": outside}).encode(), 400),
            (json.dumps({"model_name": "x", "url": self.root + "/../etc"}).encode(), 400),
            (json.dumps({"model_name": "x", "url": self.root + "/missing"}).encode(), 404),
            (json.dumps({"model_name": "a/b", "url": self.root}).encode(), 400),
        ]
        for body, want in cases:
            with self.subTest(body=body):
                code, _, out = call(self.app, "POST", "/models", body, {"Content-Type": "application/json"})
                self.assertEqual(code, want, out)
        os.rmdir(outside)

    def test_failing_model_fn_is_reported(self):
        d = self.model("bad", [1])
        os.remove(os.path.join(d, "w.json"))
        with self.assertLogs("mce_serving", "ERROR"):
            code, _, out = self.load("bad", d)
        self.assertEqual(code, 500)
        self.assertIn("FileNotFoundError", error_of(out)[2])
        self.assertEqual(json.loads(call(self.app, "GET", "/models")[2]), {"models": []})

    def test_concurrent_invokes_and_unload(self):
        self.assertEqual(self.load("a", self.model("a", [2]))[0], 200)
        results = []

        def worker():
            for _ in range(50):
                code, _, body = self.invoke("a", b"[[3]]")
                results.append(code if code != 200 else json.loads(body))

        ts = [threading.Thread(target=worker) for _ in range(4)]
        for t in ts:
            t.start()
        call(self.app, "DELETE", "/models/a")
        for t in ts:
            t.join()
        self.assertTrue(all(r in ([6], 404) for r in results), results[:5])


class SettingsTest(unittest.TestCase):
    def test_defaults(self):
        s = Settings({})
        self.assertEqual((s.port, s.program, s.code_dir, s.timeout, s.max_payload, s.default_accept, s.multi_model),
                         (8080, "inference.py", "/opt/ml/model/code", 60, 6 << 20, "application/json", False))
        self.assertGreater(s.memory_budget, 0)

    def test_values(self):
        s = Settings({"SAGEMAKER_BIND_TO_PORT": "9001", "SAGEMAKER_MULTI_MODEL": "TRUE", "MCE_MODEL_MEMORY_MB": "64",
                      "SAGEMAKER_SUBMIT_DIRECTORY": "/opt/ml/code", "SAGEMAKER_PROGRAM": "serve.py"})
        self.assertEqual((s.port, s.multi_model, s.memory_budget, s.code_dir, s.program),
                         (9001, True, 64 << 20, "/opt/ml/code", "serve.py"))

    def test_submit_directory_url_is_refused(self):
        # mce fetches s3:// code archives itself and passes /opt/ml/code; a URL
        # reaching the container was fetched by nobody, and is said so.
        with self.assertRaisesRegex(SettingsError, r"SAGEMAKER_SUBMIT_DIRECTORY='s3://b/sourcedir.tar.gz'.*/opt/ml/code"):
            Settings({"SAGEMAKER_SUBMIT_DIRECTORY": "s3://b/sourcedir.tar.gz"})

    def test_bad(self):
        for env in ({"SAGEMAKER_BIND_TO_PORT": "x"}, {"SAGEMAKER_BIND_TO_PORT": "70000"},
                    {"SAGEMAKER_MODEL_SERVER_WORKERS": "0"}, {"MCE_FRAMEWORK": "tf"}):
            with self.subTest(env=env):
                with self.assertRaises(SettingsError):
                    Settings(env)


if __name__ == "__main__":
    unittest.main()
