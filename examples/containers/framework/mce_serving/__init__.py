"""mce_serving: mce's serving toolkit for SageMaker-style framework containers.

It runs a user's unmodified SageMaker inference script (``inference.py`` with ``model_fn``,
``input_fn``, ``predict_fn``, ``output_fn`` or ``transform_fn``) behind the SageMaker
inference container contract: ``/ping`` and ``/invocations`` on ``SAGEMAKER_BIND_TO_PORT``,
and, with ``SAGEMAKER_MULTI_MODEL=true``, the multi-model container API.

User code may raise :class:`InferenceError` (or any exception carrying an integer
``status_code`` attribute between 400 and 599, as the SageMaker toolkit's
``BaseInferenceToolkitError`` does) to answer a client error of its choice.
"""

from .errors import InferenceError

__all__ = ["InferenceError"]
