"""A character-level language model that streams its text as it generates it.

SageMaker's inference-script contract (model_fn / input_fn / predict_fn / output_fn), served by
mce-framework/pytorch. predict_fn returns a generator: mce's toolkit sends each character as one
HTTP chunk the moment it is sampled (Transfer-Encoding: chunked), which is what
InvokeEndpointWithResponseStream relays as PayloadPart events.

The model is a character n-gram model with Witten-Bell interpolation: the probability of the
next character mixes what followed the last N-1 characters in the training text with what
followed shorter and shorter contexts, down to single-character frequencies. It is defined
here once; train.py imports it from this file.

Request (application/json):
    {"prompt": "This License", "max_tokens": 200, "temperature": 0.8, "seed": 7}
    prompt       text to continue, printable ASCII and newlines, at most 1000 characters ("" allowed)
    max_tokens   characters to generate, 1..512 (default 200)
    temperature  0 (always the likeliest character) .. 2 (default 0.8)
    seed         0 .. 2**63-1: the same seed, prompt and settings give the same text (default: random)
Answer: the generated characters (text/plain), or one {"token": "c"} line per character with
Accept: application/jsonlines. Anything else in the request is a 400, an unsupported
Content-Type 415, an unsupported Accept 406.

OpenAI Chat Completions, as SageMaker's OpenAI-compatible route sends them to /invocations
(application/json with "messages"), like AWS's LLM containers:
    {"model": "...", "messages": [{"role": "user", "content": "This License"}],
     "max_tokens": 200, "temperature": 0.8, "seed": 7, "stream": false}
    The last message is the prompt (a string, or a list of {"type": "text", "text": ...} parts);
    max_completion_tokens is taken for max_tokens, n must be 1, and OpenAI's other sampling
    fields (top_p, stop, penalties, logprobs, tools, ...) are refused rather than ignored.
Answer: a chat.completion object, or with "stream": true server-sent events of
chat.completion.chunk objects, one character each, a last chunk with finish_reason "length",
(with stream_options.include_usage, a usage chunk), then "data: [DONE]". The same seed,
prompt and settings give the same text as the plain request.

Stateful sessions, as AWS's LLM containers play them (model-hosting-container-standards), when
SAGEMAKER_ENABLE_STATEFUL_SESSIONS=true:
    X-Amzn-SageMaker-Session-Id: NEW_SESSION with {"requestType": "NEW_SESSION"} opens a session:
        the answer's X-Amzn-SageMaker-New-Session-Id is "<id>; Expires=<UTC time>Z" (life:
        SAGEMAKER_SESSIONS_EXPIRATION seconds, default 1200), the body {"session_id", "expires"}.
    X-Amzn-SageMaker-Session-Id: <id> with a generation request (plain or chat) continues the
        session's text: the model reads the session's last characters, then the prompt, and the
        session keeps what was written (its last 1000 characters). {"prompt": ""} continues
        where the last call stopped.
    X-Amzn-SageMaker-Session-Id: <id> with {"requestType": "CLOSE"} closes it: the answer's
        X-Amzn-SageMaker-Closed-Session-Id is the id.
    An id this container did not open, or closed, or let expire, is a 400.

Bidirectional streams (InvokeEndpointWithBidirectionalStream; mce's toolkit serves the WebSocket
and calls bidi_fn per message): each text message is a generation request as above
({"prompt", "max_tokens", "temperature", "seed"}); the answer is one {"token": "c"} message per
character as it is drawn, then {"done": true, "characters": N}. The stream keeps its text as a
session does: each message continues what the stream wrote before. A request the model refuses
is answered {"error": "..."} and the stream goes on.

Adapters (LoRA-style, as inference components' adapters load them through mce's toolkit: POST
/adapters {"name", "src"}, then calls with X-Amzn-SageMaker-Adapter-Identifier): an adapter is a
small n-gram of the same alphabet trained on other text, in <src>/adapter.json, with its mixing
weight w in <src>/adapter_config.json ({"weight": w}, 0 < w <= 1). A call naming it draws each
character from (1 - w) * the model's distribution + w * the adapter's. Sessions live in files
    under SAGEMAKER_SESSIONS_PATH (default /dev/shm), shared by the server's worker processes; at
    most 1000 are open at once (the next NEW_SESSION is a 429). Two calls in one session at the
    same time both read the same text; the last to finish writes it.
"""
import json
import math
import os
import pickle
import random
import re
import tempfile
import time
import uuid

