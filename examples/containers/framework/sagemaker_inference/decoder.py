"""decode(obj, content_type): a request body (str or bytes) to a numpy array."""

from mce_serving.content import decode as _decode


def decode(obj, content_type):
    return _decode(obj, content_type)
