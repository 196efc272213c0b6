"""Step 2 of the chain: a PyTorch network classifying the PCA components into digits 0-9.

A SageMaker PyTorch inference script. model_fn and input_fn are the container's defaults: it
loads the TorchScript model.pt and decodes the CSV rows of step 1 into a float tensor.
"""
import json

import torch


def predict_fn(data, model):
    """Class probabilities per row (softmax of the network's logits)."""
    model.eval()
    with torch.no_grad():
        if data.dim() == 1:  # a single row
            data = data.unsqueeze(0)
        return torch.softmax(model(data.float()), dim=1)


def output_fn(prediction, accept):
    """text/csv: one predicted digit per line. Otherwise JSON with the digits and probabilities."""
    labels = prediction.argmax(dim=1).tolist()
    if accept == "text/csv":
        return "".join(f"{label}\n" for label in labels), "text/csv"
    body = {"predictions": labels, "probabilities": [[round(p, 6) for p in row] for row in prediction.tolist()]}
    return json.dumps(body), "application/json"
