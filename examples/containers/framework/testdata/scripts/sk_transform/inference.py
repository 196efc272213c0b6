# transform_fn instead of input_fn / predict_fn / output_fn: CSV in, CSV out, and the
# CustomAttributes echoed back to the client through context.
import io
import os

import joblib
import numpy as np


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def transform_fn(model, request_body, content_type, accept, context):
    if content_type != "text/csv":
        raise ValueError("this model reads text/csv only")
    rows = np.loadtxt(io.StringIO(request_body), delimiter=",", ndmin=2)
    context.set_response_header(0, "X-Amzn-SageMaker-Custom-Attributes", "rows=%d" % len(rows))
    return "\n".join(repr(float(v)) for v in model.predict(rows)) + "\n", "text/csv"
