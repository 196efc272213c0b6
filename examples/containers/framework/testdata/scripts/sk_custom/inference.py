# Every hook custom, in the style of SageMaker's scikit-learn examples, with the optional
# context argument: CustomAttributes pick what is returned.
import json
import os

import joblib
import numpy as np


def model_fn(model_dir, context):
    assert context.system_properties["model_dir"] == model_dir
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def input_fn(request_body, request_content_type):
    if request_content_type == "application/json":
        return np.array(json.loads(request_body)["features"], dtype=np.float64)
    if request_content_type == "text/csv":
        return np.array([[float(v) for v in line.split(",")] for line in request_body.strip().splitlines()])
    raise ValueError("unsupported content type " + request_content_type)


def predict_fn(input_data, model, context):
    if "labels=true" in (context.custom_attributes or ""):
        return {"labels": model.predict(input_data).tolist()}
    return {"probabilities": model.predict_proba(input_data).tolist()}


def output_fn(prediction, accept, context):
    prediction["custom_attributes"] = context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")
    return json.dumps(prediction), "application/json"
