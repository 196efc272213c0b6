"""The single-model WSGI application: GET /ping and POST /invocations.

The model is loaded before the application exists (see server.py), so /ping is 200 from the
first moment anything listens. Errors answer in the shape of errors.py; the traceback of an
exception raised by user code goes to the container log.
"""

import json
import logging
import os
import threading
import time
from http import HTTPStatus

from . import adapters, errors, gpu
from .handler import Stream, UserCodeError

log = logging.getLogger("mce_serving")



def status_line(code):
    try:
        return "%d %s" % (code, HTTPStatus(code).phrase)
    except ValueError:
        return "%d Error" % code


def respond(start_response, code, body=b"", content_type=None, headers=()):
    hs = [("Content-Length", str(len(body)))]
    if content_type:
        hs.append(("Content-Type", content_type))
    hs.extend(headers)
    start_response(status_line(code), hs)
    return [body]


def respond_error(start_response, code, message):
    return respond(start_response, code, errors.body(code, message), "application/json")


def read_body(environ, limit):
    """The request body, at most limit bytes; raises InferenceError 413 beyond, 400 on a bad length."""
    raw = environ.get("CONTENT_LENGTH") or ""
    want = None
    if raw:
        try:
            n = int(raw)
        except ValueError:
            raise errors.InferenceError(400, "bad Content-Length") from None
        if n > limit:
            raise errors.InferenceError(413, "the request body (%d bytes) exceeds the %d-byte limit" % (n, limit))
        # Never read past the body: a plain server (werkzeug) hands over the connection's own stream.
        want = max(n, 0)
    stream = environ["wsgi.input"]
    chunks, size = [], 0
    while want is None or size < want:
        chunk = stream.read(min(65536, (limit + 1 if want is None else want) - size))
        if not chunk:
            break
        chunks.append(chunk)
        size += len(chunk)
        if size > limit:
            raise errors.InferenceError(413, "the request body exceeds the %d-byte limit" % limit)
    return b"".join(chunks)


def request_headers(environ):
    """The request's HTTP headers, names in their usual dashed form."""
    out = {}
    for k, v in environ.items():
        if k.startswith("HTTP_"):
            out[k[5:].replace("_", "-").title()] = v
    if environ.get("CONTENT_TYPE"):
        out["Content-Type"] = environ["CONTENT_TYPE"]
    return out


class StreamBody:
    """The WSGI iterable of a streamed answer. Without a Content-Length, gunicorn sends an HTTP/1.1
    answer with ``Transfer-Encoding: chunked`` and writes every piece to the socket as it is
    yielded (one chunk each, no buffering). The status line and headers are already sent when a
    piece fails: the error is logged and raised, and gunicorn then closes the connection without
    the terminating chunk, so the client sees a broken stream rather than a short success.
    ``close`` (called by the server at the end, or when the client went away) closes the user's
    iterator and then runs on_finish."""

    def __init__(self, stream, model_name, on_finish):
        self.stream = stream
        self.model_name = model_name
        self.on_finish = on_finish
        self.pieces = 0

    def __iter__(self):
        try:
            for p in self.stream:
                self.pieces += 1
                yield p
        except UserCodeError as e:
            log.error("model %s: the stream failed after %d bytes in %d pieces (the connection is closed "
                      "without its last chunk): %s", self.model_name, self.stream.sent, self.pieces, e,
                      exc_info=e.__cause__)
            raise

    def close(self):
        try:
            self.stream.close()
        except Exception:
            log.exception("model %s: closing the stream", self.model_name)
        finally:
            if self.on_finish is not None:
                self.on_finish()


