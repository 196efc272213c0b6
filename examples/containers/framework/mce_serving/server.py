"""`serve`: load the model, then listen on SAGEMAKER_BIND_TO_PORT with gunicorn.

Single-model mode: the user's module is imported and model_fn run in the gunicorn master
*before* any socket is bound, so /ping cannot answer before the model is ready (the real
toolkit's fault #138 is not repeated); then SAGEMAKER_MODEL_SERVER_WORKERS worker processes
are forked and share the loaded model copy-on-write. A failure to load (a bad script, a
model_fn error, requirements without wheels) is logged with its traceback and the process
exits with status 1. Each worker serves one request at a time; one that runs longer than
SAGEMAKER_MODEL_SERVER_TIMEOUT ends its worker (the client's connection closes, the log says
why) and gunicorn forks a fresh one from the loaded master at once.

Multi-model mode: one worker process with threads (SAGEMAKER_MODEL_SERVER_WORKERS of them,
at least 4), so every model is loaded once and its memory measured in the process that serves it.

GPUs (PyTorch with CUDA, see gpu.py): CUDA cannot be used in a process forked from one that used
it, so on a host with CUDA devices the single-model master loads nothing: each worker imports the
script and runs model_fn itself, with system_properties["gpu_id"] = its index mod the device count
(as SageMaker's model servers assign devices), that device current. Workers accept connections only
once loaded, so /ping still cannot answer early; a load failure stops the server (gunicorn's
"Worker failed to boot", exit status 3). Without a CUDA device nothing changes.

Only one socket is ever opened: MCE_BIND_HOST (0.0.0.0):SAGEMAKER_BIND_TO_PORT (no metrics, gRPC or
management ports).

A plain process (MCE_SERVING_SERVER=werkzeug, or where gunicorn is not installed): werkzeug's
threaded server in this one process, no forking, no worker timeout; the models load in it before it
listens. Meant for running the toolkit on a host without Docker (a GPU check, a debugger), e.g.

    SAGEMAKER_MULTI_MODEL=true MCE_FRAMEWORK=pytorch MCE_MODELS_DIR=/srv/models MCE_BIND_HOST=127.0.0.1 \
    SAGEMAKER_BIND_TO_PORT=8080 MCE_SERVING_SERVER=werkzeug PYTHONPATH=examples/containers/framework \
    python3 -m mce_serving serve
"""

import logging
import os
import sys

from . import gpu, usercode
from .app import SingleModelApp
from .errors import ModelLoadError
from .handler import Handler, UserCodeError
from .settings import Settings, SettingsError

log = logging.getLogger("mce_serving")


def setup_logging(level):
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")


def load_single(s, gpu_id=None):
    """Imports the user's script and loads the model on device gpu_id (None: the CPU); raises on failure."""
    with gpu.use(gpu_id):
        module = usercode.import_single(s.code_dir, s.program)
        if module is None:
            log.info("no %s in %s: serving with the %s defaults only", s.program, s.code_dir, s.framework)
        handler = Handler(module, s.model_dir, s.framework, s.default_accept, model_name="model")
        handler.load(gpu_id=gpu_id)
    return handler


def load_single_logged(s, gpu_id=None):
    """load_single, a failure logged with its reason; returns the handler or None."""
    try:
        return load_single(s, gpu_id)
    except UserCodeError as e:
        log.error("loading the model failed in the inference script: %s", e, exc_info=e.__cause__)
    except ModelLoadError as e:
        log.error("loading the model failed: %s", e)
    except Exception:
        log.exception("loading the model failed")
    return None


class _Worker:
    """The index of this gunicorn worker process (its age - 1: the first ones are 0, 1, …; a replacement
    takes the next number), set by post_fork."""
    index = 0


