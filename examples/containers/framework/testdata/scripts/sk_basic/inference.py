# The smallest scikit-learn script SageMaker's examples show: model_fn only, the container's
# default input_fn / predict_fn / output_fn for the rest.
import os

import joblib


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))
