"""The default hooks of each framework, used for every hook the user's script leaves out.

scikit-learn (as SageMaker's scikit-learn container):
  model_fn     none: the user must define it (loading fails with a clear error);
  input_fn     JSON, CSV, NPY, NPZ decoded to an array, JSON and CSV as float32, a 1-D array as one row;
  predict_fn   model.predict(data);
  output_fn    the prediction encoded as the negotiated Accept type.
PyTorch (as SageMaker's PyTorch container):
  model_fn     torch.jit.load of model.pt, or of the only *.pt / *.pth, on the CPU, in eval mode;
  input_fn     JSON and CSV to a float32 tensor, NPY to a tensor of its own dtype;
  predict_fn   model.eval(), then model(data) under torch.no_grad();
  output_fn    the tensor as a list (or array), encoded as the negotiated Accept type.
"""

import glob
import os

import numpy as np

from . import content
from .errors import ModelLoadError


class Defaults:
    """The default hooks for one framework; default_accept is SAGEMAKER_DEFAULT_INVOCATIONS_ACCEPT."""

    def __init__(self, framework, default_accept):
        self.framework = framework
        self.default_accept = default_accept
        if framework == "pytorch":
            import torch  # noqa: F401  (fail early when the image lacks it)
            self.model_fn = _torch_model_fn
            self.input_fn = _torch_input_fn
            self.predict_fn = _torch_predict_fn
        else:
            self.model_fn = _sklearn_model_fn
            self.input_fn = _sklearn_input_fn
            self.predict_fn = _sklearn_predict_fn

    def output_fn(self, prediction, accept):
        t = content.negotiate(accept, self.default_accept)
        return content.encode(prediction, t), t


def _sklearn_model_fn(model_dir):
    raise ModelLoadError(
        "the scikit-learn container has no default model_fn: define model_fn(model_dir) in your inference "
        "script (SAGEMAKER_PROGRAM, default code/inference.py), e.g. "
        "`return joblib.load(os.path.join(model_dir, \"model.joblib\"))`")


def _sklearn_input_fn(data, content_type):
    arr = content.decode(data, content_type)
    if content.media_type(content_type) in content.UTF8_TYPES:
        try:
            arr = arr.astype(np.float32)
        except (TypeError, ValueError) as e:
            from .errors import InferenceError
            raise InferenceError(400, "the body is not numeric: %s" % e) from None
    if getattr(arr, "ndim", 2) == 1:
        arr = arr.reshape(1, -1)
    return arr


def _sklearn_predict_fn(data, model):
    return model.predict(data)


def find_torch_model(model_dir):
    """The TorchScript file default model_fn loads: model.pt, else the only *.pt or *.pth."""
    path = os.path.join(model_dir, "model.pt")
    if os.path.isfile(path):
        return path
    found = sorted(glob.glob(os.path.join(model_dir, "*.pt")) + glob.glob(os.path.join(model_dir, "*.pth")))
    if len(found) == 1:
        return found[0]
    if not found:
        raise ModelLoadError("default model_fn: no model.pt (nor any *.pt or *.pth) in the model directory; "
                             "save a TorchScript model as model.pt or define model_fn(model_dir)")
    raise ModelLoadError("default model_fn: no model.pt and several candidates (%s); name the one to load "
                         "model.pt or define model_fn(model_dir)"
                         % ", ".join(os.path.basename(f) for f in found))


def _torch_model_fn(model_dir):
    import torch
    path = find_torch_model(model_dir)
    try:
        model = torch.jit.load(path, map_location=torch.device("cpu"))
    except RuntimeError as e:
        raise ModelLoadError("default model_fn: %s is not a TorchScript model (%s); save it with "
                             "torch.jit.save or define model_fn(model_dir)"
                             % (os.path.basename(path), str(e).splitlines()[0] if str(e) else "")) from None
    model.eval()
    return model


def _torch_input_fn(data, content_type):
    import torch
    arr = content.decode(data, content_type)
    if hasattr(arr, "toarray"):
        arr = arr.toarray()
    if content.media_type(content_type) in content.UTF8_TYPES:
        try:
            arr = arr.astype(np.float32)
        except (TypeError, ValueError) as e:
            from .errors import InferenceError
            raise InferenceError(400, "the body is not numeric: %s" % e) from None
    return torch.from_numpy(np.ascontiguousarray(arr))


def _torch_predict_fn(data, model):
    import torch
    if hasattr(model, "eval"):
        model.eval()
    with torch.no_grad():
        return model(data)
