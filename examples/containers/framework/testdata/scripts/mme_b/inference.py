# Multi-model, model B: its own inference.py and helper.py (the same file names as model A's),
# output shifted by helper.SCALE, and CustomAttributes through context.
import json

import torch
from helper import SCALE, TAG


def predict_fn(input_data, model):
    with torch.no_grad():
        return model(input_data) + SCALE


def output_fn(prediction, accept, context):
    return json.dumps({"model": TAG, "outputs": prediction.tolist(),
                       "custom_attributes": context.custom_attributes}), "application/json"
