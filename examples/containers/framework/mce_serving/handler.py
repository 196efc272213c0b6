"""One model behind the hooks: the user's functions where defined, the framework's defaults elsewhere.

Hook signatures are SageMaker's; the trailing ``context`` argument is passed only to a function
whose signature has room for it:

    model_fn(model_dir[, context])
    input_fn(input_data, content_type[, context])
    predict_fn(data, model[, context])
    output_fn(prediction, accept[, context])
    transform_fn(model, input_data, content_type, accept[, context])
    pre_model_fn(model_dir[, context]), model_warmup_fn(model_dir, model[, context])   (optional)
    adapter_fn(model, name, src[, context])   (optional: the model takes adapters; see adapters.py)
    bidi_fn(model, message[, context])        (optional: a bidirectional stream's messages; see bidi.py)

``transform_fn`` replaces the other three and may not be combined with them (an error at load).
``input_fn`` receives JSON and CSV bodies as ``str``, others as ``bytes``. ``output_fn`` and
``transform_fn`` may return a body (bytes or str) or ``(body, content_type)``.

Streaming: when ``predict_fn`` returns an iterator (a generator, typically) and there is no user
``output_fn``, or when ``output_fn`` / ``transform_fn`` returns one (alone or as the body of
``(body, content_type)``), the answer is a ``Stream``: each piece (``bytes`` or ``str``) is sent as
it is produced (see app.py). The first piece is computed here, before the status line is sent, so
an error raised before it still answers with its own status; a list, tuple or array is a
prediction to encode, never a stream.
"""

import collections.abc

import inspect
import logging
import time

from . import content, gpu
from .adapters import ADAPTER_HEADER, Adapters
from .context import Context
from .errors import InferenceError, ModelLoadError
from .frameworks import Defaults

log = logging.getLogger("mce_serving")

HOOKS = ("model_fn", "input_fn", "predict_fn", "output_fn", "transform_fn", "pre_model_fn", "model_warmup_fn",
         "adapter_fn", "bidi_fn")


def takes_context(fn, nargs):
    """Whether fn accepts nargs + 1 positional arguments."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    positional = 0
    for p in params:
        if p.kind == p.VAR_POSITIONAL:
            return True
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            positional += 1
    return positional >= nargs + 1


class _Hook:
    """A hook with its arity decided once."""

    __slots__ = ("fn", "ctx", "user")

    def __init__(self, fn, nargs, user):
        self.fn = fn
        self.ctx = takes_context(fn, nargs)
        self.user = user

    def __call__(self, context, *args):
        if self.ctx:
            return self.fn(*args, context)
        return self.fn(*args)


class UserCodeError(Exception):
    """An exception raised by a hook of the user's script: it keeps the original (``__cause__``)."""


def is_stream(x):
    """Whether a hook's result is a stream of pieces: an iterator that is not a body or a prediction."""
    return isinstance(x, collections.abc.Iterator) and not isinstance(x, (str, bytes, bytearray, memoryview))


def piece_bytes(p):
    """One piece of a stream as bytes; anything but bytes or str is the user's error."""
    if isinstance(p, str):
        return p.encode("utf-8")
    if isinstance(p, (bytes, bytearray, memoryview)):
        return bytes(p)
    raise TypeError("a streamed piece must be bytes or str, not %s" % type(p).__name__)


class Stream:
    """The pieces of a streamed answer, as bytes: the first (already computed) then the rest as the
    user's iterator produces them. Empty pieces are skipped (an empty chunk would end the response).
    Exceptions of the user's iterator are raised as UserCodeError; ``close`` closes it (a generator
    stops where it is when the client goes away)."""

    def __init__(self, first, rest):
        self.first = first
        self.rest = rest
        self.sent = 0  # bytes handed out so far

    def __iter__(self):
        if self.first:
            self.sent += len(self.first)
            yield self.first
        self.first = None
        while True:
            try:
                p = piece_bytes(next(self.rest))
            except StopIteration:
                return
            except Exception as e:
                raise UserCodeError("%s: %s" % (type(e).__name__, e)) from e
            if p:
                self.sent += len(p)
                yield p

    def close(self):
        close = getattr(self.rest, "close", None)
        if close is not None:
            close()

    @classmethod
    def start(cls, it):
        """A Stream of iterator it, its first non-empty piece computed now (UserCodeError on failure)."""
        while True:
            try:
                p = piece_bytes(next(it))
            except StopIteration:
                return cls(b"", it)
            except Exception as e:
                raise UserCodeError("%s: %s" % (type(e).__name__, e)) from e
            if p:
                return cls(p, it)


