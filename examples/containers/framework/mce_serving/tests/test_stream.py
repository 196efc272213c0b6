"""Streamed answers: a hook that returns an iterator is answered piece by piece."""

import io
import json
import os
import tempfile
import types
import unittest
from wsgiref.util import setup_testing_defaults

from mce_serving.app import SingleModelApp, StreamBody
from mce_serving.errors import InferenceError
from mce_serving.handler import Handler, UserCodeError
from mce_serving.multimodel import MultiModelApp
from mce_serving.settings import Settings

from .helpers import call, error_of

JSON = {"Content-Type": "application/json"}


def single(**fns):
    m = types.ModuleType("u")
    fns.setdefault("model_fn", lambda d: None)
    for k, v in fns.items():
        setattr(m, k, v)
    h = Handler(m, "/m")
    h.load()
    return SingleModelApp(h, 1000)


def start(app, body=b"[3]", headers=JSON):
    """Calls app without consuming its answer: (status, headers, iterable)."""
    env = {}
    setup_testing_defaults(env)
    env.update(REQUEST_METHOD="POST", PATH_INFO="/invocations")
    env["wsgi.input"] = io.BytesIO(body)
    env["CONTENT_LENGTH"] = str(len(body))
    env["CONTENT_TYPE"] = headers.get("Content-Type", "")
    if "Accept" in headers:
        env["HTTP_ACCEPT"] = headers["Accept"]
    got = {}

    def start_response(status, hs):
        got["status"], got["headers"] = int(status.split()[0]), dict(hs)

    it = app(env, start_response)
    return got["status"], got["headers"], it


