"""Errors and their HTTP shape.

Every error answer has the body ``{"code": <status>, "type": <kind>, "message": <text>}``
(``Content-Type: application/json``), the shape of the model server that SageMaker's
inference toolkit runs on. Tracebacks never go to the client: they are written to the
container log (stderr).
"""

import json

# Reason phrases for the statuses the toolkit answers.
PHRASES = {
    400: "BadRequest",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    500: "InternalServerException",
    503: "ServiceUnavailable",
    507: "InsufficientStorage",
}


class InferenceError(Exception):
    """An error with an HTTP status, for user code and the toolkit alike.

    ``raise InferenceError(400, "feature 'age' is missing")`` in a hook answers the
    client 400 with that message. ``status_code`` and ``message`` have the names the
    SageMaker inference toolkit's errors use, so handlers written for it keep working.
    """

    def __init__(self, status_code, message, phrase=None):
        super().__init__(message)
        self.status_code = int(status_code)
        self.message = str(message)
        self.phrase = phrase or PHRASES.get(self.status_code, "Error")


class UnsupportedContentType(InferenceError):
    """The request's Content-Type cannot be decoded (415)."""

    def __init__(self, content_type):
        super().__init__(415, "Content type %s is not supported by this container" % (content_type or "(none)"))


class UnsupportedAccept(InferenceError):
    """None of the types the Accept header lists can be produced (406)."""

    def __init__(self, accept):
        super().__init__(406, "Accept %s is not supported by this container (supported: application/json, "
                              "text/csv, application/x-npy)" % accept)


class ModelLoadError(Exception):
    """The model or the user's code could not be loaded; the message says why."""


def status_of(exc):
    """The HTTP status for an exception raised while serving: its ``status_code``
    when that is a client or server error status, else 500."""
    code = getattr(exc, "status_code", None)
    if isinstance(code, int) and 400 <= code <= 599:
        return code
    return 500


def body(status, message):
    """The JSON error body for status and message."""
    return json.dumps({"code": status, "type": PHRASES.get(status, "Error"), "message": message}).encode()
