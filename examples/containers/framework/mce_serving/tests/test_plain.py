"""The server as a plain process (MCE_SERVING_SERVER=werkzeug): no gunicorn, no fork, loopback only; what a
GPU machine without Docker runs. werkzeug closes every connection after its answer and hands the application
the connection's own stream: a body read past its Content-Length would hang the request."""

import http.client
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
import unittest

try:
    import werkzeug  # noqa: F401
except ImportError:
    werkzeug = None

from .test_apps import SCRIPT

TOOLKIT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@unittest.skipIf(werkzeug is None, "werkzeug is not installed here")
class PlainProcessTest(unittest.TestCase):
    def test_multi_model_with_werkzeug(self):
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        d = os.path.join(tmp.name, "a")
        os.makedirs(os.path.join(d, "code"))
        with open(os.path.join(d, "code", "inference.py"), "w") as f:
            f.write(SCRIPT)
        with open(os.path.join(d, "w.json"), "w") as f:
            json.dump({"w": [1, 2]}, f)
        port = free_port()
        env = dict(os.environ, SAGEMAKER_MULTI_MODEL="true", MCE_SERVING_SERVER="werkzeug", MCE_BIND_HOST="127.0.0.1",
                   SAGEMAKER_BIND_TO_PORT=str(port), MCE_MODELS_DIR=tmp.name, MCE_FRAMEWORK="sklearn",
                   PYTHONPATH=TOOLKIT)
        log = open(os.path.join(tmp.name, "server.log"), "w+b")
        self.addCleanup(log.close)
        proc = subprocess.Popen([sys.executable, "-m", "mce_serving", "serve"], env=env, stdout=log,
                                stderr=subprocess.STDOUT)
        self.addCleanup(proc.wait, 10)
        self.addCleanup(proc.terminate)
        conn = None
        deadline = time.monotonic() + 60
        while conn is None:
            if proc.poll() is not None:
                log.seek(0)
                self.fail("the server exited %d: %s" % (proc.returncode, log.read().decode()[-2000:]))
            try:
                c = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
                c.request("GET", "/ping")
                self.assertEqual(c.getresponse().status, 200)
                conn = c
            except OSError:
                self.assertLess(time.monotonic(), deadline, "no /ping answer in 60 s")
                time.sleep(0.2)

        def req(method, path, body=None):
            conn.request(method, path, body=body, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            return r.status, r.read()

        self.assertEqual(req("POST", "/models", json.dumps({"model_name": "a", "url": d}))[0], 200)
        for _ in range(3):
            self.assertEqual(req("POST", "/models/a/invoke", b"[[1, 1], [2, 0]]"), (200, b"[3.0, 2.0]"))
        status, body = req("GET", "/models")
        self.assertEqual((status, json.loads(body)), (200, {"models": [{"modelName": "a", "modelUrl": d}]}))
        self.assertEqual(req("DELETE", "/models/a")[0], 200)
        self.assertEqual(req("POST", "/models/a/invoke", b"[[1, 1]]")[0], 404)
        conn.close()


if __name__ == "__main__":
    unittest.main()