class StreamTest(unittest.TestCase):
    def test_predict_fn_generator_is_streamed_lazily(self):
        produced = []

        def predict_fn(x, model):
            def gen():
                for i in range(int(x[0])):
                    produced.append(i)
                    yield "piece %d\n" % i
            return gen()

        app = single(predict_fn=predict_fn)
        code, hs, it = start(app, headers={"Content-Type": "application/json", "Accept": "text/plain"})
        self.assertEqual(code, 200)
        self.assertNotIn("Content-Length", hs)  # so that the server sends it chunked
        self.assertEqual(hs["Content-Type"], "text/plain")
        self.assertIsInstance(it, StreamBody)
        self.assertEqual(produced, [0])  # the first piece is computed before the status line, no more
        pieces = iter(it)
        self.assertEqual(next(pieces), b"piece 0\n")
        self.assertEqual(produced, [0])
        self.assertEqual(next(pieces), b"piece 1\n")
        self.assertEqual(produced, [0, 1])
        self.assertEqual(list(pieces), [b"piece 2\n"])
        it.close()
        self.assertIsNone(app._started)  # the watchdog stops watching when the answer ends

    def test_watchdog_covers_the_stream(self):
        app = single(predict_fn=lambda x, m: iter(["a", "b"]))
        _, _, it = start(app)
        self.assertIsNotNone(app._started)  # still streaming: a stuck generator ends the worker
        self.assertEqual(b"".join(it), b"ab")
        self.assertIsNotNone(app._started)
        it.close()
        self.assertIsNone(app._started)

    def test_output_fn_and_transform_fn_streams(self):
        def output_fn(prediction, accept):
            return (json.dumps({"token": t}) + "\n" for t in prediction), "application/jsonlines"

        app = single(predict_fn=lambda x, m: ["a", "b"], output_fn=output_fn)
        code, hs, body = call(app, "POST", "/invocations", b"[1]", JSON)
        self.assertEqual((code, hs["Content-Type"]), (200, "application/jsonlines"))
        self.assertEqual(body, b'{"token": "a"}\n{"token": "b"}\n')

        def transform_fn(model, data, ct, accept):
            return iter([b"x", "", "y\u00e9"])  # bytes and str; empty pieces are skipped

        code, hs, body = call(single(transform_fn=transform_fn), "POST", "/invocations", b"[1]", JSON)
        self.assertEqual((code, hs["Content-Type"], body), (200, "application/json", "xy\u00e9".encode()))

    def test_lists_are_still_predictions(self):
        app = single(predict_fn=lambda x, m: [1, 2])
        code, hs, body = call(app, "POST", "/invocations", b"[1]", JSON)
        self.assertEqual((code, hs["Content-Length"], json.loads(body)), (200, str(len(body)), [1, 2]))

    def test_error_before_the_first_piece_has_its_status(self):
        def predict_fn(x, m):
            def gen():
                if x[0] > 2:
                    raise InferenceError(422, "too many")
                yield "never"
            return gen()

        with self.assertLogs("mce_serving", "WARNING"):
            code, hs, body = call(single(predict_fn=predict_fn), "POST", "/invocations", b"[5]", JSON)
        self.assertEqual((code, error_of(body)[2]), (422, "too many"))
        self.assertEqual(hs["Content-Length"], str(len(body)))

    def test_error_mid_stream_breaks_the_stream(self):
        closed = []

        def predict_fn(x, m):
            def gen():
                try:
                    yield "one"
                    raise RuntimeError("model fell over")
                finally:
                    closed.append(True)
            return gen()

        app = single(predict_fn=predict_fn)
        code, _, it = start(app)
        self.assertEqual(code, 200)
        pieces = iter(it)
        self.assertEqual(next(pieces), b"one")
        with self.assertLogs("mce_serving", "ERROR") as logs:
            with self.assertRaises(UserCodeError) as cm:
                next(pieces)
        self.assertIn("model fell over", str(cm.exception))
        self.assertIn("after 3 bytes in 1 pieces", "\n".join(logs.output))
        it.close()
        self.assertEqual(closed, [True])
        self.assertIsNone(app._started)

    def test_bad_piece_type(self):
        app = single(predict_fn=lambda x, m: iter(["ok", 42]))
        _, _, it = start(app)
        with self.assertLogs("mce_serving", "ERROR"):
            with self.assertRaises(UserCodeError) as cm:
                list(it)
        self.assertIn("must be bytes or str, not int", str(cm.exception))
        it.close()

    def test_client_gone_closes_the_generator(self):
        state = []

        def predict_fn(x, m):
            def gen():
                try:
                    for i in range(1000):
                        state.append(i)
                        yield str(i)
                finally:
                    state.append("closed")
            return gen()

        _, _, it = start(single(predict_fn=predict_fn))
        pieces = iter(it)
        next(pieces), next(pieces)
        it.close()  # what the server does when a write fails
        self.assertEqual(state, [0, 1, "closed"])

    def test_empty_stream(self):
        code, hs, body = call(single(predict_fn=lambda x, m: iter([])), "POST", "/invocations", b"[1]", JSON)
        self.assertEqual((code, body), (200, b""))


class MultiModelStreamTest(unittest.TestCase):
    def test_model_in_flight_until_the_stream_ends(self):
        with tempfile.TemporaryDirectory() as root:
            d = os.path.join(root, "s", "model")
            os.makedirs(os.path.join(d, "code"))
            with open(os.path.join(d, "code", "inference.py"), "w") as f:
                f.write("def model_fn(d):\n    return None\n"
                        "def predict_fn(x, m):\n    return (str(i) for i in range(int(x[0])))\n")
            app = MultiModelApp(Settings({"MCE_MODEL_MEMORY_MB": "8"}), models_root=root)
            code, _, _ = call(app, "POST", "/models", json.dumps({"model_name": "s", "url": d}).encode(), JSON)
            self.assertEqual(code, 200)
            env = {}
            setup_testing_defaults(env)
            env.update(REQUEST_METHOD="POST", PATH_INFO="/models/s/invoke", CONTENT_TYPE="application/json",
                       CONTENT_LENGTH="3")
            env["wsgi.input"] = io.BytesIO(b"[4]")
            it = app(env, lambda status, hs: None)
            e = app.models["s"]
            self.assertEqual(e.inflight, 1)
            self.assertEqual(b"".join(it), b"0123")
            it.close()
            self.assertEqual(e.inflight, 0)


if __name__ == "__main__":
    unittest.main()
