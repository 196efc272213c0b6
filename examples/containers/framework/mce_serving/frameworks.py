"""The default hooks of each framework, used for every hook the user's script leaves out.

scikit-learn (as SageMaker's scikit-learn container):
  model_fn     none: the user must define it (loading fails with a clear error);
  input_fn     JSON, CSV, NPY, NPZ decoded to an array, JSON and CSV as float32, a 1-D array as one row;
  predict_fn   model.predict(data);
  output_fn    the prediction encoded as the negotiated Accept type.
PyTorch (as SageMaker's PyTorch container):
  model_fn     torch.jit.load of model.pt, or of the only *.pt / *.pth, in eval mode, moved to the
               context's device (cuda:<gpu_id>, or the CPU when gpu_id is None);
  input_fn     JSON and CSV to a float32 tensor, NPY to a tensor of its own dtype, on the context's device;
  predict_fn   model.eval(), then model(data) under torch.no_grad(), data moved first to the context's
               device when there is one (on the CPU it is left alone);
  output_fn    the tensor as a list (or array), encoded as the negotiated Accept type.

The PyTorch defaults never read a model's parameters from Python (``model.parameters()``, ``p.device``):
for a TorchScript module that makes the C++ parameters own Python tensor objects, and with Debian's torch
1.13 a model freed by the garbage collector while other threads run torch then corrupts the heap (the
multi-model worker died with SIGSEGV; ``python3 -m mce_serving.stress`` reproduces it). The device is the
context's, which the default model_fn moved the model to.
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


def context_device(context):
    """The torch device of a context: cuda:<gpu_id>, or the CPU when gpu_id is None (or there is no context)."""
    import torch
    gpu_id = context.system_properties.get("gpu_id") if context is not None else None
    return torch.device("cpu") if gpu_id is None else torch.device("cuda", int(gpu_id))


def _torch_model_fn(model_dir, context=None):
    import torch
    path = find_torch_model(model_dir)
    try:
        model = torch.jit.load(path, map_location=torch.device("cpu"))
    except RuntimeError as e:
        raise ModelLoadError("default model_fn: %s is not a TorchScript model (%s); save it with "
                             "torch.jit.save or define model_fn(model_dir)"
                             % (os.path.basename(path), str(e).splitlines()[0] if str(e) else "")) from None
    device = context_device(context)
    if device.type != "cpu":
        model = model.to(device)
    model.eval()
    return model


def _torch_input_fn(data, content_type, context=None):
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
    tensor = torch.from_numpy(np.ascontiguousarray(arr))
    device = context_device(context)
    return tensor.to(device) if device.type != "cpu" else tensor


def _torch_predict_fn(data, model, context=None):
    import torch
    if hasattr(model, "eval"):
        model.eval()
    device = context_device(context)
    if device.type != "cpu" and hasattr(data, "to") and getattr(data, "device", None) != device:
        data = data.to(device)
    with torch.no_grad():
        return model(data)