class Handler:
    """Serves one model. ``load`` runs once; ``invoke`` is safe to call from several threads
    when the model's own predict is."""

    def __init__(self, module, model_dir, framework="sklearn", default_accept=content.JSON, model_name="model"):
        self.model_dir = model_dir
        self.model_name = model_name
        self.default_accept = default_accept
        self.defaults = Defaults(framework, default_accept)
        user = {}
        if module is not None:
            for name in HOOKS:
                fn = getattr(module, name, None)
                if fn is not None:
                    if not callable(fn):
                        raise ModelLoadError("%s in the inference script is not a function" % name)
                    user[name] = fn
        if "transform_fn" in user:
            clash = [n for n in ("input_fn", "predict_fn", "output_fn") if n in user]
            if clash:
                raise ModelLoadError("the inference script defines transform_fn and %s: transform_fn replaces "
                                     "input_fn, predict_fn and output_fn and cannot be combined with them"
                                     % ", ".join(clash))
        self.user = sorted(user)

        def hook(name, nargs):
            if name in user:
                return _Hook(user[name], nargs, True)
            d = getattr(self.defaults, name, None)
            return _Hook(d, nargs, False) if d else None

        self.model_fn = hook("model_fn", 1)
        self.input_fn = hook("input_fn", 2)
        self.predict_fn = hook("predict_fn", 2)
        self.output_fn = hook("output_fn", 2)
        self.transform_fn = hook("transform_fn", 4)
        self.pre_model_fn = hook("pre_model_fn", 1)
        self.model_warmup_fn = hook("model_warmup_fn", 2)
        self.adapter_fn = hook("adapter_fn", 3)
        self.bidi_fn = hook("bidi_fn", 2)
        self.model = None
        self.gpu_id = None
        self.adapters = Adapters(self._load_adapter) if self.adapter_fn else None

    def _load_adapter(self, name, src):
        """Runs the user's adapter_fn; its failure is the caller's (a bad adapter): a 400."""
        ctx = Context(self.model_name, self.model_dir, gpu_id=self.gpu_id)
        try:
            return self._run(self.adapter_fn, ctx, self.model, name, src)
        except UserCodeError as e:
            raise InferenceError(400, "adapter %s from %s could not be loaded: %s" % (name, src, e)) from e.__cause__

    def load(self, gpu_id=None):
        """Runs pre_model_fn, model_fn and model_warmup_fn, with gpu_id (a CUDA device index, or None) as
        the contexts' system_properties["gpu_id"] from now on. Errors propagate (wrapped in UserCodeError
        when the user's code raised them)."""
        t0 = time.monotonic()
        self.gpu_id = gpu_id
        ctx = Context(self.model_name, self.model_dir, gpu_id=gpu_id)
        if self.pre_model_fn:
            self._run(self.pre_model_fn, ctx, self.model_dir)
        self.model = self._run(self.model_fn, ctx, self.model_dir)
        if self.model_warmup_fn:
            self._run(self.model_warmup_fn, ctx, self.model_dir, self.model)
        log.info("model %s loaded in %.3f s on %s (user hooks: %s)", self.model_name, time.monotonic() - t0,
                 "cuda:%d" % gpu_id if gpu_id is not None else "the CPU", ", ".join(self.user) or "none")

    @staticmethod
    def _run(hook, ctx, *args, request=False):
        if not hook.user:
            if not request:
                return hook(ctx, *args)
            try:
                return hook(ctx, *args)
            except (ValueError, TypeError, RuntimeError) as e:
                if gpu.is_oom(e):
                    raise InferenceError(507, "CUDA out of memory: %s" % str(e).splitlines()[0]) from e
                # The default hooks fail this way on input of the wrong shape or type.
                raise InferenceError(400, "%s: %s" % (type(e).__name__, e)) from e
        try:
            return hook(ctx, *args)
        except Exception as e:
            raise UserCodeError("%s: %s" % (type(e).__name__, e)) from e

    def bidi_message(self, message, headers=None, stream=None):
        """Runs bidi_fn on one message of a bidirectional stream; returns what it returned (the
        pieces of a generator are produced as the caller takes them). UserCodeError on failure.
        stream is the stream's own dict, context.stream for every message of it."""
        ctx = Context(self.model_name, self.model_dir, headers, gpu_id=self.gpu_id)
        ctx.stream = stream if stream is not None else {}
        return self._run(self.bidi_fn, ctx, self.model, message)

    def invoke(self, body, content_type, accept, headers=None):
        """Runs one request. Returns (body, content type, context): body is bytes, or a Stream when
        a hook returned an iterator. Raises InferenceError for errors of the toolkit and
        UserCodeError for those of user code."""
        ct = content.media_type(content_type) or content.JSON  # no Content-Type: JSON, as SageMaker does
        accept = (accept or "").strip()
        if accept in ("", "*/*"):
            accept = self.default_accept
        data = body
        if ct in content.UTF8_TYPES:
            try:
                data = body.decode("utf-8")
            except UnicodeDecodeError as e:
                raise InferenceError(400, "the %s body is not UTF-8: %s" % (ct, e)) from None
        ctx = Context(self.model_name, self.model_dir, headers, gpu_id=self.gpu_id)
        if self.adapters is not None:
            name = ctx.get_request_header(0, ADAPTER_HEADER)
            if name:
                ctx.adapter, ctx.adapter_name = self.adapters.get(name), name
        if self.transform_fn:
            result = self._run(self.transform_fn, ctx, self.model, data, ct, accept, request=True)
        else:
            x = self._run(self.input_fn, ctx, data, ct, request=True)
            y = self._run(self.predict_fn, ctx, x, self.model, request=True)
            if is_stream(y) and not self.output_fn.user:
                result = y  # the default output_fn encodes whole predictions; a stream goes out as it comes
            else:
                result = self._run(self.output_fn, ctx, y, accept, request=True)
        out_ct = ctx.response_content_type
        if isinstance(result, tuple) and len(result) == 2:
            result, out_ct = result
        if is_stream(result):
            stream = Stream.start(result)
            if not out_ct:
                out_ct = content.media_type(accept.split(",")[0]) or self.default_accept
            return stream, str(out_ct), ctx
        if isinstance(result, str):
            result = result.encode("utf-8")
        elif not isinstance(result, (bytes, bytearray, memoryview)):
            # A hook returned a prediction rather than a body: encode it as the client asked.
            t = content.negotiate(accept, self.default_accept)
            result, out_ct = content.encode(result, t), out_ct or t
        if not out_ct:
            out_ct = content.media_type(accept.split(",")[0]) or self.default_accept
        return bytes(result), str(out_ct), ctx
