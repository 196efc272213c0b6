"""Train the streaming example's character-level language model, and pack it.

Run at build time by scripts/framework-models.sh inside mce-framework-base/pytorch:bookworm:

    python3 examples/streaming/train.py OUTDIR

The text is the license collection Debian's base-files package installs in every system,
/usr/share/common-licenses (GPL, LGPL, GFDL, MPL, Apache, Artistic, BSD, CC0: about 230 000
characters of English once files linked under two names are counted once); nothing is
downloaded. One whole document, Apache-2.0, is held out: the Apache license is never trained on, so its
perplexity measures what the model learned about the language of licenses rather than what it
memorised.

The model is code/inference.py's NGram (one definition for training and serving): a character
7-gram with Witten-Bell interpolation. The order was fixed before looking at the held-out text;
the held-out perplexity of every order from 1 (unigram, the baseline) to 9 is reported beside it.
Written to OUTDIR:
  textgen.tar.gz         ngram.pickle (the counts), code/inference.py
  textgen-expected.json  held-out perplexities and sample generations computed here in-process
                         (for the tests: the container must stream exactly these)
  textgen-adapter.tar.gz an adapter (adapter.json, adapter_config.json): a 7-gram of the first half of the
                         held-out Apache license, mixed in at weight 0.5 (fixed before measuring); its
                         effect is measured on the second half, which neither model saw
"""
import io
import json
import math
import os
import re
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "framework-models"))
sys.path.insert(0, os.path.join(HERE, "code"))
import artifact  # noqa: E402
import inference  # noqa: E402

LICENSES = "/usr/share/common-licenses"
HELD_OUT = "Apache-2.0"
ORDER = 7
ADAPTER_WEIGHT = 0.5
ADAPTER_SAMPLES = [("Licensor", 120, 0.0, 0), ("You may ", 200, 0.6, 7)]
SAMPLES = [  # prompt, max_tokens, temperature, seed: generated here and, in the tests, by the container
    ("This License", 200, 0.0, 0),
    ("You may ", 200, 0.6, 7),
    ("", 300, 0.8, 42),
    ("THE SOFTWARE IS PROVIDED", 512, 1.0, 12345),
]


def normalise(text):
    """Printable ASCII and newlines; runs of spaces become one, lines lose surrounding blanks, at most one
    empty line in a row."""
    text = text.replace("\t", " ").replace("\f", "\n")
    text = "".join(c for c in text if c == "\n" or " " <= c <= "~")
    text = re.sub(r" +", " ", text)
    text = re.sub(r" *\n *", "\n", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip("\n") + "\n"


def documents():
    """{name: normalised text} for each distinct file (several names are links to one file)."""
    seen, docs = set(), {}
    for name in sorted(os.listdir(LICENSES)):
        path = os.path.realpath(os.path.join(LICENSES, name))
        if path in seen or not os.path.isfile(path):
            continue
        seen.add(path)
        with open(path, encoding="utf-8", errors="replace") as f:
            docs[os.path.basename(path)] = normalise(f.read())
    return docs


def perplexity(model, text):
    """Per-character perplexity of model on text, each character predicted from the ones before it."""
    nll = 0.0
    for i in range(1, len(text)):
        p = model.distribution(text[max(0, i - model.order + 1):i])
        nll -= math.log(p[model.index[text[i]]])
    return math.exp(nll / (len(text) - 1))


def main(out):
    os.makedirs(out, exist_ok=True)
    docs = documents()
    test = "\n" + docs.pop(HELD_OUT)
    train = "".join("\n" + d for d in docs.values())
    chars = sorted(set(train) | {"\n"} | {chr(c) for c in range(32, 127)})
    t0 = time.monotonic()
    model = inference.NGram(chars, ORDER).fit(train)
    seconds = time.monotonic() - t0
    ppl = {str(n): perplexity(inference.NGram(chars, n).fit(train) if n != ORDER else model, test)
           for n in range(1, 10)}
    samples = [{"prompt": p, "max_tokens": n, "temperature": t, "seed": s,
                "text": "".join(inference.generate(model, p, n, t, s))} for p, n, t, s in SAMPLES]

    # The adapter: the first half of the held-out license (cut at a line), measured on the second.
    cut = test.index("\n", len(test) // 2) + 1
    adapter = inference.NGram(chars, ORDER).fit(test[:cut])
    adapted = inference.Adapted(model, adapter, ADAPTER_WEIGHT)
    rest = "\n" + test[cut:]
    adapter_ppl = {"base": perplexity(model, rest), "adapted": perplexity(adapted, rest)}
    adapter_samples = [{"prompt": p, "max_tokens": n, "temperature": t, "seed": s,
                        "text": "".join(inference.generate(adapted, p, n, t, s))} for p, n, t, s in ADAPTER_SAMPLES]
    artifact.pack(os.path.join(out, "textgen-adapter.tar.gz"), {
        "adapter.json": json.dumps(adapter.to_json(), separators=(",", ":")).encode(),
        "adapter_config.json": json.dumps({"weight": ADAPTER_WEIGHT}).encode()})

    buf = io.BytesIO()
    model.save(buf)
    artifact.pack(os.path.join(out, "textgen.tar.gz"),
                  {"ngram.pickle": buf.getvalue(), **artifact.code_dir(os.path.join(HERE, "code"))})
    contexts = sum(len(t) for t in model.tables[1:])
    artifact.write_json(os.path.join(out, "textgen-expected.json"), {
        "order": ORDER, "held_out": HELD_OUT, "held_out_chars": len(test) - 1, "train_chars": len(train),
        "contexts": contexts, "perplexity": ppl, "samples": samples,
        "adapter": {"weight": ADAPTER_WEIGHT, "train_chars": cut, "eval_chars": len(rest) - 1,
                    "perplexity": adapter_ppl, "samples": adapter_samples}})
    print(f"streaming: character {ORDER}-gram, Witten-Bell interpolation, {len(train)} training characters from "
          f"{len(docs)} licenses, {contexts} contexts, counted in {seconds:.1f} s; held-out {HELD_OUT} "
          f"({len(test) - 1} chars) perplexity per character: {ORDER}-gram {ppl[str(ORDER)]:.2f}, "
          f"bigram {ppl['2']:.2f}, unigram {ppl['1']:.2f} (orders 1-9: "
          + " ".join(f"{float(v):.2f}" for v in ppl.values()) + ")")
    print(f"streaming: adapter (7-gram of the first {cut} characters of {HELD_OUT}, weight {ADAPTER_WEIGHT}): "
          f"perplexity on the other {len(rest) - 1} characters {adapter_ppl['base']:.2f} without it, "
          f"{adapter_ppl['adapted']:.2f} with it")
    for s in samples[:3]:
        print(f"streaming: sample (prompt {s['prompt']!r}, temperature {s['temperature']}, seed {s['seed']}): "
              f"{(s['prompt'] + s['text'])[:200]!r}")


if __name__ == "__main__":
    main(sys.argv[1])
