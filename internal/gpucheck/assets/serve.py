"""Serves the toolkit's multi-model API (mce_serving.multimodel.MultiModelApp) as a plain process with
werkzeug's threaded server, on 127.0.0.1: the GPU check's stand-in for `docker run IMAGE serve` on a
machine without Docker or gunicorn.

Load requests name /opt/ml/models/<id>/model, the path a container sees; here that folder is
MCE_GPUCHECK_MODELS (mce's model cache), so the "url" of POST /models is rewritten to it, as a bind
mount would make it. Settings are the toolkit's own environment variables (SAGEMAKER_BIND_TO_PORT,
MCE_FRAMEWORK, MCE_MODEL_MEMORY_MB, ...). A request body ends at its Content-Length, as gunicorn
makes it."""

import io
import json
import logging
import os
import sys

from werkzeug.serving import WSGIRequestHandler, run_simple
from werkzeug.wsgi import LimitedStream

from mce_serving.multimodel import MultiModelApp
from mce_serving.settings import Settings

CONTAINER_ROOT = "/opt/ml/models/"
MAX_LOAD_BODY = 64 << 10


class Rewrite:
    def __init__(self, app, root):
        self.app, self.root = app, root.rstrip("/") + "/"

    def __call__(self, environ, start_response):
        # As gunicorn does, a body ends at its Content-Length: a reader that reads to the end
        # must not wait on the kept-alive socket.
        try:
            length = int(environ.get("CONTENT_LENGTH") or 0)
        except ValueError:
            length = 0
        environ["wsgi.input"] = LimitedStream(environ["wsgi.input"], max(0, length))
        if environ.get("REQUEST_METHOD") == "POST" and environ.get("PATH_INFO") == "/models":
            n = int(environ.get("CONTENT_LENGTH") or 0)
            body = environ["wsgi.input"].read(min(n, MAX_LOAD_BODY))
            try:
                req = json.loads(body)
                if isinstance(req, dict) and str(req.get("url", "")).startswith(CONTAINER_ROOT):
                    req["url"] = self.root + req["url"][len(CONTAINER_ROOT):]
                    body = json.dumps(req).encode()
            except ValueError:
                pass  # the app answers 400
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return self.app(environ, start_response)


class Quiet(WSGIRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_request(self, *args, **kwargs):
        pass


def main():
    s = Settings.from_env()
    logging.basicConfig(stream=sys.stderr, level=s.log_level,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    root = os.environ["MCE_GPUCHECK_MODELS"]
    app = Rewrite(MultiModelApp(s, models_root=root), root)
    run_simple("127.0.0.1", s.port, app, threaded=True, request_handler=Quiet, use_reloader=False)


if __name__ == "__main__":
    main()
