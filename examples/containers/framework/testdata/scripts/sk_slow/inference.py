# A model that takes a while to load (the container must not answer /ping 200 before it is), and
# a prediction that hangs on a feature value of 99 (SAGEMAKER_MODEL_SERVER_TIMEOUT must end it).
import os
import sys
import time

import joblib


def model_fn(model_dir):
    print("model_fn: start", flush=True, file=sys.stderr)
    time.sleep(float(os.environ.get("SLOW_SECONDS", "3")))
    print("model_fn: done", flush=True, file=sys.stderr)
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def predict_fn(input_data, model):
    if (input_data == 99).any():
        time.sleep(3600)
    return model.predict(input_data)
