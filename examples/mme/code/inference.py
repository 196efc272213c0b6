"""A SageMaker PyTorch inference script, one copy per model of the multi-model endpoint.

scripts/framework-models.sh writes this file into every model's code/ with MODEL_NAME set to that
model's name, so each model carries its own script, as each model of a SageMaker multi-model
endpoint does. model_fn, input_fn and predict_fn are the container's defaults (TorchScript
model.pt; JSON, CSV or NPY rows of 64 values into a float tensor; the network under no_grad);
output_fn adds the softmax and says which model answered.
"""
import json

import torch

MODEL_NAME = "model-template"


def output_fn(prediction, accept):
    """JSON: this model's name, the predicted class per row and the class probabilities."""
    if prediction.dim() == 1:  # a single row
        prediction = prediction.unsqueeze(0)
    probs = torch.softmax(prediction, dim=1)
    body = {"model": MODEL_NAME, "predictions": probs.argmax(dim=1).tolist(),
            "probabilities": [[round(p, 6) for p in row] for row in probs.tolist()]}
    return json.dumps(body), "application/json"
