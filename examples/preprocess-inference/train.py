"""Train the preprocess -> inference chain on scikit-learn's bundled digits data set and pack it.

Run at build time by scripts/framework-models.sh inside mce-framework-base/pytorch:bookworm (it has
scikit-learn and PyTorch; no download: the 8x8 digits ship inside Debian's python3-sklearn):

    python3 examples/preprocess-inference/train.py OUTDIR

Writes to OUTDIR:
  digits-preprocess.tar.gz  model.joblib (StandardScaler + PCA, fitted) + code/ from preprocess/code
  digits-network.tar.gz     model.pt (a TorchScript MLP on the PCA components) + code/ from network/code
  digits-expected.json      the held-out test rows, their true labels, and the labels and probabilities
                            computed here in-process (no HTTP, no CSV, no serving toolkit), for the tests
  digits-sample.csv         the first 5 test images, one per line (64 pixel values 0-16), for the README
and prints the test accuracy.
"""
import io
import os
import sys

import joblib
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.decomposition import PCA
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "framework-models"))
import artifact  # noqa: E402

COMPONENTS = 32  # what the preprocessing step hands to the network (one CSV row per input row)


class MLP(torch.nn.Module):
    """COMPONENTS PCA features -> 64 hidden units -> 10 digit logits."""

    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(COMPONENTS, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))

    def forward(self, x):
        return self.net(x)


def main(out):
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    digits = load_digits()
    x_train, x_test, y_train, y_test = train_test_split(
        digits.data, digits.target, test_size=0.25, random_state=0, stratify=digits.target)

    # Step 1: the scikit-learn preprocessing pipeline, fitted on the training rows only.
    pre = Pipeline([("scale", StandardScaler()), ("pca", PCA(n_components=COMPONENTS, random_state=0))])
    pre.fit(x_train)

    # Step 2: the network, trained full-batch on the transformed training rows.
    feats = torch.from_numpy(pre.transform(x_train).astype(np.float32))
    labels = torch.from_numpy(y_train.astype(np.int64))
    net = MLP()
    opt = torch.optim.Adam(net.parameters(), lr=0.01)
    for _ in range(300):
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(net(feats), labels)
        loss.backward()
        opt.step()
    net.eval()

    # The expected answers, computed in-process: transform, float32, forward, softmax.
    with torch.no_grad():
        probs = torch.softmax(net(torch.from_numpy(pre.transform(x_test).astype(np.float32))), dim=1).numpy()
    pred = probs.argmax(axis=1)
    top2 = np.sort(probs, axis=1)[:, -2:]
    accuracy = float((pred == y_test).mean())

    buf = io.BytesIO()
    joblib.dump(pre, buf)
    artifact.pack(os.path.join(out, "digits-preprocess.tar.gz"),
                  {"model.joblib": buf.getvalue(), **artifact.code_dir(os.path.join(HERE, "preprocess", "code"))})
    buf = io.BytesIO()
    torch.jit.save(torch.jit.script(net), buf)
    artifact.pack(os.path.join(out, "digits-network.tar.gz"),
                  {"model.pt": buf.getvalue(), **artifact.code_dir(os.path.join(HERE, "network", "code"))})
    artifact.write_json(os.path.join(out, "digits-expected.json"), {
        "accuracy": accuracy,
        "rows": x_test.tolist(),
        "labels": y_test.tolist(),
        "predictions": pred.tolist(),
        "probabilities": probs.tolist(),
        # how far the winner is ahead of the runner-up: a row whose margin is tiny may flip
        # when the rows travel as CSV text between the steps
        "margins": (top2[:, 1] - top2[:, 0]).tolist(),
    })
    with open(os.path.join(out, "digits-sample.csv"), "w") as f:
        f.writelines(",".join(str(int(v)) for v in row) + "\n" for row in x_test[:5])
    print(f"preprocess-inference: digits, StandardScaler+PCA({COMPONENTS}) -> MLP, "
          f"{len(y_train)} training rows, test accuracy {accuracy:.4f} on {len(y_test)} rows; "
          f"digits-sample.csv holds digits {y_test[:5].tolist()}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/models/framework")