MAX_TOKENS = 512
MAX_PROMPT = 1000


class NGram:
    """Counts of the characters that follow each context of 1 .. order-1 characters."""

    def __init__(self, chars, order):
        self.chars = chars  # the alphabet, sorted
        self.index = {c: i for i, c in enumerate(chars)}
        self.order = order
        self.unigram = [0] * len(chars)
        # tables[k]: {context of k characters: {next character: count}}
        self.tables = [None] + [{} for _ in range(order - 1)]

    def fit(self, text):
        for i, c in enumerate(text):
            self.unigram[self.index[c]] += 1
            for k in range(1, self.order):
                if i >= k:
                    cont = self.tables[k].setdefault(text[i - k:i], {})
                    cont[c] = cont.get(c, 0) + 1
        return self

    def distribution(self, context):
        """The probability of each character of the alphabet after context (a list, alphabet order)."""
        v = len(self.chars)
        total = sum(self.unigram)
        p = [(n + 1) / (total + v) for n in self.unigram]  # add-one: every character stays possible
        for k in range(1, min(self.order - 1, len(context)) + 1):
            cont = self.tables[k].get(context[-k:])
            if cont is None:
                break  # a longer context that never occurred cannot have occurred either
            n, t = sum(cont.values()), len(cont)
            p = [t * q / (n + t) for q in p]
            for c, m in cont.items():
                p[self.index[c]] += m / (n + t)
        return p

    def to_json(self):
        return {"order": self.order, "chars": "".join(self.chars), "unigram": self.unigram,
                "tables": [t for t in self.tables[1:]]}

    @classmethod
    def from_json(cls, d, chars):
        """An n-gram from its JSON form, checked as hostile input: the same alphabet as chars, an
        order of 2 to 10, counts that are non-negative integers, contexts of the right length."""
        if not isinstance(d, dict) or d.get("chars") != "".join(chars):
            raise ValueError("the adapter's alphabet is not the model's")
        order = d.get("order")
        if not isinstance(order, int) or isinstance(order, bool) or not 2 <= order <= 10:
            raise ValueError("order must be an integer from 2 to 10")
        m = cls(list(chars), order)
        uni = d.get("unigram")
        if not isinstance(uni, list) or len(uni) != len(chars) or not all(_count(n) for n in uni):
            raise ValueError("unigram must hold one count per character")
        tables = d.get("tables")
        if not isinstance(tables, list) or len(tables) != order - 1:
            raise ValueError("tables must hold order - 1 tables")
        for k, t in enumerate(tables, 1):
            if not isinstance(t, dict):
                raise ValueError("table %d is not an object" % k)
            for ctx, cont in t.items():
                if len(ctx) != k or not isinstance(cont, dict) or not all(
                        c in m.index and _count(n) for c, n in cont.items()) or any(c not in m.index for c in ctx):
                    raise ValueError("table %d holds a bad context %r" % (k, ctx[:20]))
        m.unigram, m.tables = uni, [None] + tables
        return m

    def save(self, f):
        pickle.dump({"chars": self.chars, "order": self.order, "unigram": self.unigram, "tables": self.tables}, f,
                    protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, f):
        d = pickle.load(f)
        m = cls(d["chars"], d["order"])
        m.unigram, m.tables = d["unigram"], d["tables"]
        return m


def _count(n):
    return isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 2**53


class Adapted:
    """The model with an adapter mixed in: each distribution is (1 - w) * the model's + w * the adapter's."""

    def __init__(self, base, adapter, weight):
        self.base, self.adapter, self.weight = base, adapter, weight
        self.order, self.chars, self.index = base.order, base.chars, base.index

    def distribution(self, context):
        w = self.weight
        pa = self.adapter.distribution(context[-(self.adapter.order - 1):])
        return [(1 - w) * p + w * q for p, q in zip(self.base.distribution(context), pa)]


