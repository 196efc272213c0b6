"""Step 1 of the chain: scikit-learn preprocessing (StandardScaler + PCA) of 8x8 digit images.

A SageMaker scikit-learn inference script, unchanged from what runs on SageMaker. The request is
one image per row, 64 pixel values (CSV, JSON or NPY: the container's default input_fn decodes
them). The answer is the 32 PCA components per row; this container is the first of a Serial
chain, so it gets no Accept from the client and answers in SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT
(text/csv in endpoint.yaml), which becomes the Content-Type of the network's request.
"""
import os

import joblib


def model_fn(model_dir):
    """The scikit-learn containers have no default model_fn: load the fitted pipeline."""
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def predict_fn(input_data, model):
    """A transformer, not a predictor: transform instead of the default model.predict."""
    if input_data.ndim == 1:  # a single row
        input_data = input_data.reshape(1, -1)
    return model.transform(input_data)
