"""Makes test models and wheels with known parameters, inside a framework image.

    python3 make_model.py OUTDIR SPECS_JSON

SPECS_JSON is a list of {"dir": "sub/folder", "kind": …, …}, each written under OUTDIR/dir:
  linreg    {"coef": [..], "intercept": x, "file": "model.joblib", "pad_mb": 0}   sklearn LinearRegression
  logreg    {"coef": [[..], ..], "intercept": [..], "file": …}                     sklearn LogisticRegression
  torch     {"weight": [[..], ..], "bias": [..], "file": "model.pt", "pad_mb": 0}  TorchScript nn.Linear
  statedict {"weight": …, "bias": …, "file": "model.pth"}                           a plain state dict (not TorchScript)
  wheel     {"name": "mcehelper", "version": "1.0", "source": "OFFSET = 5\n"}       a pure-Python wheel
Nothing is trained: the parameters are the test's, so it can compute the expected outputs itself.
pad_mb adds a file of that many MiB beside the model (its size counts in multi-model memory).
"""

import base64
import hashlib
import json
import os
import sys
import zipfile


def pad(out, spec):
    mb = spec.get("pad_mb", 0)
    if mb:
        with open(os.path.join(out, "padding.bin"), "wb") as f:
            f.write(b"\0" * (mb << 20))


def sklearn_model(out, spec):
    import joblib
    import numpy as np
    from sklearn.linear_model import LinearRegression, LogisticRegression

    if spec["kind"] == "linreg":
        m = LinearRegression()
        m.coef_ = np.array(spec["coef"], dtype=np.float64)
        m.intercept_ = float(spec["intercept"])
    else:
        m = LogisticRegression()
        m.coef_ = np.array(spec["coef"], dtype=np.float64)
        m.intercept_ = np.array(spec["intercept"], dtype=np.float64)
        m.classes_ = np.arange(m.coef_.shape[0] if m.coef_.shape[0] > 1 else 2)
    m.n_features_in_ = m.coef_.shape[-1]
    joblib.dump(m, os.path.join(out, spec.get("file", "model.joblib")))


def torch_model(out, spec):
    import torch

    w = torch.tensor(spec["weight"], dtype=torch.float32)
    lin = torch.nn.Linear(w.shape[1], w.shape[0])
    with torch.no_grad():
        lin.weight.copy_(w)
        lin.bias.copy_(torch.tensor(spec["bias"], dtype=torch.float32))
    path = os.path.join(out, spec.get("file", "model.pt"))
    if spec["kind"] == "statedict":
        torch.save(lin.state_dict(), path)
    else:
        torch.jit.save(torch.jit.script(lin), path)


def wheel(out, spec):
    name, version = spec["name"], spec.get("version", "1.0")
    info = "%s-%s.dist-info" % (name, version)
    files = {
        "%s/__init__.py" % name: spec.get("source", "").encode(),
        "%s/METADATA" % info: ("Metadata-Version: 2.1\nName: %s\nVersion: %s\n" % (name, version)).encode(),
        "%s/WHEEL" % info: b"Wheel-Version: 1.0\nGenerator: mce-test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append("%s,sha256=%s,%d" % (path, digest, len(data)))
    record.append("%s/RECORD,," % info)
    files["%s/RECORD" % info] = ("\n".join(record) + "\n").encode()
    with zipfile.ZipFile(os.path.join(out, "%s-%s-py3-none-any.whl" % (name, version)), "w") as z:
        for path, data in files.items():
            z.writestr(path, data)


def main():
    for spec in json.loads(sys.argv[2]):
        make(os.path.join(sys.argv[1], spec.get("dir", ".")), spec)


def make(out, spec):
    os.makedirs(out, exist_ok=True)
    kind = spec["kind"]
    if kind in ("linreg", "logreg"):
        sklearn_model(out, spec)
    elif kind in ("torch", "statedict"):
        torch_model(out, spec)
    elif kind == "wheel":
        wheel(out, spec)
    else:
        sys.exit("unknown kind " + kind)
    pad(out, spec)


if __name__ == "__main__":
    main()