MAX_ADAPTER_BYTES = 16 << 20


def adapter_fn(model, name, src):
    """Loads adapter name from folder src: adapter.json (an n-gram of the model's alphabet) and
    adapter_config.json ({"weight": w}). Raises on anything else: the toolkit answers 400."""
    def read(fn):
        path = os.path.join(src, fn)
        if os.path.getsize(path) > MAX_ADAPTER_BYTES:
            raise ValueError("%s is larger than %d bytes" % (fn, MAX_ADAPTER_BYTES))
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    cfg = read("adapter_config.json")
    w = cfg.get("weight") if isinstance(cfg, dict) else None
    if isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 < w <= 1:
        raise ValueError("adapter_config.json: weight must be a number in (0, 1]")
    return NGram.from_json(read("adapter.json"), model.chars), float(w)


class BadRequest(ValueError):
    """A request this model refuses; mce's toolkit answers it with status_code."""

    def __init__(self, message, status_code=400):
        super().__init__(message)
        self.message = message
        self.status_code = status_code


def model_fn(model_dir):
    with open(os.path.join(model_dir, "ngram.pickle"), "rb") as f:
        return NGram.load(f)


def _number(req, key, default, lo, hi, integer):
    v = req.get(key, default)
    if isinstance(v, bool) or not isinstance(v, (int, float)) or (integer and not isinstance(v, int)):
        raise BadRequest("%s must be %s" % (key, "an integer" if integer else "a number"))
    if (isinstance(v, float) and not math.isfinite(v)) or not lo <= v <= hi:
        raise BadRequest("%s must be between %s and %s" % (key, lo, hi))
    return v


SESSION_HEADER = "X-Amzn-SageMaker-Session-Id"
NEW_SESSION_HEADER = "X-Amzn-SageMaker-New-Session-Id"
CLOSED_SESSION_HEADER = "X-Amzn-SageMaker-Closed-Session-Id"
MAX_SESSIONS = 1000
SESSION_ID = re.compile(r"^[a-zA-Z0-9](-*[a-zA-Z0-9])*$")


class Sessions:
    """Stateful sessions in files, one JSON file per session: {"expires": unix time, "text": ...}."""

    def __init__(self, root, ttl):
        self.dir = os.path.join(root, "textgen-sessions")
        self.ttl = ttl
        os.makedirs(self.dir, exist_ok=True)

    @classmethod
    def from_env(cls):
        if os.environ.get("SAGEMAKER_ENABLE_STATEFUL_SESSIONS", "").strip().lower() != "true":
            return None
        ttl = int(os.environ.get("SAGEMAKER_SESSIONS_EXPIRATION", "1200"))
        if not 1 <= ttl <= 86400:
            raise ValueError("SAGEMAKER_SESSIONS_EXPIRATION must be 1 to 86400 seconds")
        return cls(os.environ.get("SAGEMAKER_SESSIONS_PATH", "/dev/shm"), ttl)

    def _path(self, sid):
        if len(sid) > 256 or not SESSION_ID.match(sid):
            raise BadRequest("session id %r is not one this container opens" % sid[:80])
        return os.path.join(self.dir, sid + ".json")

    def _write(self, sid, state):
        fd, tmp = tempfile.mkstemp(dir=self.dir, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(state, f)
        os.replace(tmp, self._path(sid))  # atomic: another worker reads the old or the new text

    def _purge(self):
        now = time.time()
        for name in os.listdir(self.dir):
            path = os.path.join(self.dir, name)
            try:
                with open(path) as f:
                    if json.load(f)["expires"] <= now:
                        os.remove(path)
            except (OSError, ValueError, KeyError):
                pass

    def open(self):
        if len(os.listdir(self.dir)) >= MAX_SESSIONS:
            self._purge()
            if len(os.listdir(self.dir)) >= MAX_SESSIONS:
                raise BadRequest("%d sessions are open: close one first" % MAX_SESSIONS, 429)
        sid = str(uuid.uuid4())
        expires = int(time.time()) + self.ttl
        self._write(sid, {"expires": expires, "text": ""})
        return sid, expires

    def get(self, sid):
        path = self._path(sid)
        try:
            with open(path) as f:
                state = json.load(f)
        except (OSError, ValueError):
            raise BadRequest("session %s is not open here: it was never opened, or was closed or expired" % sid[:80]) from None
        if state["expires"] <= time.time():
            self.close(sid)
            raise BadRequest("session %s expired" % sid)
        return state

    def keep(self, sid, state, text):
        state["text"] = text[-MAX_PROMPT:]
        if os.path.exists(self._path(sid)):  # not closed meanwhile
            self._write(sid, state)

    def close(self, sid):
        try:
            os.remove(self._path(sid))
        except FileNotFoundError:
            pass


SESSIONS = Sessions.from_env()


def _utc(t):
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(t))


