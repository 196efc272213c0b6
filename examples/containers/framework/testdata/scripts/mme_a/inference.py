# Multi-model, model A: the default TorchScript loading, output scaled by helper.SCALE.
import json

import torch
from helper import SCALE, TAG


def predict_fn(input_data, model):
    with torch.no_grad():
        return model(input_data) * SCALE


def output_fn(prediction, accept):
    return json.dumps({"model": TAG, "outputs": prediction.tolist()}), "application/json"
