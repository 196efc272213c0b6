"""A small compatibility package: the names of SageMaker's ``sagemaker_inference`` toolkit that
inference scripts import (``content_types``, ``decoder``, ``encoder``, ``errors``), implemented on
mce_serving, so that such scripts run unchanged in mce's framework images. Only what scripts use
is here; the model server plumbing of the real package is not.
"""