def input_fn(body, content_type, context=None):
    req = _input(body, content_type)
    sid = context.get_request_header(0, SESSION_HEADER) if context is not None and SESSIONS is not None else None
    op = req.get("requestType")
    if op is not None:
        if SESSIONS is None:
            raise BadRequest("stateful sessions are off: set SAGEMAKER_ENABLE_STATEFUL_SESSIONS=true")
        if op == "NEW_SESSION":
            if sid != "NEW_SESSION":
                raise BadRequest('open a session with the session id NEW_SESSION and {"requestType": "NEW_SESSION"}')
        elif op == "CLOSE":
            if not sid or sid == "NEW_SESSION":
                raise BadRequest('close a session with its id and {"requestType": "CLOSE"}')
            SESSIONS.get(sid)
        return {"session_op": op, "session": sid, "context": context}
    if sid == "NEW_SESSION":
        raise BadRequest('NEW_SESSION opens a session: send {"requestType": "NEW_SESSION"}, then the calls with its id')
    if sid:
        req["session"], req["session_state"] = sid, SESSIONS.get(sid)
    if context is not None and getattr(context, "adapter", None) is not None:
        req["adapter"] = context.adapter
    return req


def _input(body, content_type):
    if content_type != "application/json":
        raise BadRequest('send application/json: {"prompt": "...", "max_tokens": N}', 415)
    try:
        req = json.loads(body)
    except ValueError as e:
        raise BadRequest("the body is not JSON: %s" % e) from None
    if not isinstance(req, dict):
        raise BadRequest("the body must be a JSON object")
    if "requestType" in req:
        if set(req) != {"requestType"} or req["requestType"] not in ("NEW_SESSION", "CLOSE"):
            raise BadRequest('a session request is {"requestType": "NEW_SESSION"} or {"requestType": "CLOSE"} alone')
        return req
    if "messages" in req:
        return chat_input(req)
    unknown = sorted(set(req) - {"prompt", "max_tokens", "temperature", "seed"})
    if unknown:
        raise BadRequest("unknown field(s): %s" % ", ".join(unknown)[:200])
    prompt = req.get("prompt", "")
    if not isinstance(prompt, str):
        raise BadRequest("prompt must be a string")
    if len(prompt) > MAX_PROMPT:
        raise BadRequest("prompt is longer than %d characters" % MAX_PROMPT)
    seed = req.get("seed")
    return {
        "prompt": prompt,
        "max_tokens": _number(req, "max_tokens", 200, 1, MAX_TOKENS, True),
        "temperature": float(_number(req, "temperature", 0.8, 0, 2, False)),
        "seed": random.getrandbits(63) if seed is None else _number(req, "seed", 0, 0, 2**63 - 1, True),
    }


# OpenAI fields the chat mode reads; ACCEPTED_IGNORED are metadata that change nothing of the text.
CHAT_FIELDS = {"model", "messages", "max_tokens", "max_completion_tokens", "temperature", "seed", "stream",
               "stream_options", "n"}
CHAT_IGNORED = {"user", "metadata", "store"}


