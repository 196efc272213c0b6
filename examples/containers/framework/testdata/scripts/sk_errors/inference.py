# Errors raised by user code: an exception with a status_code becomes that status (the script's
# own class, or sagemaker_inference's, as on SageMaker); anything else a 500.
import os

import joblib
from sagemaker_inference import errors


class InvalidInput(Exception):
    def __init__(self, message):
        super().__init__(message)
        self.status_code = 400
        self.message = message


def model_fn(model_dir):
    return joblib.load(os.path.join(model_dir, "model.joblib"))


def predict_fn(input_data, model):
    if (input_data < 0).any():
        raise InvalidInput("features must not be negative")
    if (input_data == 7).any():
        raise errors.GenericInferenceToolkitError(422, "seven is not a valid feature value")
    if (input_data == 13).any():
        raise ValueError("unlucky feature value")
    return model.predict(input_data)