def gunicorn_options(s, app=None):
    opts = {
        "bind": ["%s:%d" % (s.host, s.port)],
        "worker_class": "gthread",
        "timeout": s.timeout,
        "graceful_timeout": 20,
        # mce keeps connections to containers open; a long keep-alive avoids racing its reuse.
        "keepalive": 120,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": logging.getLevelName(s.log_level).lower() if s.log_level >= 10 else "info",
        "proc_name": "mce_serving",
        "limit_request_line": 8190,
    }
    if s.multi_model:
        opts.update(workers=1, threads=max(4, s.workers))
    else:
        opts.update(workers=s.workers, threads=1, post_fork=_post_fork(s, app))
    return opts


def _post_fork(s, app):
    def hook(server, worker):
        _Worker.index = max(0, getattr(worker, "age", 1) - 1)
        # Several processes each using every core for one model's math only contend; share them out.
        if s.framework == "pytorch":
            import torch
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // s.workers))
        if app is not None:
            app.start_watchdog(s.timeout)
    return hook


def single_worker_factory(s):
    """The WSGI application factory of a single-model worker that loads its own model on its own GPU."""
    def factory():
        device = gpu.for_worker(_Worker.index)
        if device is not None:
            gpu.cuda().set_device(device)
        handler = load_single_logged(s, device)
        if handler is None:
            raise SystemExit(3)  # gunicorn: the worker failed to boot, the server stops
        app = SingleModelApp(handler, s.max_payload)
        app.start_watchdog(s.timeout)
        return app
    return factory


def run_werkzeug(s, app):
    """Serves app with werkzeug's threaded server in this process (HTTP/1.1, so streamed answers are chunked;
    werkzeug closes each connection after its answer)."""
    from werkzeug.serving import WSGIRequestHandler, run_simple

    class Quiet(WSGIRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_request(self, *args, **kwargs):  # no access log, as with gunicorn
            pass

    run_simple(s.host, s.port, app, threaded=True, request_handler=Quiet, use_reloader=False)


def plain_server(s):
    """Whether to serve with werkzeug in this process: asked for, or gunicorn is missing."""
    if s.server == "werkzeug":
        return True
    if s.server == "gunicorn":
        return False
    try:
        import gunicorn  # noqa: F401
    except ImportError:
        return True
    return False


def run_gunicorn(opts, app=None, factory=None):
    """Serves app, a WSGI application built before the workers are forked, or the one factory()
    builds in each worker, with gunicorn."""
    from gunicorn.app.base import BaseApplication

    class _App(BaseApplication):
        def load_config(self):
            for k, v in opts.items():
                self.cfg.set(k, v)

        def load(self):
            return app if factory is None else factory()

    _App().run()


def main():
    try:
        s = Settings.from_env()
    except SettingsError as e:
        setup_logging(logging.INFO)
        log.error("bad setting: %s", e)
        return 2
    setup_logging(s.log_level)
    plain = plain_server(s)
    app = factory = None
    if s.multi_model:
        def factory():
            # Built in the worker, where the models live: their memory is measured in that process.
            from .multimodel import MultiModelApp
            return MultiModelApp(s)
        log.info("multi-model mode: memory budget %d MiB, %s defaults, models under %s", s.memory_budget >> 20,
                 s.framework, s.models_dir)
        if plain:
            app, factory = factory(), None
    elif not plain and gpu.device_count(load=s.framework == "pytorch"):
        n = gpu.device_count()
        log.info("%d CUDA device(s): each of the %d workers loads the model on device (worker index mod %d)",
                 n, s.workers, n)
        factory = single_worker_factory(s)
    else:
        handler = load_single_logged(s, gpu.for_worker(0, load=s.framework == "pytorch"))
        if handler is None:
            return 1
        app = SingleModelApp(handler, s.max_payload)
    log.info("listening on %s:%d (%s)", s.host, s.port, "werkzeug, one process" if plain else "gunicorn")
    if plain:
        run_werkzeug(s, app)
    else:
        run_gunicorn(gunicorn_options(s, app), app=app, factory=factory)
    return 0