def chat_input(req):
    """The request of an OpenAI chat completion: its last message is the prompt."""
    unknown = sorted(set(req) - CHAT_FIELDS - CHAT_IGNORED)
    if unknown:
        raise BadRequest("this model does not support: %s" % ", ".join(unknown)[:200])
    messages = req["messages"]
    if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
        raise BadRequest("messages must be a non-empty list of objects")
    content = messages[-1].get("content")
    if isinstance(content, list):  # content parts: only text ones
        if not all(isinstance(p, dict) and p.get("type") == "text" and isinstance(p.get("text"), str) for p in content):
            raise BadRequest("this model reads text content parts only")
        content = "".join(p["text"] for p in content)
    if not isinstance(content, str):
        raise BadRequest("the last message's content must be a string")
    if len(content) > MAX_PROMPT:
        raise BadRequest("the last message is longer than %d characters" % MAX_PROMPT)
    if req.get("n", 1) != 1 or isinstance(req.get("n", 1), bool):
        raise BadRequest("n must be 1")
    stream = req.get("stream", False)
    if stream is None:
        stream = False
    if not isinstance(stream, bool):
        raise BadRequest("stream must be true or false")
    opts = req.get("stream_options") or {}
    if not isinstance(opts, dict) or set(opts) - {"include_usage"}:
        raise BadRequest("stream_options may hold include_usage only")
    model = req.get("model", "")
    seed = req.get("seed")
    key = "max_completion_tokens" if req.get("max_completion_tokens") is not None else "max_tokens"
    return {
        "prompt": content,
        "max_tokens": _number(req, key, 200, 1, MAX_TOKENS, True) if req.get(key) is not None else 200,
        "temperature": float(_number(req, "temperature", 0.8, 0, 2, False)) if req.get("temperature") is not None else 0.8,
        "seed": random.getrandbits(63) if seed is None else _number(req, "seed", 0, 0, 2**63 - 1, True),
        "chat": {"stream": stream, "usage": bool(opts.get("include_usage")), "model": model if isinstance(model, str) else ""},
    }


class Chat:
    """A chat completion being generated: the characters, and what output_fn frames them with."""

    def __init__(self, tokens, prompt, max_tokens, stream, usage, model):
        self.tokens, self.stream, self.usage, self.model = tokens, stream, usage, model or "textgen"
        self.prompt_tokens, self.max_tokens = len(prompt), max_tokens
        self.id = "chatcmpl-%016x" % random.getrandbits(64)
        self.created = int(time.time())

    def _obj(self, kind, **fields):
        return dict({"id": self.id, "object": kind, "created": self.created, "model": self.model}, **fields)

    def whole(self):
        text = "".join(self.tokens)
        return json.dumps(self._obj("chat.completion", choices=[{
            "index": 0, "finish_reason": "length", "logprobs": None,
            "message": {"role": "assistant", "content": text}}],
            usage={"prompt_tokens": self.prompt_tokens, "completion_tokens": len(text),
                   "total_tokens": self.prompt_tokens + len(text)}))

    def events(self):
        def event(obj):
            return "data: " + json.dumps(obj) + "\n\n"
        yield event(self._obj("chat.completion.chunk", choices=[{"index": 0, "delta": {"role": "assistant", "content": ""}}]))
        n = 0
        for c in self.tokens:
            n += 1
            yield event(self._obj("chat.completion.chunk", choices=[{"index": 0, "delta": {"content": c}}]))
        yield event(self._obj("chat.completion.chunk", choices=[{"index": 0, "delta": {}, "finish_reason": "length"}]))
        if self.usage:
            yield event(self._obj("chat.completion.chunk", choices=[], usage={
                "prompt_tokens": self.prompt_tokens, "completion_tokens": n, "total_tokens": self.prompt_tokens + n}))
        yield "data: [DONE]\n\n"


def session_op(req):
    """Opens or closes a session; the answer's headers say which, as SageMaker reads them."""
    ctx, op = req["context"], req["session_op"]
    if op == "NEW_SESSION":
        sid, expires = SESSIONS.open()
        ctx.set_response_header(0, NEW_SESSION_HEADER, "%s; Expires=%s" % (sid, _utc(expires)))
        return SessionAnswer({"session_id": sid, "expires": _utc(expires)})
    SESSIONS.close(req["session"])
    ctx.set_response_header(0, CLOSED_SESSION_HEADER, req["session"])
    return SessionAnswer({"session_id": req["session"], "closed": True})


