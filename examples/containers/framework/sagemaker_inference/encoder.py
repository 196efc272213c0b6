"""encode(array_like, content_type): a prediction to the bytes of content_type."""

from mce_serving.content import encode as _encode


def encode(array_like, content_type):
    return _encode(array_like, content_type)
