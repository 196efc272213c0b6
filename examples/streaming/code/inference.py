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
"""
import json
import math
import os
import pickle
import random

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


def predict_fn(req, model):
    bad = sorted({c for c in req["prompt"] if c not in model.index})
    if bad:
        raise BadRequest("the prompt has characters outside the model's alphabet (printable ASCII and newline): "
                         + ", ".join(repr(c) for c in bad[:10]))
    # Everything that can be refused is checked above, before the answer starts.
    return generate(model, req["prompt"], req["max_tokens"], req["temperature"], req["seed"])


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
    for t in (a.split(";")[0].strip().lower() for a in accept.split(",")):
        if t in ("text/plain", "text/*", "*/*"):
            return tokens, "text/plain; charset=utf-8"
        if t == "application/jsonlines":
            return (json.dumps({"token": c}) + "\n" for c in tokens), "application/jsonlines"
    raise BadRequest("Accept %s is not supported: use text/plain or application/jsonlines" % accept[:100], 406)