class SessionAnswer(dict):
    """The JSON answer of a session request."""


def in_session(tokens, sid, state, before):
    """Yields tokens, then keeps the session's text: what it held, the prompt, what was written."""
    out = []
    for c in tokens:
        out.append(c)
        yield c
    SESSIONS.keep(sid, state, before + "".join(out))


def predict_fn(req, model):
    if "session_op" in req:
        return session_op(req)
    bad = sorted({c for c in req["prompt"] if c not in model.index})
    if bad:
        raise BadRequest("the prompt has characters outside the model's alphabet (printable ASCII and newline): "
                         + ", ".join(repr(c) for c in bad[:10]))
    # Everything that can be refused is checked above, before the answer starts.
    prompt = req["prompt"]
    if "session" in req:
        prompt = (req["session_state"]["text"] + prompt)[-MAX_PROMPT:]
    if "adapter" in req:
        model = Adapted(model, *req["adapter"])
    tokens = generate(model, prompt, req["max_tokens"], req["temperature"], req["seed"])
    if "session" in req:
        tokens = in_session(tokens, req["session"], req["session_state"], prompt)
    chat = req.get("chat")
    if chat is None:
        return tokens
    return Chat(tokens, req["prompt"], req["max_tokens"], chat["stream"], chat["usage"], chat["model"])


def generate(model, prompt, max_tokens, temperature, seed):
    """Yields max_tokens characters, each drawn from the model's distribution given the text before it."""
    rng = random.Random(seed)
    text = "\n" + prompt  # documents start after a newline, as in training
    for _ in range(max_tokens):
        p = model.distribution(text[-(model.order - 1):])
        if temperature == 0:
            i = max(range(len(p)), key=p.__getitem__)
        else:
            top = max(p)
            w = [(q / top) ** (1 / temperature) for q in p]  # relative to the likeliest: never all zero
            r, i = rng.random() * sum(w), 0
            while i < len(w) - 1 and r >= w[i]:
                r -= w[i]
                i += 1
        c = model.chars[i]
        text += c
        yield c


def bidi_fn(model, message, context):
    """One message of a bidirectional stream: see the module's documentation."""
    state = context.stream
    try:
        if not isinstance(message, str):
            raise BadRequest("send text messages: JSON generation requests")
        req = _input(message, "application/json")
        if "requestType" in req or "messages" in req:
            raise BadRequest('a stream takes {"prompt", "max_tokens", "temperature", "seed"} messages')
        bad = sorted({c for c in req["prompt"] if c not in model.index})
        if bad:
            raise BadRequest("the prompt has characters outside the model's alphabet: " + ", ".join(repr(c) for c in bad[:10]))
    except BadRequest as e:
        yield json.dumps({"error": e.message})
        return
    prompt = (state.get("text", "") + req["prompt"])[-MAX_PROMPT:]
    out = []
    for c in generate(model, prompt, req["max_tokens"], req["temperature"], req["seed"]):
        out.append(c)
        yield json.dumps({"token": c})
    state["text"] = (prompt + "".join(out))[-MAX_PROMPT:]
    yield json.dumps({"done": True, "characters": len(out)})


def output_fn(tokens, accept):
    if isinstance(tokens, SessionAnswer):
        return json.dumps(tokens), "application/json"
    if isinstance(tokens, Chat):  # OpenAI's framing, whatever the Accept (its clients send application/json)
        if tokens.stream:
            return tokens.events(), "text/event-stream"
        return tokens.whole(), "application/json"
    for t in (a.split(";")[0].strip().lower() for a in accept.split(",")):
        if t in ("text/plain", "text/*", "*/*"):
            return tokens, "text/plain; charset=utf-8"
        if t == "application/jsonlines":
            return (json.dumps({"token": c}) + "\n" for c in tokens), "application/jsonlines"
    raise BadRequest("Accept %s is not supported: use text/plain or application/jsonlines" % accept[:100], 406)
