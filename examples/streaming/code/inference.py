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
"""
import json
import math
import os
import pickle
import random
import time

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

    def save(self, f):
        pickle.dump({"chars": self.chars, "order": self.order, "unigram": self.unigram, "tables": self.tables}, f,
                    protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def load(cls, f):
        d = pickle.load(f)
        m = cls(d["chars"], d["order"])
        m.unigram, m.tables = d["unigram"], d["tables"]
        return m


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


def input_fn(body, content_type):
    if content_type != "application/json":
        raise BadRequest('send application/json: {"prompt": "...", "max_tokens": N}', 415)
    try:
        req = json.loads(body)
    except ValueError as e:
        raise BadRequest("the body is not JSON: %s" % e) from None
    if not isinstance(req, dict):
        raise BadRequest("the body must be a JSON object")
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


def predict_fn(req, model):
    bad = sorted({c for c in req["prompt"] if c not in model.index})
    if bad:
        raise BadRequest("the prompt has characters outside the model's alphabet (printable ASCII and newline): "
                         + ", ".join(repr(c) for c in bad[:10]))
    # Everything that can be refused is checked above, before the answer starts.
    tokens = generate(model, req["prompt"], req["max_tokens"], req["temperature"], req["seed"])
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


def output_fn(tokens, accept):
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
