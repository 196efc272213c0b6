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

Only one socket is ever opened: 0.0.0.0:SAGEMAKER_BIND_TO_PORT (no metrics, gRPC or
management ports).
"""

import logging
import os
import sys

from . import usercode
from .app import SingleModelApp
from .errors import ModelLoadError
from .handler import Handler, UserCodeError
from .settings import Settings, SettingsError

log = logging.getLogger("mce_serving")


def setup_logging(level):
    logging.basicConfig(stream=sys.stderr, level=level,
                        format="%(asctime)s %(levelname)s %(process)d %(name)s: %(message)s")


def load_single(s):
    """Imports the user's script and loads the model; raises on failure."""
    module = usercode.import_single(s.code_dir, s.program)
    if module is None:
        log.info("no %s in %s: serving with the %s defaults only", s.program, s.code_dir, s.framework)
    handler = Handler(module, s.model_dir, s.framework, s.default_accept, model_name="model")
    handler.load()
    return handler


def gunicorn_options(s, app=None):
    opts = {
        "bind": ["0.0.0.0:%d" % s.port],
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
        # Several processes each using every core for one model's math only contend; share them out.
        if s.framework == "pytorch":
            import torch
            torch.set_num_threads(max(1, (os.cpu_count() or 1) // s.workers))
        if app is not None:
            app.start_watchdog(s.timeout)
    return hook


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
    app = factory = None
    if s.multi_model:
        def factory():
            # Built in the worker, where the models live: their memory is measured in that process.
            from .multimodel import MultiModelApp
            return MultiModelApp(s)
        log.info("multi-model mode: memory budget %d MiB, %s defaults", s.memory_budget >> 20, s.framework)
    else:
        try:
            handler = load_single(s)
        except UserCodeError as e:
            log.error("loading the model failed in the inference script: %s", e, exc_info=e.__cause__)
            return 1
        except ModelLoadError as e:
            log.error("loading the model failed: %s", e)
            return 1
        except Exception:
            log.exception("loading the model failed")
            return 1
        app = SingleModelApp(handler, s.max_payload)
    log.info("listening on 0.0.0.0:%d", s.port)
    run_gunicorn(gunicorn_options(s, app), app=app, factory=factory)
    return 0
