# PyTorch hooks in the style of SageMaker's PyTorch examples: a custom model file name,
# NPY in, softmax probabilities out as CSV, and torch.no_grad() around the forward pass.
import io
import os

import numpy as np
import torch


def model_fn(model_dir):
    model = torch.jit.load(os.path.join(model_dir, "net.pth"), map_location="cpu")
    model.eval()
    return model


def input_fn(request_body, request_content_type):
    assert request_content_type == "application/x-npy", request_content_type
    return torch.from_numpy(np.load(io.BytesIO(request_body))).float()


def predict_fn(input_data, model):
    with torch.no_grad():
        return torch.softmax(model(input_data), dim=1)


def output_fn(prediction, content_type):
    rows = prediction.numpy().tolist()
    return "".join(",".join(repr(v) for v in row) + "\n" for row in rows), "text/csv"
