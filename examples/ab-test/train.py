"""Train two versions of a breast-cancer classifier for the A/B test, and pack them.

Run at build time by scripts/framework-models.sh inside mce-framework-base/sklearn:bookworm (the
Wisconsin breast cancer data set ships inside Debian's python3-sklearn: no download):

    python3 examples/ab-test/train.py OUTDIR

Both versions see the same training rows and are scored on the same held-out rows:
  cancer-v1.tar.gz   StandardScaler + LogisticRegression (C=1.0)
  cancer-v2.tar.gz   a RandomForestClassifier (300 trees)
each with model.joblib and the same code/inference.py, and
  cancer-expected.json  the test rows, true labels, and each version's labels and probabilities
                        computed here in-process (predict_proba, no HTTP), for the tests
  cancer-sample.csv     the first 5 test rows (30 features each), for the README.
"""
import io
import os
import sys

import joblib
import numpy as np
from sklearn.datasets import load_breast_cancer
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import train_test_split
from sklearn.pipeline import Pipeline
from sklearn.preprocessing import StandardScaler

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "scripts", "framework-models"))
import artifact  # noqa: E402


def main(out):
    os.makedirs(out, exist_ok=True)
    data = load_breast_cancer()
    x_train, x_test, y_train, y_test = train_test_split(
        data.data, data.target, test_size=0.3, random_state=0, stratify=data.target)
    versions = {
        "v1": Pipeline([("scale", StandardScaler()), ("logreg", LogisticRegression(C=1.0, max_iter=1000))]),
        "v2": RandomForestClassifier(n_estimators=300, random_state=0, n_jobs=1),
    }
    expected = {"classes": data.target_names.tolist(), "rows": x_test.tolist(), "labels": y_test.tolist(),
                "versions": {}}
    code = artifact.code_dir(os.path.join(HERE, "code"))
    for version, model in versions.items():
        model.fit(x_train, y_train)
        probs = model.predict_proba(x_test)[:, 1]  # probability of class 1 (benign)
        pred = (probs >= 0.5).astype(int)
        accuracy = float((pred == y_test).mean())
        # What the container loads: the estimator, its version and the class names.
        buf = io.BytesIO()
        joblib.dump({"model": model, "version": version, "classes": data.target_names.tolist()}, buf)
        artifact.pack(os.path.join(out, f"cancer-{version}.tar.gz"), {"model.joblib": buf.getvalue(), **code})
        expected["versions"][version] = {"accuracy": accuracy, "predictions": pred.tolist(),
                                         "probabilities": probs.tolist()}
        print(f"ab-test {version}: {type(model[-1] if isinstance(model, Pipeline) else model).__name__}, "
              f"{len(y_train)} training rows, test accuracy {accuracy:.4f} on {len(y_test)} rows")
    artifact.write_json(os.path.join(out, "cancer-expected.json"), expected)
    with open(os.path.join(out, "cancer-sample.csv"), "w") as f:
        f.writelines(",".join(repr(float(v)) for v in row) + "\n" for row in x_test[:5])
    print(f"ab-test: cancer-sample.csv holds cases {[data.target_names[y] for y in y_test[:5]]}")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "build/models/framework")