def run_invocation(handler, environ, start_response, limit, on_finish=None):
    """Runs one invocation of handler and answers it (success or error). on_finish, when given,
    runs once the answer is complete: before this returns, or, for a streamed answer, when the
    server closes the returned iterable."""
    streaming = False
    oom = False
    try:
        try:
            body = read_body(environ, limit)
            out, ct, ctx = handler.invoke(body, environ.get("CONTENT_TYPE"), environ.get("HTTP_ACCEPT"),
                                          request_headers(environ))
        except UserCodeError as e:
            cause = e.__cause__
            if gpu.is_oom(cause):
                # 507, as for a load: a multi-model manager frees room and retries.
                oom = True
                log.error("model %s: CUDA out of memory in user code: %s", handler.model_name, e, exc_info=cause)
                del cause
                return respond_error(start_response, 507, "CUDA out of memory: %s" % str(e).splitlines()[0])
            code = errors.status_of(cause)
            (log.warning if code < 500 else log.error)(
                "model %s: user code raised %s", handler.model_name, e, exc_info=cause)
            msg = getattr(cause, "message", None) if code != 500 else None
            return respond_error(start_response, code, msg or str(e))
        except errors.InferenceError as e:
            oom = e.status_code == 507 and gpu.is_oom(e.__cause__)
            if e.status_code >= 500:
                log.error("model %s: %s", handler.model_name, e.message, exc_info=e)
            return respond_error(start_response, e.status_code, e.message)
        except Exception as e:  # a fault of the toolkit itself
            if gpu.is_oom(e):
                oom = True
                log.exception("model %s: CUDA out of memory", handler.model_name)
                return respond_error(start_response, 507, "CUDA out of memory: %s" % str(e).splitlines()[0])
            log.exception("model %s: internal error", handler.model_name)
            return respond_error(start_response, 500, "%s: %s" % (type(e).__name__, e))
        code = 200
        if ctx.response_status:
            code = ctx.response_status[0]
        if isinstance(out, Stream):
            # No Content-Length: chunked (see StreamBody).
            start_response(status_line(code), [("Content-Type", ct)] + list(ctx.response_headers.items()))
            streaming = True
            return StreamBody(out, handler.model_name, on_finish)
        return respond(start_response, code, out, ct, ctx.response_headers.items())
    finally:
        if oom:
            # The exception (and the frames holding the request's tensors) is gone by now.
            gpu.release()
        if not streaming and on_finish is not None:
            on_finish()


def serve_adapters(handler, environ, start_response):
    """The adapter API (adapters.py) of handler's model; 404 when its script loads no adapters."""
    if handler.adapters is None:
        return respond_error(start_response, 404, "this model takes no adapters: its script defines no adapter_fn")
    try:
        body = read_body(environ, adapters.MAX_BODY)
        code, out = handler.adapters.serve(environ.get("REQUEST_METHOD", ""), environ.get("PATH_INFO", ""), body)
    except errors.InferenceError as e:
        (log.warning if e.status_code < 500 else log.error)("adapters: %s", e.message)
        return respond_error(start_response, e.status_code, e.message)
    log.info("adapters: %s %s", environ.get("REQUEST_METHOD"), environ.get("PATH_INFO"))
    return respond(start_response, code, json.dumps(out).encode(), "application/json")


class SingleModelApp:
    """WSGI application for one loaded Handler."""

    def __init__(self, handler, max_payload):
        self.handler = handler
        self.max_payload = max_payload
        self._started = None  # monotonic start of the request running in this worker, or None

    def start_watchdog(self, timeout):
        """Ends this worker process when one request runs longer than timeout seconds: Python
        cannot interrupt a stuck predict, and the gunicorn master replaces the worker at once.
        For worker processes serving one request at a time."""
        def watch():
            while True:
                time.sleep(0.5)
                t0 = self._started
                if t0 is not None and time.monotonic() - t0 > timeout:
                    log.error("a request ran longer than SAGEMAKER_MODEL_SERVER_TIMEOUT=%d s: ending worker %d "
                              "(a new one takes its place)", timeout, os.getpid())
                    logging.shutdown()
                    os._exit(1)  # not 3 or 4: gunicorn halts on those (boot and load errors)
        threading.Thread(target=watch, name="mce-watchdog", daemon=True).start()

    def _finished(self):
        self._started = None

    def __call__(self, environ, start_response):
        path, method = environ.get("PATH_INFO", ""), environ.get("REQUEST_METHOD", "")
        if path == "/ping":
            if method not in ("GET", "HEAD"):
                return respond_error(start_response, 405, "use GET /ping")
            return respond(start_response, 200)
        if path == "/invocations":
            if method != "POST":
                return respond_error(start_response, 405, "use POST /invocations")
            # The watchdog covers the whole answer, a streamed one included (until it is closed).
            self._started = time.monotonic()
            return run_invocation(self.handler, environ, start_response, self.max_payload,
                                  on_finish=self._finished)
        if path == "/adapters" or path.startswith("/adapters/"):
            return serve_adapters(self.handler, environ, start_response)
        if path == "/invocations-bidirectional-stream":
            # Not under the watchdog: a stream lasts as long as mce keeps it open.
            from . import bidi  # wsproto is needed only here
            return bidi.serve(self.handler, environ, start_response, respond_error)
        return respond_error(start_response, 404, "no such path; this container serves GET /ping and POST /invocations")
