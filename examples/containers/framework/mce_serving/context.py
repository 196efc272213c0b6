"""The ``context`` argument hooks may take.

It has the attributes and methods of the Context that SageMaker's model servers pass to
handlers (``model_name``, ``model_dir``, ``system_properties``, ``get_request_header``,
``get_all_request_header``, ``set_response_content_type``, ``set_response_status``) and,
because the real toolkits lose them (sagemaker-inference-toolkit #110), the request's
CustomAttributes: ``context.custom_attributes`` is the value of the
``X-Amzn-SageMaker-Custom-Attributes`` header (None when absent), also readable with
``context.get_request_header(0, "X-Amzn-SageMaker-Custom-Attributes")``.

A hook may set a response header through ``context.set_response_header(0, name, value)``;
``X-Amzn-SageMaker-Custom-Attributes`` set that way goes back to the client.

``system_properties["gpu_id"]`` is the CUDA device index the model is served on (see gpu.py), or None
on a host without one, so that ``torch.device("cuda:" + str(context.system_properties.get("gpu_id")))``,
as SageMaker's examples write it, names a real device.

One Context is made per request (and one, without a request, for model_fn); it is not
shared between threads.
"""

CUSTOM_ATTRIBUTES = "X-Amzn-SageMaker-Custom-Attributes"


class Context:
    def __init__(self, model_name, model_dir, headers=None, gpu_id=None):
        self.model_name = model_name
        self.model_dir = model_dir
        self.system_properties = {
            "model_dir": model_dir,
            "gpu_id": gpu_id,  # a CUDA device index, None without one
            "batch_size": 1,
            "server_name": "mce_serving",
            "server_version": "1",
        }
        self.manifest = {"model": {"modelName": model_name}}
        # Header names are matched case-insensitively; stored lower-cased.
        self._headers = {k.lower(): v for k, v in (headers or {}).items()}
        self.response_headers = {}
        # The adapter the request names (X-Amzn-SageMaker-Adapter-Identifier), loaded by the
        # script's adapter_fn; None without one (adapters.py).
        self.adapter = None
        self.adapter_name = None
        # A bidirectional stream's own dict, the same for each of its messages (bidi.py).
        self.stream = None
        self.response_status = None
        self.response_content_type = None

    @property
    def custom_attributes(self):
        """The X-Amzn-SageMaker-Custom-Attributes request header, or None."""
        return self._headers.get(CUSTOM_ATTRIBUTES.lower())

    @property
    def request_headers(self):
        """All request headers, names lower-cased."""
        return dict(self._headers)

    def get_request_header(self, idx, key):
        """The value of request header key (case-insensitive), or None. idx is the
        request's position in a batch; batches hold one request here."""
        return self._headers.get(str(key).lower())

    def get_all_request_header(self, idx):
        return dict(self._headers)

    def set_response_content_type(self, idx, value):
        self.response_content_type = value

    def get_response_content_type(self, idx):
        return self.response_content_type

    def set_response_header(self, idx, key, value):
        self.response_headers[str(key)] = str(value)

    def set_response_status(self, code=200, phrase=""):
        self.response_status = (int(code), phrase)
