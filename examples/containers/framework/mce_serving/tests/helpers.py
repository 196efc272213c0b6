"""Shared helpers of the unit tests: WSGI calls without a server, temporary model folders."""

import io
import json
import os
import shutil
import tempfile
import textwrap
from wsgiref.util import setup_testing_defaults


def call(app, method, path, body=b"", headers=None):
    """Calls a WSGI app; returns (status int, headers dict, body bytes)."""
    env = {}
    setup_testing_defaults(env)
    env["REQUEST_METHOD"] = method
    env["PATH_INFO"] = path
    env["wsgi.input"] = io.BytesIO(body)
    env["CONTENT_LENGTH"] = str(len(body))
    for k, v in (headers or {}).items():
        if k.lower() == "content-type":
            env["CONTENT_TYPE"] = v
        else:
            env["HTTP_" + k.upper().replace("-", "_")] = v
    got = {}

    def start_response(status, hs):
        got["status"] = int(status.split()[0])
        got["headers"] = dict(hs)

    it = app(env, start_response)
    try:
        out = b"".join(it)
    finally:
        if hasattr(it, "close"):  # as a WSGI server does
            it.close()
    return got["status"], got["headers"], out


def error_of(body):
    """The (code, type, message) of an error body."""
    d = json.loads(body)
    return d["code"], d["type"], d["message"]


class ModelDir:
    """A temporary model folder with code/ files; use as a context manager."""

    def __init__(self, files=None, root=None):
        self.root = tempfile.mkdtemp(dir=root)
        for name, text in (files or {}).items():
            path = os.path.join(self.root, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            mode = "wb" if isinstance(text, bytes) else "w"
            with open(path, mode) as f:
                f.write(text if isinstance(text, bytes) else textwrap.dedent(text))

    def __enter__(self):
        return self.root

    def __exit__(self, *exc):
        shutil.rmtree(self.root, ignore_errors=True)
