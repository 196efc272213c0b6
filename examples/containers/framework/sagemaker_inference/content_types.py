"""Media types, under the names scripts use (sagemaker_inference.content_types)."""

from mce_serving.content import CSV, JSON, NPY, NPZ, UTF8_TYPES  # noqa: F401

OCTET_STREAM = "application/octet-stream"
ANY = "*/*"
