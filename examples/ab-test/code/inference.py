"""A SageMaker scikit-learn inference script for both versions of the breast-cancer classifier.

Requests: one case per row, the 30 features of the Wisconsin data set, as CSV, JSON (a list of
rows) or NPY: the container's default input_fn decodes them (and refuses other types with 415).
Answers: JSON with the model version, the predicted class per row and its probability of being
benign; or, with Accept: text/csv, one class name per line.
"""
import json
import os

import joblib


def model_fn(model_dir):
    """Load {"model": estimator, "version": "v1"|"v2", "classes": [...]}."""
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def predict_fn(input_data, model):
    """Probability of class 1 (benign) for every row."""
    if input_data.ndim == 1:
        input_data = input_data.reshape(1, -1)
    return {"version": model["version"], "classes": model["classes"],
            "benign": model["model"].predict_proba(input_data)[:, 1]}


def output_fn(prediction, accept):
    """JSON by default; text/csv gives one class name per line."""
    classes = prediction["classes"]
    labels = [classes[int(p >= 0.5)] for p in prediction["benign"]]
    if accept == "text/csv":
        return "".join(label + "\n" for label in labels), "text/csv"
    body = {"model_version": prediction["version"],
            "predictions": [{"label": label, "probability_benign": round(float(p), 6)}
                            for label, p in zip(labels, prediction["benign"])]}
    return json.dumps(body), "application/json"
