"""The error classes scripts raise; ``status_code`` sets the HTTP status of the answer."""

from mce_serving.content import ENCODABLE
from mce_serving.errors import InferenceError


class BaseInferenceToolkitError(InferenceError):
    """An error with an HTTP status: BaseInferenceToolkitError(status_code, message, phrase)."""

    def __init__(self, status_code, message, phrase=None):
        super().__init__(status_code, message, phrase)


class GenericInferenceToolkitError(BaseInferenceToolkitError):
    """The same, with the phrase optional."""


class UnsupportedFormatError(InferenceError):
    """A content type or accept the script does not handle (415)."""

    def __init__(self, content_type, **kwargs):
        super().__init__(415, "Content type %s is not supported by this script; supported: %s"
                         % (content_type, ", ".join(ENCODABLE)))
